//! The real clients, pinned: Claude Code and Codex from the npm registry, installed once into a
//! cache folder and run from their native binaries with a throwaway HOME pointed at the
//! scripted server, telemetry and updates off.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::support::skip_unless_required;

/// The pinned versions, in one place for the suite and `.ci/run`.
const PACKAGE_JSON: &str = include_str!("package.json");

/// Where the clients are cached: `$VIGIL_E2E_CACHE`, else `~/.cache/vigil-e2e`.
pub fn cache() -> PathBuf {
    std::env::var_os("VIGIL_E2E_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/vigil-e2e")
        })
}

pub struct Clients {
    pub claude: PathBuf,
    pub codex: PathBuf,
}

fn native(cache: &Path) -> Clients {
    let modules = cache.join("node_modules");
    Clients {
        claude: modules.join("@anthropic-ai/claude-code-linux-x64/claude"),
        codex: modules.join("@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"),
    }
}

/// The clients, installed when missing; `None` (with one line on stderr saying why) on a
/// machine that cannot have them. CI sets `VIGIL_E2E_REQUIRED=1`, which turns that into a
/// failure.
pub fn clients() -> Option<Clients> {
    static ONCE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let cache = cache();
    let result = ONCE.get_or_init(|| {
        if std::env::var_os("VIGIL_E2E_SKIP").is_some_and(|v| !v.is_empty()) {
            return Err("VIGIL_E2E_SKIP is set".into());
        }
        let found = native(&cache);
        let pinned = std::fs::read_to_string(cache.join("package.json")).ok();
        if found.claude.is_file()
            && found.codex.is_file()
            && pinned.as_deref() == Some(PACKAGE_JSON)
        {
            return Ok(());
        }
        if !(cfg!(target_os = "linux") && cfg!(target_arch = "x86_64")) {
            return Err("the pinned clients are taken for linux-x64 only".into());
        }
        let npm = Command::new("npm").arg("--version").output();
        if !npm.is_ok_and(|o| o.status.success()) {
            return Err("npm is not installed, so Claude Code and Codex cannot be fetched".into());
        }
        std::fs::create_dir_all(&cache).map_err(|e| e.to_string())?;
        std::fs::write(cache.join("package.json"), PACKAGE_JSON).map_err(|e| e.to_string())?;
        // Bounded: a machine with npm but no way to the registry fails here, it does not hang.
        let mut npm = Command::new("npm");
        npm.args([
            "install",
            "--no-audit",
            "--no-fund",
            "--ignore-scripts",
            "--prefix",
        ])
        .arg(&cache);
        let out = run(npm, Duration::from_secs(300));
        let installed = native(&cache);
        if !out.status.success() || !installed.claude.is_file() || !installed.codex.is_file() {
            // Not marked as installed, so the next run tries again.
            let _ = std::fs::remove_file(cache.join("package.json"));
            return Err(format!(
                "npm install failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            ));
        }
        Ok(())
    });
    match result {
        Ok(()) => Some(native(&cache)),
        Err(why) => {
            skip_unless_required("the end-to-end suite", "the end-to-end suite", why);
            None
        }
    }
}

/// A throwaway HOME for one client run.
pub fn home() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Runs a command with a deadline, killing it when it runs over; returns its output.
pub fn run(cmd: Command, deadline: Duration) -> Output {
    run_with_input(cmd, deadline, None)
}

/// `run`, with `input` on the command's stdin (then closed).
pub fn run_with_input(mut cmd: Command, deadline: Duration, input: Option<&[u8]>) -> Output {
    use std::os::unix::process::CommandExt;
    // Its own process group, so the watchdog takes the hooks and tool calls it ran along.
    let stdin = if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    };
    cmd.stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn().expect("spawn a client");
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        use std::io::Write;
        let _ = stdin.write_all(input);
    }
    let pid = child.id();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let watchdog = std::thread::spawn(move || {
        if done_rx.recv_timeout(deadline).is_err() {
            let _ = Command::new("kill")
                .args(["-9", "--", &format!("-{pid}")])
                .status();
        }
    });
    let out = child.wait_with_output().expect("wait for a client");
    let _ = done_tx.send(());
    let _ = watchdog.join();
    out
}

/// `claude -p PROMPT` in `project`, against `server`, with a fresh HOME.
pub fn claude(clients: &Clients, home: &Path, project: &Path, url: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(&clients.claude);
    cmd.args(args)
        .current_dir(project)
        .env_clear()
        .env("HOME", home)
        .env("TMPDIR", home)
        .env("PATH", path_with_vigil())
        .env("VIGIL_STATE_HOME", state_home_of(project))
        .env("ANTHROPIC_BASE_URL", url)
        .env("ANTHROPIC_API_KEY", "sk-ant-test-0000")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY", "1")
        .env("IS_SANDBOX", "1");
    cmd
}

/// `codex exec` in `project`, with CODEX_HOME (not ~/.codex) holding its config, as many set it.
pub fn codex(clients: &Clients, home: &Path, project: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(&clients.codex);
    cmd.args(args)
        .current_dir(project)
        .env_clear()
        .env("HOME", home)
        .env("TMPDIR", home)
        .env("CODEX_HOME", home.join("codex-home"))
        .env("PATH", path_with_vigil())
        .env("VIGIL_STATE_HOME", state_home_of(project))
        .env("OPENAI_API_KEY", "sk-test-0000");
    cmd
}

/// The state home of the project at `project` in this suite: outside the project, where a
/// home beside it keeps it by default (`~/.local/state/vigil`).
pub fn state_home_of(project: &Path) -> PathBuf {
    project.parent().unwrap().join("home/.local/state/vigil")
}

fn path_with_vigil() -> String {
    "/usr/local/bin:/usr/bin:/bin".to_string()
}
