//! SPEC §1 and §8, the Claude Code plugin (issue 18): hooks/hooks.json execs the binaries of
//! the plugin's own version straight from its data directory, and the launcher
//! (hooks/vigil-run), run only by the SessionStart hook, puts them there: a released plugin
//! downloads the archive for the platform and verifies it against the checksum the plugin pins
//! before anything touches it; a clone links what ./install.sh built. A bad download is refused
//! in one line, nothing of it runs or lands, and the next start tries again. The real release
//! and the real client are in tests/release. Here the plugin, the machine and the release the
//! files beside it share.

mod clone;
mod hooks_json;
mod one_line_installer;
mod released;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::support::*;

/// A plugin pinned to a good release that a server on 127.0.0.1 serves: the plugin, the
/// release's directory, and the server.
fn pinned_and_served() -> (Plugin, tempfile::TempDir, crate::support::serve::Served) {
    let plugin = Plugin::new();
    let dir = tempfile::tempdir().unwrap();
    let (served_dir, sums) = release(dir.path(), "good");
    plugin.pin(&sums);
    let server = crate::support::serve::serve(served_dir, crate::support::serve::as_is);
    (plugin, dir, server)
}

/// What a server sends of the archive named `host`: half of it, the length promised whole (a
/// download cut short).
fn cut_short(
    host: &str,
) -> impl Fn(&str, Vec<u8>) -> crate::support::serve::Reply + Send + Sync + 'static {
    let host = host.to_string();
    move |name: &str, mut bytes: Vec<u8>| {
        let length = bytes.len();
        if name == host {
            bytes.truncate(length / 2);
        }
        (bytes, length)
    }
}

fn pins_of(plugin: &Plugin) -> PathBuf {
    plugin.root.join("hooks/release.sha256")
}

const VERSION: &str = env!("CARGO_PKG_VERSION");

const TARGETS: [&str; 4] = [
    "x86_64-unknown-linux-musl",
    "aarch64-unknown-linux-musl",
    "x86_64-apple-darwin",
    "aarch64-apple-darwin",
];

/// The release target the launcher picks on this machine.
fn host_target() -> String {
    let os = if cfg!(target_os = "macos") {
        "apple-darwin"
    } else {
        "unknown-linux-musl"
    };
    format!("{}-{os}", std::env::consts::ARCH)
}

/// A plugin as Claude Code holds it: its files (a copy of the tracked ones it needs), a data
/// directory of its own, a HOME with nothing installed, and a canary every stub binary writes
/// to when it runs.
struct Plugin {
    _dirs: tempfile::TempDir,
    root: PathBuf,
    data: PathBuf,
    home: PathBuf,
    canary: PathBuf,
}

impl Plugin {
    fn new() -> Plugin {
        let dirs = tempfile::tempdir().unwrap();
        let root = dirs.path().join("plugin");
        for relative in [
            "hooks/vigil-run",
            "hooks/hooks.json",
            ".claude-plugin/plugin.json",
            "scripts/pin-release.sh",
            "Cargo.toml",
        ] {
            let to = root.join(relative);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(repo_path(relative), &to).unwrap();
        }
        let data = dirs.path().join("data/vigil-vigil");
        let home = dirs.path().join("home");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        Plugin {
            canary: dirs.path().join("ran"),
            _dirs: dirs,
            root,
            data,
            home,
        }
    }

    fn bin(&self) -> PathBuf {
        self.data.join(VERSION).join("bin")
    }

    /// The binaries installed for the plugin's version, when the install is whole (its stamp,
    /// written last, is there); the files there otherwise, the stamp's absence shown.
    fn installed(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.bin())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != ".installed")
            .collect();
        names.sort();
        if !names.is_empty() && !self.bin().join(".installed").is_file() {
            names.push("(no .installed stamp)".into());
        }
        names
    }

    /// What a fetch left in the data directory besides the version's own.
    fn leftovers(&self) -> Vec<String> {
        std::fs::read_dir(&self.data)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != VERSION)
            .collect()
    }

    /// What the stub binaries ran, one line each.
    fn ran(&self) -> String {
        std::fs::read_to_string(&self.canary).unwrap_or_default()
    }

    /// Pins `sums` (dist's sha256.sum lines) with the plugin's own pin script.
    fn pin(&self, sums: &str) {
        let file = self.root.join("sha256.sum");
        std::fs::write(&file, sums).unwrap();
        ok(Command::new(self.root.join("scripts/pin-release.sh"))
            .arg(&file)
            .output()
            .unwrap());
    }

    /// The launcher as the SessionStart hook runs it.
    fn launcher(&self, url: &str) -> Command {
        let mut cmd = Command::new(self.root.join("hooks/vigil-run"));
        cmd.args(["--install", "session-start-loader"])
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", "/usr/bin:/bin")
            .env("CLAUDE_PLUGIN_ROOT", &self.root)
            .env("CLAUDE_PLUGIN_DATA", &self.data)
            .env("VIGIL_DOWNLOAD_URL", url)
            .env("VIGIL_TEST_CANARY", &self.canary)
            .current_dir(&self.home);
        cmd
    }

    /// A session start: the launcher with the SessionStart payload on stdin.
    fn start(&self, url: &str) -> Output {
        self.start_in(url, &Machine::default())
    }

    /// A session start on a machine changed as `machine` says.
    fn start_in(&self, url: &str, machine: &Machine) -> Output {
        feed(
            machine.wrap(self.launcher(url)),
            &read_fixture("samples/claude-session-start.json"),
        )
    }

    /// Links the test's built binaries where a clone's ./install.sh builds them.
    fn build_in_clone(&self) {
        let release = self.root.join("target/release");
        std::fs::create_dir_all(&release).unwrap();
        for binary in BINARIES {
            std::os::unix::fs::symlink(bin_dir().join(binary), release.join(binary)).unwrap();
        }
    }
}

