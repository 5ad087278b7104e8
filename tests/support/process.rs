//! Running a process and reading what it did: its output, its terminal, its system calls.

use std::path::Path;

use serde_json::Value;

use super::{bin_dir, isolated};

/// stdout of a finished command as a string.
pub fn stdout_of(output: &std::process::Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

/// A test that cannot run here for want of a tool says so, past the harness's capture, in the
/// line `scripts/test.sh` counts and names at the end of the run: a skipped test must not read
/// as passed. (Where the tool is required, `VIGIL_*_REQUIRED`, the test fails instead.)
pub fn skip(why: &str) {
    use std::io::Write;
    let name = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    let _ = writeln!(std::io::stderr(), "vigil-test: SKIPPED {name}: {why}");
}

/// A test that cannot have what it needs (`why`): a failure where CI requires it
/// (`VIGIL_E2E_REQUIRED`: "`what` is required here"), else the skip line naming `skipped`.
pub fn skip_unless_required(what: &str, skipped: &str, why: &str) {
    assert!(
        std::env::var_os("VIGIL_E2E_REQUIRED").is_none(),
        "{what} is required here, but {why}"
    );
    skip(&format!("{skipped}: {why}"));
}

/// The findings of `settings-merge check --verbose`, each on one line: its headline, then the
/// lines of its detail.
pub fn findings_of(said: &str) -> Vec<String> {
    let mut findings: Vec<String> = Vec::new();
    for line in said.lines() {
        match findings.last_mut() {
            Some(last) if line.starts_with("       ") => {
                last.push(' ');
                last.push_str(line.trim());
            }
            _ => findings.push(line.to_string()),
        }
    }
    findings
}

/// The first of `findings` that says `part` (the test fails, showing them all, when none does).
#[track_caller]
pub fn finding<'a>(findings: &'a [String], part: &str) -> &'a str {
    findings
        .iter()
        .find(|f| f.contains(part))
        .unwrap_or_else(|| panic!("{part:?} in none of {findings:#?}"))
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

/// Waits at most 5 s for a live process with `word` among its arguments
/// ([`running_with_arg`]): whether there is one.
pub fn soon_running_with_arg(word: &str) -> bool {
    for _ in 0..250 {
        if running_with_arg(word) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    running_with_arg(word)
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

/// Starts `cmd` with `stdin` written to its standard input, which is then closed: a child the
/// test waits for, signals or kills itself (its stdout and stderr go where `cmd` sends them).
pub fn spawn_fed(cmd: &mut std::process::Command, stdin: &[u8]) -> std::process::Child {
    let (child, written) = spawn_writing(cmd, stdin);
    written.unwrap();
    child
}

/// [`spawn_fed`] for a child that may stop reading before the end of `stdin` (one the test
/// kills midway): a write it cuts short is no failure.
pub fn spawn_feeding(cmd: &mut std::process::Command, stdin: &[u8]) -> std::process::Child {
    spawn_writing(cmd, stdin).0
}

fn spawn_writing(
    cmd: &mut std::process::Command,
    stdin: &[u8],
) -> (std::process::Child, std::io::Result<()>) {
    use std::io::Write;
    let mut child = cmd.stdin(std::process::Stdio::piped()).spawn().unwrap();
    let written = child.stdin.take().unwrap().write_all(stdin);
    (child, written)
}

/// Less than `limit` has passed since `started`, else the test fails saying `why` and how long
/// it took.
#[track_caller]
pub fn assert_within(started: std::time::Instant, limit: std::time::Duration, why: &str) {
    let took = started.elapsed();
    assert!(took < limit, "{why} (took {took:?})");
}

/// Polls `child` every 20 ms until it exits or `limit` has passed since `start`: how it exited,
/// or `None` while it still runs.
pub fn exited_within(
    child: &mut std::process::Child,
    start: std::time::Instant,
    limit: std::time::Duration,
) -> Option<std::process::ExitStatus> {
    while child.try_wait().unwrap().is_none() && start.elapsed() < limit {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.try_wait().unwrap()
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
    let mut child = isolated(&mut std::process::Command::new(binary))
        .args(args)
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
    if !super::strace_runs() {
        return None;
    }
    let file = tempfile::NamedTempFile::new().unwrap();
    let mut cmd = std::process::Command::new("strace");
    cmd.args(["-f", "-qq"]);
    if !args.is_empty() || !env.is_empty() {
        cmd.args(["-v", "-s", "4096"]);
    }
    isolated(&mut cmd)
        .args(["-e", &format!("trace={trace}"), "-e", "signal=none", "-o"])
        .arg(file.path())
        .arg(bin_dir().join(binary))
        .args(args)
        .current_dir(dir);
    for (name, value) in env {
        cmd.env(name, value);
    }
    let out = output_with_stdin(cmd, input);
    let text = std::fs::read_to_string(file.path()).unwrap();
    Some((out, Calls { text }))
}
