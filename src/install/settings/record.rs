//! The project's install record (SPEC §2): what each install of vigil in the project added to
//! which settings file, kept in its protected state, so uninstall takes out exactly that.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::{INSTALLED_SCHEMA, render};
use crate::error::{Error, Result};
use crate::install::protect;
use crate::install::protect::Protection;
use crate::state::protected;
use crate::state::protected::RECORD_FILE;
use crate::sys::atomic::write_atomic;
use crate::sys::files;
use crate::sys::lock::FileLock;

/// A project's install record. In the state home, in a directory named after the project
/// directory itself (canonical): not after the git top, which an agent can move by planting or
/// removing a `.git`, and not shared with the other projects of one repository. Where the state
/// home cannot be written, in the project's fallback state (`.vigil/state/`), as for loops.
/// `legacy` is where earlier builds kept it (`.vigil/installed.json`).
///
/// A record found only where the agent can write (the fallback, or the legacy place) is read
/// as a list of vigil's entries and nothing more: uninstall takes those out of the file, but
/// never deletes the file or puts a backup back on its word.
#[derive(Clone, Debug)]
pub(super) struct Record {
    pub(super) project: PathBuf,
    pub(super) legacy: PathBuf,
}

impl Record {
    /// The record in the state home, when there is one to name.
    fn protected(&self) -> Option<PathBuf> {
        Some(protected::install_dir(&self.project)?.join(RECORD_FILE))
    }

    fn fallback(&self) -> PathBuf {
        self.project.join(".vigil/state").join(RECORD_FILE)
    }

    /// The record where it is now, making nothing, and whether that place is out of the
    /// agent's reach.
    fn path(&self) -> (PathBuf, bool) {
        match self.protected() {
            Some(path) if std::fs::symlink_metadata(&path).is_ok() => (path, true),
            Some(_) | None if std::fs::symlink_metadata(self.fallback()).is_ok() => {
                (self.fallback(), false)
            }
            Some(path) => (path, true),
            None => (self.legacy.clone(), false),
        }
    }

