//! Where vigil keeps its state (SPEC §2, §9): `<project>/.vigil/` for what may be seen and
//! shared (handoffs), the protected state outside the project for what a gate trusts (loops,
//! session records, trusted keys, local markers), and the session ids that name files in them.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::state::protected;
use crate::state::protected::Place;
use crate::sys::atomic::{self, Durability};

/// The project a hook works on and the state directory inside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Project {
    /// The project (SPEC §2): where a human installed vigil at or above the directory the
    /// engine started in ([`Project::start_dir`]), else that directory's git top level, else
    /// the directory itself (`protected::project_top`); canonical.
    pub dir: PathBuf,
    /// `--state-dir`, else `$VIGIL_STATE_DIR`, else `<dir>/.vigil`.
    pub state: PathBuf,
    /// Whether `state` is the default `<dir>/.vigil` (rather than one the user chose).
    pub default_state: bool,
    /// Where the protected state is, found when first asked for.
    protected: std::sync::OnceLock<Place>,
}

impl Project {
    pub(crate) fn resolve(state_dir_flag: Option<&Path>, input_cwd: Option<&Path>) -> Project {
        let nonempty = |v: std::ffi::OsString| (!v.is_empty()).then(|| PathBuf::from(v));
        let dir = protected::project_top(&Project::start_dir(input_cwd));
        let chosen = state_dir_flag
            .map(Path::to_path_buf)
            .or_else(|| std::env::var_os("VIGIL_STATE_DIR").and_then(nonempty));
        let default_state = chosen.is_none();
        let state = chosen.unwrap_or_else(|| dir.join(".vigil"));
        Project {
            dir,
            state,
            default_state,
            protected: std::sync::OnceLock::new(),
        }
    }

    /// The project of the checkout at `dir`, whatever the environment says (a wake's worktree,
    /// read from a hook that runs in another project), with its default state directory.
    pub(crate) fn at(dir: &Path) -> Project {
        let dir = protected::project_top(dir);
        Project {
            state: dir.join(".vigil"),
            dir,
            default_state: true,
            protected: std::sync::OnceLock::new(),
        }
    }

    /// The directory the engine started in: `$CLAUDE_PROJECT_DIR`, else the hook input's
    /// `cwd`, else the working directory. Claude Code's sandbox lets the agent write there,
    /// which may be below the project.
    pub(crate) fn start_dir(input_cwd: Option<&Path>) -> PathBuf {
        std::env::var_os("CLAUDE_PROJECT_DIR")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| input_cwd.map(Path::to_path_buf))
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("."))
    }

    /// This project for a reader (`loop status`, which the slash commands run inside the
    /// sandbox, where the state home is read-only): the protected state is looked up where it
    /// is, and nothing is made.
    pub(crate) fn for_reading(self) -> Project {
        let _ = self.protected.set(Place::find(&self.dir, &self.state));
        self
    }

    /// The protected state (SPEC §9): loops, session records and trusted keys, in the state
    /// home, else in `<state>/state/` (said by the doctor and at session start).
    pub(crate) fn protected(&self) -> &Place {
        self.protected
            .get_or_init(|| Place::of(&self.dir, &self.state))
    }

    /// A directory vigil owns under the state directory (`loops`, `sessions/subagents`…),
    /// created when missing. A symlink in its place, or in place of the default `.vigil`, is
    /// refused: vigil makes these as plain directories, and a link could send its writes
    /// outside the project.
    pub(crate) fn owned_dir(&self, relative: &str) -> Result<PathBuf> {
        let mut checked = vec![];
        if self.default_state {
            checked.push(self.state.clone());
        }
        let mut dir = self.state.clone();
        for part in relative.split('/') {
            dir.push(part);
            checked.push(dir.clone());
        }
        checked.iter().try_for_each(|p| refuse_symlink(p))?;
        fs_err::create_dir_all(&dir).map_err(Error::fs)?;
        // Checked again after creating: a link could have appeared in between.
        checked.iter().try_for_each(|p| refuse_symlink(p))?;
        if self.default_state {
            keep_out_of_git(&self.state);
        }
        Ok(dir)
    }

    /// Where loops lived before the protected state: read only to tell the human they were not
    /// taken over.
    pub(crate) fn legacy_loops(&self) -> PathBuf {
        self.state.join("loops")
    }

    /// Where the state that belongs to the repository rather than to this checkout is kept
    /// (synced notes; SPEC §10): for a linked worktree, the protected state of its main
    /// checkout, which every worktree of the repository shares; else this project's own.
    pub(crate) fn repository_state(&self) -> PathBuf {
        let place = self.protected();
        let main = crate::sys::git::main_checkout(&self.dir);
        if place.fallback || main == self.dir {
            return place.dir.clone();
        }
        protected::home().map_or_else(|| place.dir.clone(), |home| protected::dir_in(&home, &main))
    }

    /// Local markers (SPEC §5): in the protected state, so an unsigned marker is exactly as
    /// strong as the sandbox that keeps the agent out of it.
    pub(crate) fn markers(&self) -> PathBuf {
        self.protected().dir.join("markers")
    }

    /// Where markers lived before the protected state: never read, only named in a denial.
    pub(crate) fn legacy_markers(&self) -> PathBuf {
        self.state.join("markers")
    }
}

