//! Loops (SPEC §4), started through the real `stop-gate loop start`, and read back through
//! `stop-gate loop status`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

use super::{Project, assert_valid, ok, said, stop_gate};

/// `stop-gate loop start` in a project, as a human runs it from a terminal:
///
/// ```ignore
/// Loop::for_session(dir, "s1").max_iterations(5).prompt("Fix it.").start();
/// ```
///
/// Unless told otherwise: 3 passes, the promise `DONE`, the prompt `Task` (after `--`).
pub struct Loop {
    dir: PathBuf,
    /// `None`: `--next-session`.
    session: Option<String>,
    max_iterations: u32,
    promise: String,
    flags: Vec<String>,
    env: Vec<(String, OsString)>,
    /// `None`: the prompt is read from a `--prompt-file` among the flags.
    prompt: Option<String>,
}

impl Loop {
    /// A loop for `session` of the project in `dir`.
    pub fn for_session(dir: &Path, session: &str) -> Loop {
        Loop {
            dir: dir.to_path_buf(),
            session: Some(session.to_string()),
            max_iterations: 3,
            promise: "DONE".into(),
            flags: Vec::new(),
            env: Vec::new(),
            prompt: Some("Task".into()),
        }
    }

    /// A pending loop, for the next session that starts in the project in `dir`.
    pub fn for_next_session(dir: &Path) -> Loop {
        Loop {
            session: None,
            ..Loop::for_session(dir, "")
        }
    }

    pub fn max_iterations(mut self, max: u32) -> Loop {
        self.max_iterations = max;
        self
    }

    /// `--completion-promise`.
    pub fn promise(mut self, promise: &str) -> Loop {
        self.promise = promise.to_string();
        self
    }

    /// More flags of `loop start` (`--stall-after 0`, `--claim-within 1s`, …).
    pub fn flags(mut self, flags: &[&str]) -> Loop {
        self.flags.extend(flags.iter().map(|f| f.to_string()));
        self
    }

    /// A variable of the command's environment.
    pub fn env(mut self, name: &str, value: impl Into<OsString>) -> Loop {
        self.env.push((name.to_string(), value.into()));
        self
    }

    pub fn prompt(mut self, prompt: &str) -> Loop {
        self.prompt = Some(prompt.to_string());
        self
    }

    /// `--prompt-file FILE` instead of a prompt.
    pub fn prompt_file(mut self, file: &Path) -> Loop {
        self.flags.push("--prompt-file".into());
        self.flags.push(file.to_str().unwrap().into());
        self.prompt = None;
        self
    }

    /// The command, not yet run.
    pub fn command(&self) -> Command {
        let mut cmd = stop_gate();
        cmd.args(["loop", "start"]);
        match &self.session {
            Some(session) => cmd.args(["--session", session]),
            None => cmd.arg("--next-session"),
        };
        cmd.arg("--max-iterations")
            .arg(self.max_iterations.to_string())
            .args(["--completion-promise", &self.promise])
            .args(&self.flags)
            .current_dir(&self.dir);
        if let Some(prompt) = &self.prompt {
            cmd.args(["--", prompt]);
        }
        for (name, value) in &self.env {
            cmd.env(name, value);
        }
        cmd
    }

    /// Runs `loop start`, whatever it answers.
    pub fn output(&self) -> std::process::Output {
        self.command().output().unwrap()
    }

    /// Runs `loop start`, which must succeed.
    pub fn start(&self) -> std::process::Output {
        let out = self.output();
        assert!(out.status.success(), "loop start: {}", said(&out));
        out
    }
}

impl Project {
    /// `stop-gate loop start ARGS` in this project, whatever it answers.
    pub fn start(&self, args: &[&str]) -> std::process::Output {
        self.start_with_env(args, &[])
    }

    /// `stop-gate loop start ARGS` in this project with the variables `env` set, whatever it
    /// answers.
    pub fn start_with_env(&self, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
        let mut cmd = stop_gate();
        cmd.arg("loop")
            .arg("start")
            .args(args)
            .current_dir(self.path());
        for (name, value) in env {
            cmd.env(name, value);
        }
        cmd.output().unwrap()
    }

    /// `stop-gate loop start --args-stdin` in this project, `raw` on its standard input as the
    /// slash command passes its arguments, whatever it answers.
    pub fn start_from_stdin(&self, raw: &str) -> std::process::Output {
        stop_gate()
            .args(["loop", "start", "--args-stdin"])
            .current_dir(self.path())
            .write_stdin(raw)
            .output()
            .unwrap()
    }

    /// `stop-gate loop ARGS` (`status`, `cancel`…) in this project, whatever it answers.
    pub fn loop_command(&self, args: &[&str]) -> std::process::Output {
        stop_gate()
            .arg("loop")
            .args(args)
            .current_dir(self.path())
            .output()
            .unwrap()
    }

    /// [`Loop::for_session`] in this project.
    pub fn loop_for(&self, session: &str) -> Loop {
        Loop::for_session(self.path(), session)
    }

    /// [`Loop::for_next_session`] in this project.
    pub fn loop_for_next_session(&self) -> Loop {
        Loop::for_next_session(self.path())
    }

    /// A loop for `session` with `max` passes and the promise `DONE`, which must start.
    pub fn start_ok(&self, session: &str, max: u32, prompt: &str) {
        self.loop_for(session)
            .max_iterations(max)
            .prompt(prompt)
            .start();
    }

    /// `loop status --json` of `session`, validated against the loop schema.
    pub fn loop_state(&self, session: &str) -> Value {
        let output = ok(self.loop_command(&["status", "--json", "--session", session]));
        let state: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_valid("loop.schema.json", &state);
        state
    }
}
