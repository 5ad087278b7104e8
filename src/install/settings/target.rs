//! The settings file a command works on: the path the user gave and the file behind it, its
//! sidecars (the backup, the lock), the project that holds it, and reading it safely.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::record::Record;
use crate::error::{Error, Result};
use crate::state::protected::RECORD_FILE;
use crate::sys::files;
use crate::sys::lock::FileLock;

/// The settings file as it is on disk, resolved through a symlink to the file it names.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    /// The path the user gave.
    pub given: PathBuf,
    /// The file actually read and written.
    pub file: PathBuf,
}

impl Target {
    pub(crate) fn resolve(given: &Path) -> Result<Target> {
        let file = match std::fs::symlink_metadata(given) {
            Ok(meta) if meta.file_type().is_symlink() => std::fs::canonicalize(given)
                .map_err(|e| Error::io("follow the symlink", given, &e))?,
            _ => std::path::absolute(given).map_err(|e| Error::io("resolve", given, &e))?,
        };
        Ok(Target {
            given: given.to_path_buf(),
            file,
        })
    }

    fn sidecar(&self, suffix: &str) -> PathBuf {
        let mut name = self.file.file_name().unwrap_or_default().to_os_string();
        name.push(suffix);
        self.file.with_file_name(name)
    }

    pub(crate) fn backup(&self) -> PathBuf {
        self.sidecar(".vigil-backup")
    }

    pub(super) fn lock(&self) -> Result<FileLock> {
        // Gone again once released: nothing is left beside the settings file.
        FileLock::transient_at(&self.sidecar(".vigil-lock"), Duration::from_secs(30))
    }

    /// The project that holds the file: the parent of its `.claude/` or `.codex/`, else its
    /// own directory. `~/.claude/settings.json` gives `~`, so the record is `~/.vigil/`.
    pub(crate) fn project(&self) -> PathBuf {
        let dir = self.given_dir();
        match dir.file_name().and_then(|n| n.to_str()) {
            Some(".claude" | ".codex") => dir.parent().map(Path::to_path_buf).unwrap_or(dir),
            _ => dir,
        }
    }

    pub(super) fn given_dir(&self) -> PathBuf {
        let absolute = std::path::absolute(&self.given).unwrap_or_else(|_| self.given.clone());
        absolute.parent().map(Path::to_path_buf).unwrap_or_default()
    }

    /// The project's install record (SPEC §2): in its protected state.
    pub(super) fn record(&self) -> Record {
        let project = self.project();
        Record {
            legacy: project.join(".vigil").join(RECORD_FILE),
            project,
        }
    }

    /// Whether the project still has an install record (another settings file's, after an
    /// uninstall).
    pub(crate) fn has_record(&self) -> bool {
        self.record().exists()
    }

    /// The settings files the project's install record holds (every install of vigil in it).
    pub(crate) fn installed_files(&self) -> Vec<String> {
        self.record()
            .load()
            .ok()
            .and_then(|record| {
                let files = record.get("files")?.as_object()?;
                Some(files.keys().cloned().collect())
            })
            .unwrap_or_default()
    }

    /// The file's bytes, `None` when it does not exist. Only a regular file is read: a FIFO
    /// or device in its place is refused rather than waited on, and one larger than
    /// [`MAX_SETTINGS`] before it is read whole (issue 44).
    pub(super) fn read(&self) -> Result<Option<Vec<u8>>> {
        read_settings(&self.file, &self.given, "settings file")
    }

    /// The backup's bytes, `None` when there is none. One that is there but cannot be read is
    /// an error: the user's original bytes may be all it holds, so nothing may go on as if it
    /// were not there (issue 44).
    pub(super) fn read_backup(&self) -> Result<Option<Vec<u8>>> {
        let backup = self.backup();
        read_settings(&backup, &backup, "backup").map_err(|e| {
            Error::input(format!(
                "{e}; it may hold your original settings, so nothing was changed: read it, or move it aside, and run again"
            ))
        })
    }

    /// Refuses a file its owner made read-only: rewriting it (by rename, which the directory
    /// allows) would undo a choice the user made. Nothing is changed.
    pub(super) fn writable(&self) -> Result<()> {
        match std::fs::metadata(&self.file) {
            Ok(meta) if meta.permissions().readonly() => Err(Error::input(format!(
                "{} is read-only; make it writable (chmod u+w) and run again; nothing was changed",
                self.given.display()
            ))),
            _ => Ok(()),
        }
    }
}

/// The most of a settings file vigil reads: a larger one is refused before it is read whole.
pub(crate) const MAX_SETTINGS: u64 = 8 << 20;

/// A settings file's bytes (or its backup's), `None` when it does not exist; `shown` names it
/// in an error.
fn read_settings(path: &Path, shown: &Path, what: &str) -> Result<Option<Vec<u8>>> {
    let file = match files::open_regular(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("read", path, &e)),
    };
    let size = file
        .metadata()
        .map_err(|e| Error::io("read", path, &e))?
        .len();
    if size > MAX_SETTINGS {
        return Err(Error::input(format!(
            "the {what} {} is {}, larger than the {} vigil reads; nothing was changed",
            shown.display(),
            files::human_bytes(size),
            files::human_bytes(MAX_SETTINGS)
        )));
    }
    files::read_capped(file, MAX_SETTINGS, &format!("the {what}"), path).map(Some)
}