/// What `.vigil/.gitignore` holds: everything vigil writes in the project is this machine's
/// (handoffs, the fallback state), so git shows none of it, from the first session on and
/// whichever way vigil was wired (the installer's exclude lines, the plugin, by hand).
pub(crate) const GITIGNORE: &str =
    "# vigil's files for this machine (handoffs, state): never committed\n*\n";

/// Writes `GITIGNORE` into the default state directory when it has none; a file there is
/// left as it is (the user's choice), and a failure costs only clutter in `git status`.
fn keep_out_of_git(state: &Path) {
    let file = state.join(".gitignore");
    if std::fs::symlink_metadata(&file).is_err() {
        // Nothing waits for the disk: the handoff writes on the engine's exit path.
        let _ = atomic::write_atomic_as(&file, GITIGNORE.as_bytes(), 0o644, Durability::Skip);
    }
}

/// Refuses a symlink where vigil keeps a state directory: vigil makes them as plain
/// directories, and a link could send its writes elsewhere.
pub(crate) fn refuse_symlink(path: &Path) -> Result<()> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(Error::input(format!(
            "{} is a symlink; vigil keeps its state only in plain directories",
            path.display()
        )));
    }
    Ok(())
}

/// Whether `raw` is safe as one file name: 1 to `max` of `A-Z a-z 0-9 . _ -`, not `.` or `..`.
pub(crate) fn is_file_name(raw: &str, max: usize) -> bool {
    (1..=max).contains(&raw.len())
        && raw != "."
        && raw != ".."
        && raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A session id safe to use in a file name: `^[A-Za-z0-9._-]{1,128}$`, not `.` or `..`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SessionId(String);

impl SessionId {
    pub(crate) fn parse(raw: &str) -> Result<SessionId> {
        if !is_file_name(raw, 128) {
            let shown: String = raw.chars().take(40).collect();
            return Err(Error::input(format!(
                "session id {shown:?} is not 1 to 128 of A-Z a-z 0-9 . _ - (and not . or ..); refusing to use it in a file name"
            )));
        }
        Ok(SessionId(raw.to_string()))
    }

    /// The id used for state when the input names no usable session.
    pub(crate) fn unknown() -> SessionId {
        SessionId("unknown".to_string())
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_session_ids_are_refused() {
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "../../etc/passwd",
            "a/b",
            "/abs",
            "a\0b",
            "a b",
            "é",
            &"x".repeat(129),
        ] {
            assert!(SessionId::parse(bad).is_err(), "{bad:?}");
        }
        for good in [
            "00893aaf-19fa-41d2-8238-13269b9b3ca0",
            "a",
            "...",
            "x.y_z-1",
            &"x".repeat(128),
        ] {
            assert!(SessionId::parse(good).is_ok(), "{good:?}");
        }
    }
}