/// The machine a launcher runs on, changed by bubblewrap: a file bound over a program in
/// /usr/bin (a `uname` that names another system), or /dev/null over one to take it away.
/// The launcher looks nothing up on the caller's PATH, so this is how a test changes what it
/// finds.
#[derive(Default)]
struct Machine {
    binds: Vec<(PathBuf, PathBuf)>,
    _dir: Option<tempfile::TempDir>,
}

impl Machine {
    /// Whether bubblewrap runs here; CI requires it.
    fn available() -> bool {
        let runs = Command::new("bwrap")
            .args(["--dev-bind", "/", "/", "true"])
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            runs || std::env::var_os("VIGIL_E2E_REQUIRED").is_none(),
            "bubblewrap is required here"
        );
        if !runs {
            skip("bubblewrap does not run here");
        }
        runs
    }

    /// Without `program` (as if it were not installed).
    fn without(mut self, program: &str) -> Machine {
        let at = Path::new("/usr/bin").join(program);
        if at.exists() {
            self.binds.push((PathBuf::from("/dev/null"), at));
        }
        self
    }

    /// With `program` replaced by `script`.
    fn with(mut self, program: &str, script: &str) -> Machine {
        let dir = self
            ._dir
            .get_or_insert_with(|| tempfile::tempdir().unwrap());
        let file = dir.path().join(program);
        std::fs::write(&file, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        self.binds.push((file, Path::new("/usr/bin").join(program)));
        self
    }

    fn wrap(&self, cmd: Command) -> Command {
        if self.binds.is_empty() {
            return cmd;
        }
        let mut wrapped = Command::new("/usr/bin/bwrap");
        wrapped.args(["--dev-bind", "/", "/"]);
        for (from, to) in &self.binds {
            wrapped.arg("--ro-bind").arg(from).arg(to);
        }
        if let Some(dir) = cmd.get_current_dir() {
            wrapped.arg("--chdir").arg(dir);
        }
        wrapped
            .arg("--")
            .arg(cmd.get_program())
            .args(cmd.get_args());
        wrapped.env_clear();
        for (key, value) in cmd.get_envs() {
            if let Some(value) = value {
                wrapped.env(key, value);
            }
        }
        wrapped
    }
}

/// Runs `cmd` with `stdin` on its standard input (which it may not read whole): everything it
/// printed.
fn feed(mut cmd: Command, stdin: &str) -> Output {
    let child = spawn_feeding(
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped()),
        stdin.as_bytes(),
    );
    child.wait_with_output().unwrap()
}

/// A release archive as dist lays it out (`vigil-<target>/<binary>`), of stub binaries that
/// note each run in the canary and answer `--version` as this version; `kind` is what the
/// stub loader tells the session.
fn archive(dir: &Path, target: &str, kind: &str) -> PathBuf {
    let staging = dir.join(format!("staging-{kind}-{target}"));
    let top = staging.join(format!("vigil-{target}"));
    std::fs::create_dir_all(&top).unwrap();
    for binary in BINARIES {
        let script = format!(
            "#!/bin/sh\necho \"{binary} {kind} $*\" >>\"$VIGIL_TEST_CANARY\"\n\
             if [ \"$1\" = --version ]; then echo '{binary} {VERSION}'; exit 0; fi\n\
             cat >\"$VIGIL_TEST_CANARY.stdin\"\n\
             echo '{{\"hookSpecificOutput\":{{\"hookEventName\":\"SessionStart\",\"additionalContext\":\"{kind}\"}}}}'\n"
        );
        let path = top.join(binary);
        std::fs::write(&path, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::write(top.join("README.md"), "vigil\n").unwrap();
    let out_dir = dir.join(kind);
    std::fs::create_dir_all(&out_dir).unwrap();
    let file = out_dir.join(format!("vigil-{target}.tar.xz"));
    ok(Command::new("tar")
        .arg("-cJf")
        .arg(&file)
        .arg("-C")
        .arg(&staging)
        .arg(format!("vigil-{target}"))
        .output()
        .unwrap());
    file
}

fn sha256(file: &Path) -> String {
    let out = Command::new("sha256sum").arg(file).output().unwrap();
    stdout_of(&out)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// A release of stub archives for every target in `dir/<kind>`, and dist's sha256.sum of it.
fn release(dir: &Path, kind: &str) -> (PathBuf, String) {
    let mut sums = String::new();
    for target in TARGETS {
        let file = archive(dir, target, kind);
        sums.push_str(&format!("{} *vigil-{target}.tar.xz\n", sha256(&file)));
    }
    (dir.join(kind), sums)
}

/// stdout is one line of JSON holding only a systemMessage that starts with "vigil: "; the
/// hook succeeded so the session goes on. Returns the message.
fn one_line_notice(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(0), "{}", said(out));
    let stdout = stdout_of(out);
    assert_eq!(stdout.lines().count(), 1, "{}", said(out));
    let notice: Value = serde_json::from_str(&stdout).unwrap();
    let object = notice.as_object().unwrap();
    assert_eq!(object.len(), 1, "{notice}");
    let message = notice["systemMessage"].as_str().unwrap().to_string();
    assert!(message.starts_with("vigil: "), "{message}");
    message
}