    /// The record's place, made when missing: the state home's, else the fallback, but only
    /// where the state home cannot be written at all (none, a file in its way, or no
    /// permission: the case every other state falls back for). A fault making it (a full disk, an I/O error) is an error:
    /// the record never moves into the agent's reach on one (issue 44).
    fn made(&self) -> Result<PathBuf> {
        match protected::made_install_dir(&self.project) {
            Ok(dir) => return Ok(dir.join(RECORD_FILE)),
            Err(e)
                if !matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound
                        | std::io::ErrorKind::NotADirectory
                        | std::io::ErrorKind::PermissionDenied
                        | std::io::ErrorKind::ReadOnlyFilesystem
                ) =>
            {
                let dir = protected::install_dir(&self.project).unwrap_or_default();
                return Err(Error::input(format!(
                    "cannot make the install record's place {} in the state home ({}); nothing was changed",
                    dir.display(),
                    crate::error::plain_io(&e)
                )));
            }
            Err(_) => {}
        }
        let path = self.fallback();
        let dir = path.parent().expect("the fallback state");
        fs_err::create_dir_all(dir).map_err(Error::fs)?;
        Ok(path)
    }

    /// The lock on the record, which settings files of one project share.
    pub(super) fn lock(&self) -> Result<FileLock> {
        let mut name = self.made()?.into_os_string();
        name.push(".lock");
        FileLock::transient_at(Path::new(&name), Duration::from_secs(30))
    }

    /// Whether a record exists, in any place.
    pub(super) fn exists(&self) -> bool {
        std::fs::symlink_metadata(self.path().0).is_ok()
            || std::fs::symlink_metadata(&self.legacy).is_ok()
    }

    /// The record, and whether it was read from the state home.
    pub(super) fn load_where(&self) -> Result<(Map<String, Value>, bool)> {
        let (path, protected) = self.path();
        // Not there (or a state home that is not a directory): the legacy place.
        let (mut record, protected) = match std::fs::symlink_metadata(&path) {
            Err(_) => (load_record(&self.legacy)?, false),
            Ok(_) => (load_record(&path)?, protected),
        };
        if !protected {
            only_entries(&mut record);
        }
        Ok((record, protected))
    }

    pub(super) fn load(&self) -> Result<Map<String, Value>> {
        Ok(self.load_where()?.0)
    }

    /// Writes the record in the protected state (owner only); the one in the project goes.
    pub(super) fn save(&self, record: &Map<String, Value>) -> Result<()> {
        let path = self.made()?;
        write_atomic(&path, &render(record), 0o600).map_err(|e| Error::io("write", &path, &e))?;
        self.remove_legacy();
        Ok(())
    }

    /// Removes the record, in both places.
    pub(super) fn remove(&self) -> Result<()> {
        let (path, _) = self.path();
        match fs_err::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::fs(e));
            }
            _ => {}
        }
        self.remove_legacy();
        Ok(())
    }

    /// The record of an older vigil in the project, and its `.vigil/` when that held nothing
    /// else.
    fn remove_legacy(&self) {
        if std::fs::remove_file(&self.legacy).is_ok()
            && let Some(dir) = self.legacy.parent()
        {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// A record read from where the agent can write keeps only its list of vigil's entries (and
/// what `--protect` and Codex's trust added): no file is deleted, and no backup restored, on
/// its word.
fn only_entries(record: &mut Map<String, Value>) {
    let Some(Value::Object(files)) = record.get_mut("files") else {
        return;
    };
    for file in files.values_mut() {
        if let Value::Object(file) = file {
            file.insert("created_file".into(), json!(false));
            file.insert("written_sha256".into(), json!(""));
            file.remove("original_sha256");
        }
    }
}

/// What `installed.json` keeps about one settings file.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Installed {
    pub(super) entries: Vec<(String, Value)>,
    pub(super) created_file: bool,
    pub(super) created_hooks: bool,
    pub(super) created_events: Vec<String>,
    /// sha256 of the file as vigil left it: if it still reads so, uninstall restores the backup.
    pub(super) written_sha256: String,
    /// sha256 of the file before vigil's first change: the backup is restored only if it is this.
    pub(super) original_sha256: Option<String>,
    /// Codex: the config.toml that trusts vigil's hooks, and the keys it wrote there.
    pub(super) codex_config: Option<String>,
    pub(super) trusted_keys: Vec<String>,
    /// `--protect`: what it changed, for uninstall to take back.
    pub(super) protect: Option<Protection>,
}

impl Installed {
    /// Records that vigil added `group` to `event`, unless it already has: whether it was new.
    pub(super) fn record(&mut self, event: &str, group: &Value) -> bool {
        if self.entries.iter().any(|(e, g)| e == event && g == group) {
            return false;
        }
        self.entries.push((event.to_string(), group.clone()));
        true
    }
}

fn load_record(path: &Path) -> Result<Map<String, Value>> {
    let read = files::open_state(path).and_then(|file| {
        use std::io::Read;
        let mut bytes = Vec::new();
        file.take(64 << 20).read_to_end(&mut bytes).map(|_| bytes)
    });
    match read {
        Ok(bytes) => match serde_json::from_slice::<Value>(&bytes) {
            Ok(Value::Object(map)) if map.get("schema") == Some(&json!(INSTALLED_SCHEMA)) => {
                Ok(map)
            }
            _ => Err(Error::input(format!(
                "{} is not a vigil install record; move it away and run again",
                path.display()
            ))),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Map::from_iter([
            ("schema".to_string(), json!(INSTALLED_SCHEMA)),
            ("files".to_string(), json!({})),
        ])),
        Err(e) => Err(Error::io("read", path, &e)),
    }
}

/// Whether any settings file of a project's install record was installed with `--protect`
/// (the planted-code baseline is the project's, not one file's).
pub(super) fn any_protected(record: &Map<String, Value>) -> bool {
    record
        .get("files")
        .and_then(Value::as_object)
        .is_some_and(|files| {
            files
                .keys()
                .any(|key| installed_of(record, key).is_some_and(|i| i.protect.is_some()))
        })
}

pub(super) fn installed_of(record: &Map<String, Value>, key: &str) -> Option<Installed> {
    let file = record.get("files")?.get(key)?;
    Some(Installed {
        entries: file
            .get("entries")?
            .as_array()?
            .iter()
            .filter_map(|e| {
                Some((
                    e.get("event")?.as_str()?.to_string(),
                    e.get("group")?.clone(),
                ))
            })
            .collect(),
        created_file: file.get("created_file")?.as_bool()?,
        created_hooks: file.get("created_hooks")?.as_bool()?,
        created_events: file
            .get("created_events")?
            .as_array()?
            .iter()
            .filter_map(|e| e.as_str().map(str::to_string))
            .collect(),
        written_sha256: file.get("written_sha256")?.as_str()?.to_string(),
        original_sha256: file
            .get("original_sha256")
            .and_then(Value::as_str)
            .map(str::to_string),
        codex_config: file
            .get("codex_config")
            .and_then(Value::as_str)
            .map(str::to_string),
        trusted_keys: file
            .get("trusted_keys")
            .and_then(Value::as_array)
            .map(|keys| {
                keys.iter()
                    .filter_map(|k| k.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
        protect: file.get("protect").and_then(protect::from_value),
    })
}

pub(super) fn store_installed(
    record: &mut Map<String, Value>,
    key: &str,
    installed: Option<&Installed>,
) {
    let files = record.entry("files").or_insert_with(|| json!({}));
    let Some(files) = files.as_object_mut() else {
        return;
    };
    match installed {
        None => {
            files.remove(key);
        }
        Some(i) => {
            files.insert(
                key.to_string(),
                json!({
                    "entries": i.entries.iter().map(|(event, group)| json!({"event": event, "group": group})).collect::<Vec<_>>(),
                    "created_file": i.created_file,
                    "created_hooks": i.created_hooks,
                    "created_events": i.created_events,
                    "written_sha256": i.written_sha256,
                    "original_sha256": i.original_sha256,
                    "codex_config": i.codex_config,
                    "trusted_keys": i.trusted_keys,
                    "protect": i.protect.as_ref().map(protect::to_value),
                }),
            );
        }
    }
}
