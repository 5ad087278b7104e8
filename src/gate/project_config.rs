//! A project's own gate flags (`stop-gate config`), for the plugin's Stop hook
//! (`--project-config`). Claude Code reads a plugin's `userConfig` values only from your user,
//! `--settings` and managed settings ("project settings are not read", 2.1.332), so a check set
//! there would run in every project. vigil keeps them per project, in the protected state
//! (SPEC §9), where the agent can no more rewrite them than a loop: out of its reach once
//! Claude Code's sandbox is on.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::gate::GateConfig;
use crate::state::project::Project;
use crate::state::protected;
use crate::sys::atomic::write_atomic;
use crate::sys::files;
use crate::sys::paths;

/// The file, in the project's protected state.
pub(crate) const FILE: &str = "gate-flags.json";

/// The largest file read: a few flags.
const MAX_BYTES: u64 = 64 * 1024;

/// Flags a project's configuration may not hold: what only the handler knows (its deadline
/// under the handler's timeout, where state lives), and the flag that reads the file.
const REFUSED: &[&str] = &[
    "--project-config",
    "--deadline",
    "--state-dir",
    "--check-config",
];

/// Where `config set` writes: the project's protected state (its git top's).
pub(crate) fn path(project: &Project) -> PathBuf {
    project.protected().dir.join(FILE)
}

/// Where the flags for a session started in `start` are: the nearest of the state home's
/// directories of `start` and the directories above it that holds a file, never the git top
/// alone, which the agent can move (a `.git` planted below the top, or moved away); the
/// project's own place last (its fallback inside the project, where there is no state home).
fn found(project: &Project, start: &Path) -> PathBuf {
    let start = paths::canonical(start);
    protected::dirs_above(&start)
        .into_iter()
        .map(|dir| dir.join(FILE))
        .find(|file| std::fs::symlink_metadata(file).is_ok())
        .unwrap_or_else(|| path(project))
}

/// Checks `args` as the gate will read them; the parsed configuration.
pub(crate) fn check(args: &[String]) -> Result<GateConfig> {
    if let Some(flag) = args.iter().find(|arg| {
        REFUSED
            .iter()
            .any(|r| *arg == r || arg.starts_with(&format!("{r}=")))
    }) {
        return Err(Error::usage(format!(
            "{flag} is the hook's own flag, not the project's; give the check's flags (--run, --require-marker, --max-blocks…)"
        )));
    }
    if args.iter().any(|a| a == "-h" || a == "--help") {
        return Err(Error::usage("--help is not a gate flag"));
    }
    let os: Vec<OsString> = args.iter().map(OsString::from).collect();
    GateConfig::parse(os)?.ok_or_else(|| Error::usage("--help is not a gate flag"))
}

/// The project's flags: `None` when none are set; an error for a file that cannot be read or
/// is not what `save` writes (a gate denies on it).
pub(crate) fn load(project: &Project, start: &Path) -> Result<Option<Vec<String>>> {
    let path = found(project, start);
    let bytes = match files::read_regular(&path, MAX_BYTES, false) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(None),
        Err(e) => {
            return Err(Error::input(format!(
                "cannot read {}: {e}; set it again with stop-gate config set",
                path.display()
            )));
        }
    };
    let damaged = || {
        Error::input(format!(
            "{} is not a project configuration vigil wrote; set it again with stop-gate config set",
            path.display()
        ))
    };
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| damaged())?;
    let args = value
        .get("args")
        .and_then(Value::as_array)
        .ok_or_else(damaged)?
        .iter()
        .map(|a| a.as_str().map(str::to_string))
        .collect::<Option<Vec<String>>>()
        .ok_or_else(damaged)?;
    if value.get("schema") != Some(&json!(1)) {
        return Err(damaged());
    }
    check(&args).map_err(|e| {
        Error::input(format!(
            "{}: {e}; set it again with stop-gate config set",
            path.display()
        ))
    })?;
    Ok(Some(args))
}

/// Writes the project's flags, checked first.
pub(crate) fn save(project: &Project, args: &[String]) -> Result<()> {
    check(args)?;
    let place = project.protected();
    if place.fallback {
        return Err(Error::input(format!(
            "vigil's state home cannot be written here, so the flags would be in {}, inside the project, where the agent can rewrite them; set $VIGIL_STATE_HOME to a writable directory outside the project; nothing was set",
            place.dir.display()
        )));
    }
    let path = path(project);
    let text = format!("{}\n", json!({"schema": 1, "args": args}));
    write_atomic(&path, text.as_bytes(), 0o600).map_err(|e| Error::io("write", &path, &e))
}

/// Takes the project's flags away; whether there were any.
pub(crate) fn remove(project: &Project) -> Result<bool> {
    let path = path(project);
    match fs_err::remove_file(&path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::fs(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hooks_own_flags_are_not_the_projects() {
        for flag in ["--project-config", "--deadline=60", "--state-dir", "--help"] {
            assert!(check(&[flag.to_string()]).is_err(), "{flag}");
        }
        let config = check(&["--run".into(), "make test".into()]).unwrap();
        assert_eq!(config.run.as_deref(), Some("make test"));
        assert!(check(&["--run".into()]).is_err());
    }
}
