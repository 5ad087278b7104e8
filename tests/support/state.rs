//! The protected state (SPEC §9) the binaries keep for a project in the tests' state home.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{assert_valid, files_ending, json_of, state_home, stop_gate};

/// The protected state the binaries keep for the project in `dir` (under `state_home()`),
/// found by the name it is given: the project's directory name and a hash of its path.
pub fn protected_dir(dir: &Path) -> PathBuf {
    let name = std::fs::canonicalize(dir).unwrap();
    let name = name.file_name().unwrap().to_string_lossy().into_owned();
    let projects = state_home().join("projects");
    let found: Vec<PathBuf> = std::fs::read_dir(&projects)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .unwrap()
                        .to_string_lossy()
                        .starts_with(&format!("{name}-"))
                })
                .collect::<Vec<PathBuf>>()
        })
        .unwrap_or_default();
    // Tests in one process share the state home, and many name a clone `laptop`: the one
    // whose `top` file names this directory.
    let canonical = std::fs::canonicalize(dir).unwrap();
    let found: Vec<PathBuf> = if found.len() > 1 {
        found
            .into_iter()
            .filter(|p| {
                std::fs::read(p.join("top"))
                    .is_ok_and(|top| top == canonical.as_os_str().as_encoded_bytes())
            })
            .collect()
    } else {
        found
    };
    assert_eq!(
        found.len(),
        1,
        "the protected state of {}: {found:?}",
        dir.display()
    );
    found.into_iter().next().unwrap()
}

/// The install record of the project directory `dir` (SPEC §2): in the state home, in the
/// directory named after `dir` itself (there or not yet).
pub fn install_record_of(dir: &Path) -> PathBuf {
    let dir = std::fs::canonicalize(dir).unwrap();
    vigil::state::protected::dir_in(state_home(), &dir).join("installed.json")
}

/// Where the local markers of `check` live for the project in `dir` (SPEC §5): the project's
/// protected state, its directory made first if no binary has run there yet.
pub fn markers_of(dir: &Path, check: &str) -> PathBuf {
    // Any command that takes the project's protected state makes its directory.
    let _ = stop_gate()
        .args(["loop", "cancel", "--session", "markers-probe"])
        .current_dir(dir)
        .output()
        .unwrap();
    protected_dir(dir).join("markers").join(check)
}

/// The session record the binaries keep for `session` of the project in `dir`, validated.
pub fn session_record_of(dir: &Path, session: &str) -> Value {
    let path = protected_dir(dir).join(format!("sessions/{session}.rec"));
    match vigil::sys::record::read(&path) {
        vigil::sys::record::Read::Found { payload, .. } => {
            let record: Value = serde_json::from_slice(&payload).unwrap();
            assert_valid("session.schema.json", &record);
            if let Some(ralph) = record.get("loop") {
                assert_valid("loop.schema.json", ralph);
            }
            record
        }
        other => panic!("no record at {}: {other:?}", path.display()),
    }
}

/// The loop in the session record of `session` (`Null` when it has none).
pub fn loop_of(dir: &Path, session: &str) -> Value {
    session_record_of(dir, session)["loop"].clone()
}

/// The project queue of the main checkout `dir` (in its protected state).
pub fn queue_of(dir: &Path) -> PathBuf {
    vigil::state::protected::dir_in(state_home(), &std::fs::canonicalize(dir).unwrap())
        .join("wakes")
}

impl super::Project {
    /// The wakes waiting for the project (a main checkout), oldest first ([`wakes_in`]).
    pub fn wakes(&self) -> Vec<Value> {
        wakes_in(&queue_of(self.path()))
    }
}

/// The wakes waiting in `queue`, oldest first, each checked against its schema.
pub fn wakes_in(queue: &Path) -> Vec<Value> {
    files_ending(queue, "json")
        .iter()
        .map(|p| {
            let wake = json_of(p);
            assert_valid("wake.schema.json", &wake);
            wake
        })
        .collect()
}
