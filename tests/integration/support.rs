//! What every CLI test needs: the binaries, fixtures, temp dirs and schema validation.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

/// The state home every binary run by the tests uses (`VIGIL_STATE_HOME`): one for the test
/// binary, never the user's. Each project has its own directory in it; a test that trusts a
/// key for every project (`--global`) sets its own.
pub fn state_home() -> &'static Path {
    static HOME: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    HOME.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

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

pub fn promise_matcher() -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin!("promise-matcher"));
    cmd.env_remove("VIGIL_DISABLE")
        .env_remove("VIGIL_STATE_DIR")
        .env("VIGIL_STATE_HOME", state_home());
    cmd
}

/// A path inside the repository.
pub fn repo_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

pub fn fixture(relative: &str) -> PathBuf {
    repo_path("tests/fixtures").join(relative)
}

pub fn read_fixture(relative: &str) -> String {
    std::fs::read_to_string(fixture(relative)).unwrap()
}

/// A sample hook payload with fields replaced (or removed, with `Value::Null`).
pub fn sample_payload(name: &str, changes: &[(&str, Value)]) -> String {
    let mut payload: Value =
        serde_json::from_str(&read_fixture(&format!("samples/{name}"))).unwrap();
    let object = payload.as_object_mut().unwrap();
    for (key, value) in changes {
        if value.is_null() {
            object.remove(*key);
        } else {
            object.insert((*key).to_string(), value.clone());
        }
    }
    payload.to_string()
}

/// A JSON file, parsed.
pub fn json_of(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Validates a value against a schema in `schemas/`, panicking with every error.
pub fn assert_valid(schema_name: &str, instance: &Value) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("schemas")
        .join(schema_name);
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| e.to_string())
        .collect();
    assert!(
        errors.is_empty(),
        "{instance} does not match {schema_name}: {errors:?}"
    );
}

/// stdout of a finished command as a string.
pub fn stdout_of(output: &std::process::Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

/// stderr must be exactly one line starting with the binary's name.
pub fn assert_one_line_error(output: &std::process::Output, binary: &str) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(
        stderr.lines().count(),
        1,
        "stderr is not one line: {stderr:?}"
    );
    assert!(stderr.starts_with(&format!("{binary}: ")), "{stderr:?}");
    stderr
}

pub fn stop_gate() -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin!("stop-gate"));
    cmd.env_remove("VIGIL_DISABLE")
        .env_remove("VIGIL_STATE_DIR")
        .env("VIGIL_STATE_HOME", state_home())
        .env_remove("VIGIL_SESSION_ID")
        .env_remove("CLAUDE_CODE_SESSION_ID")
        .env_remove("CLAUDE_PROJECT_DIR");
    cmd
}

/// Runs git in `dir`, panicking with its stderr when it fails; returns trimmed stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = git_output(dir, args);
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// Runs git in `dir` as a test's author, whatever it answers.
pub fn git_output(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .unwrap()
}

/// Every file below `dir`, as paths relative to it, sorted.
pub fn tree(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                walk(base, &path, out);
            } else {
                out.push(path.strip_prefix(base).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

pub fn marker_writer() -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin!("marker-writer"));
    cmd.env_remove("VIGIL_STATE_DIR")
        .env("VIGIL_STATE_HOME", state_home())
        .env_remove("CLAUDE_PROJECT_DIR");
    cmd
}

/// `marker-writer ARGS` in `dir`, with no key from the test's own environment.
pub fn marker_writer_in(dir: &Path, args: &[&str]) -> std::process::Output {
    marker_writer()
        .args(args)
        .current_dir(dir)
        .env_remove("VIGIL_SIGN_KEY")
        .env_remove("VIGIL_VERIFY_KEY")
        .output()
        .unwrap()
}

/// A git repository with one committed file, `lib.rs`.
pub fn git_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    std::fs::write(dir.path().join("lib.rs"), "fn main() {}\n").unwrap();
    git(dir.path(), &["add", "."]);
    git(dir.path(), &["commit", "-qm", "init"]);
    dir
}

pub fn session_end_handoff() -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin!("session-end-handoff"));
    cmd.env_remove("VIGIL_DISABLE")
        .env_remove("VIGIL_STATE_DIR")
        .env("VIGIL_STATE_HOME", state_home())
        .env_remove("CLAUDE_PROJECT_DIR");
    cmd
}

pub fn session_start_loader() -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin!("session-start-loader"));
    cmd.env_remove("VIGIL_DISABLE")
        .env_remove("VIGIL_STATE_DIR")
        .env("VIGIL_STATE_HOME", state_home())
        .env_remove("CLAUDE_PROJECT_DIR")
        .env_remove("CLAUDE_ENV_FILE");
    cmd
}

pub fn settings_merge() -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin!("settings-merge"));
    cmd.env_remove("VIGIL_STATE_DIR")
        .env("VIGIL_STATE_HOME", state_home())
        .env_remove("CLAUDE_PROJECT_DIR")
        .env_remove("CLAUDE_CONFIG_DIR");
    cmd
}

