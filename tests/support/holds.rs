//! The human's hold on the tests (SPEC §11) as a test makes it, and the runners the held-test
//! tests need.

use super::{Project, said, skip, stdout_of, stop_gate};

/// Whether `program ARGS` runs here; a test that needs it and cannot have it says so with
/// one line (`package` names what to install).
pub fn tool_runs(program: &str, args: &[&str], package: &str) -> bool {
    let ok = std::process::Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        skip(&format!("{package} is not installed"));
    }
    ok
}

pub fn python() -> bool {
    tool_runs("python3", &["--version"], "python3")
}

pub fn pytest() -> bool {
    tool_runs(
        "python3",
        &["-m", "pytest", "--version"],
        "pytest (python3 -m pip install pytest)",
    )
}

impl Project {
    /// `stop-gate hold ARGS` in the project, whatever it answers.
    pub fn hold(&self, args: &[&str]) -> std::process::Output {
        stop_gate()
            .arg("hold")
            .args(args)
            .current_dir(self.path())
            .output()
            .unwrap()
    }

    /// `stop-gate hold ARGS`, which must succeed: what it printed.
    pub fn held(&self, args: &[&str]) -> String {
        let out = self.hold(args);
        assert!(out.status.success(), "hold {args:?}: {}", said(&out));
        stdout_of(&out)
    }
}