/// The directory the test binaries were built into.
pub fn bin_dir() -> PathBuf {
    assert_cmd::cargo::cargo_bin!("stop-gate")
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Whether a process is alive and not a zombie (an orphan here may wait a while for a reaper).
pub fn running(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

/// Whether a live process has `word` among its arguments. A confined check has its own PID
/// namespace, so the pid it sees of itself means nothing here: tests find it by a word of its
/// command line instead (a `sleep` of a length no other test uses).
pub fn running_with_arg(word: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            return false;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            return false;
        };
        cmdline.split(|b| *b == 0).any(|arg| arg == word.as_bytes()) && running(pid)
    })
}

/// Runs `cmd` with `stdin` fed through a pipe (from a thread, so a binary that stops reading
/// early cannot block the test) and returns everything it printed.
pub fn output_with_stdin(mut cmd: std::process::Command, stdin: &[u8]) -> std::process::Output {
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    let bytes = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let _ = pipe.write_all(&bytes);
    });
    let out = child.wait_with_output().unwrap();
    let _ = writer.join();
    out
}

/// Runs `binary ARGS` with a terminal (a pseudo-terminal's far end) as its standard input, as when a
/// hook binary is run by hand; gives up on it after 10 s.
pub fn on_a_terminal(binary: &Path, args: &[&str]) -> std::process::Output {
    use std::os::fd::FromRawFd;
    let (mut leader, mut follower) = (0, 0);
    // SAFETY: openpty fills two descriptors, owned by the `File`s made from them below.
    let made = unsafe {
        libc::openpty(
            &mut leader,
            &mut follower,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(made, 0, "openpty");
    // SAFETY: both descriptors were just opened and belong to nobody else.
    let (leader, follower) = unsafe {
        (
            std::fs::File::from_raw_fd(leader),
            std::fs::File::from_raw_fd(follower),
        )
    };
    let mut child = std::process::Command::new(binary)
        .args(args)
        .env("VIGIL_STATE_HOME", state_home())
        .env_remove("VIGIL_DISABLE")
        .env_remove("VIGIL_STATE_DIR")
        .env_remove("CLAUDE_PROJECT_DIR")
        .stdin(std::process::Stdio::from(follower))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(10) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    drop(leader);
    child.wait_with_output().unwrap()
}

/// The system calls a binary made, as strace wrote them (one per line).
pub struct Calls {
    pub text: String,
}

impl Calls {
    /// How many calls of `name` were made.
    pub fn count(&self, name: &str) -> usize {
        self.text
            .lines()
            .filter(|l| {
                l.split_whitespace()
                    .nth(1)
                    .is_some_and(|c| c.starts_with(&format!("{name}(")))
            })
            .count()
    }
}

/// Runs `binary` in `dir` on `payload` under `strace -f`, tracing the calls in `trace` (a
/// comma-separated list): its output, and the calls. `None` (the test skips) where strace is
/// missing, which CI never allows.
pub fn traced(
    binary: &str,
    dir: &Path,
    payload: &Value,
    trace: &str,
) -> Option<(std::process::Output, Calls)> {
    traced_with(binary, &[], &[], dir, payload.to_string().as_bytes(), trace)
}

/// `traced`, with arguments, more variables in the environment, and `input` on standard input.
/// With any argument or variable, the calls are written whole (`-v`: an execve's environment).
pub fn traced_with(
    binary: &str,
    args: &[&std::ffi::OsStr],
    env: &[(&str, &std::ffi::OsStr)],
    dir: &Path,
    input: &[u8],
    trace: &str,
) -> Option<(std::process::Output, Calls)> {
    if std::process::Command::new("strace")
        .arg("-V")
        .output()
        .is_err()
    {
        assert!(
            std::env::var_os("VIGIL_E2E_REQUIRED").is_none(),
            "strace is needed here (CI installs it)"
        );
        eprintln!("skipping: no strace");
        return None;
    }
    let file = tempfile::NamedTempFile::new().unwrap();
    let mut cmd = std::process::Command::new("strace");
    cmd.args(["-f", "-qq"]);
    if !args.is_empty() || !env.is_empty() {
        cmd.args(["-v", "-s", "4096"]);
    }
    cmd.args(["-e", &format!("trace={trace}"), "-e", "signal=none", "-o"])
        .arg(file.path())
        .arg(bin_dir().join(binary))
        .args(args)
        .current_dir(dir)
        .env("VIGIL_STATE_HOME", state_home())
        .env_remove("VIGIL_STATE_DIR")
        .env_remove("CLAUDE_PROJECT_DIR")
        .env_remove("VIGIL_DISABLE")
        .env_remove("VIGIL_VERIFY_KEY")
        .env_remove("VIGIL_SIGN_KEY");
    for (name, value) in env {
        cmd.env(name, value);
    }
    let out = output_with_stdin(cmd, input);
    let text = std::fs::read_to_string(file.path()).unwrap();
    Some((out, Calls { text }))
}

/// A `git` earlier on PATH that sleeps before doing anything.
pub fn slow_git(seconds: &str) -> (tempfile::TempDir, String) {
    let bin = tempfile::tempdir().unwrap();
    let real = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let script = format!("#!/bin/sh\nsleep {seconds}\nexec {} \"$@\"\n", real.trim());
    std::fs::write(bin.path().join("git"), script).unwrap();
    std::fs::set_permissions(
        bin.path().join("git"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap()
    );
    (bin, path)
}

/// A finished command's status, stdout and stderr, for an assertion's message.
pub fn said(out: &std::process::Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
