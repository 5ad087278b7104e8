//! The Claude Code plugin (issue 18): hooks/hooks.json execs the binaries of the plugin's own
//! version straight from its data directory, and the launcher (hooks/vigil-run), run only by
//! the SessionStart hook, puts them there: a released plugin downloads the archive for the
//! platform and verifies it against the checksum the plugin pins before anything touches it; a
//! clone links what ./install.sh built. A bad download is refused in one line, nothing of it
//! runs or lands, and the next start tries again. The real release and the real client are in
//! tests/release.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::support::serve::{Reply, as_is, serve, unreachable};
use crate::support::*;

const VERSION: &str = env!("CARGO_PKG_VERSION");

const BINARIES: [&str; 6] = [
    "promise-matcher",
    "stop-gate",
    "marker-writer",
    "session-end-handoff",
    "session-start-loader",
    "settings-merge",
];

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
        let out = Command::new(self.root.join("scripts/pin-release.sh"))
            .arg(&file)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", said(&out));
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

fn feed(mut cmd: Command, stdin: &str) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
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
    let out = Command::new("tar")
        .arg("-cJf")
        .arg(&file)
        .arg("-C")
        .arg(&staging)
        .arg(format!("vigil-{target}"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
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

/// `sums` with `target`'s archive given `checksum`.
fn with_checksum(sums: &str, target: &str, checksum: &str) -> String {
    let name = format!("*vigil-{target}.tar.xz");
    sums.lines()
        .map(|l| {
            if l.ends_with(&name) {
                format!("{checksum} {name}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect()
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

// --- hooks.json --------------------------------------------------------------------------------

#[test]
fn plugin_manifest_and_hooks_are_well_formed() {
    let manifest = json_of(&repo_path(".claude-plugin/plugin.json"));
    assert_eq!(manifest["name"], "vigil");
    for command in manifest["commands"].as_array().unwrap() {
        assert!(repo_path(command.as_str().unwrap()).is_file(), "{command}");
    }
    assert!(
        manifest.get("hooks").is_none(),
        "hooks/hooks.json is loaded by convention; naming it again makes Claude Code load it twice"
    );
    let marketplace = json_of(&repo_path(".claude-plugin/marketplace.json"));
    assert_eq!(marketplace["plugins"][0]["name"], "vigil");
    assert_eq!(marketplace["plugins"][0]["source"], "./");
}

#[test]
fn only_session_start_goes_through_the_launcher_and_every_other_hook_execs_its_binary() {
    let hooks = json_of(&repo_path("hooks/hooks.json"));
    let events = hooks["hooks"].as_object().unwrap();
    let mut names: Vec<&str> = events.keys().map(String::as_str).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "PreCompact",
            "SessionEnd",
            "SessionStart",
            "Stop",
            "StopFailure",
            "UserPromptSubmit"
        ]
    );
    for (event, groups) in events {
        for hook in groups
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["hooks"].as_array().unwrap())
        {
            let command = hook["command"].as_str().unwrap();
            assert!(
                hook["args"].is_array(),
                "{event}: the exec form (args), so no shell runs: {hook}"
            );
            if event == "SessionStart" {
                assert_eq!(command, "${CLAUDE_PLUGIN_ROOT}/hooks/vigil-run");
                assert_eq!(hook["args"][0], "--install");
                assert!(
                    hook["timeout"].as_u64().is_some_and(|t| t >= 150),
                    "the fetch's own deadlines fit: {hook}"
                );
            } else {
                let binary = command
                    .strip_prefix(&format!("${{CLAUDE_PLUGIN_DATA}}/{VERSION}/bin/"))
                    .unwrap_or_else(|| panic!("{event} execs a binary of {VERSION}: {command}"));
                assert!(BINARIES.contains(&binary), "{event}: {binary}");
            }
        }
    }
}

// --- A released plugin: fetch, verify, install ---------------------------------------------------

#[test]
fn a_released_plugin_fetches_verifies_and_installs_its_version_at_session_start_then_runs_the_loader()
 {
    let plugin = Plugin::new();
    let dir = tempfile::tempdir().unwrap();
    let (served_dir, sums) = release(dir.path(), "good");
    plugin.pin(&sums);
    let server = serve(served_dir, as_is);
    let out = plugin.start(&server.url);
    assert!(out.status.success(), "{}", said(&out));
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        answer["hookSpecificOutput"]["additionalContext"],
        "good",
        "{}",
        said(&out)
    );
    let mut expected: Vec<String> = BINARIES.iter().map(|b| b.to_string()).collect();
    expected.sort();
    assert_eq!(plugin.installed(), expected);
    for binary in BINARIES {
        let path = plugin.bin().join(binary);
        let meta = std::fs::symlink_metadata(&path).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert!(
            meta.is_file() && meta.permissions().mode() & 0o111 != 0,
            "{binary}"
        );
    }
    assert_eq!(
        plugin.leftovers(),
        Vec::<String>::new(),
        "no download is left"
    );
    assert_eq!(
        server.requests(),
        vec![format!("/vigil-{}.tar.xz", host_target())]
    );
    // The loader got the hook's payload on stdin, untouched by the fetch.
    let stdin = std::fs::read_to_string(plugin.canary.with_extension("stdin")).unwrap();
    assert_eq!(stdin, read_fixture("samples/claude-session-start.json"));

    // Installed: the next start runs the loader and asks the network for nothing.
    let again = plugin.start(&unreachable());
    assert!(again.status.success(), "{}", said(&again));
    assert_eq!(server.requests().len(), 1);
    assert_eq!(plugin.ran().matches("session-start-loader good").count(), 2);
}

#[test]
fn each_bad_download_is_refused_in_one_line_nothing_of_it_runs_or_lands_and_the_next_start_retries()
{
    let dir = tempfile::tempdir().unwrap();
    let (good_dir, sums) = release(dir.path(), "good");
    // Another archive of the same name: what an agent that points VIGIL_DOWNLOAD_URL at its
    // own server (through a project's settings, say) would serve.
    let (evil_dir, _) = release(dir.path(), "evil");
    let host = format!("vigil-{}.tar.xz", host_target());
    let flipped = {
        let host = host.clone();
        move |name: &str, mut bytes: Vec<u8>| -> Reply {
            if name == host {
                let at = bytes.len() / 2;
                bytes[at] ^= 0x01;
            }
            as_is(name, bytes)
        }
    };
    let cut = {
        let host = host.clone();
        move |name: &str, mut bytes: Vec<u8>| -> Reply {
            let length = bytes.len();
            if name == host {
                bytes.truncate(length / 2);
            }
            (bytes, length)
        }
    };
    let shortened = move |name: &str, mut bytes: Vec<u8>| -> Reply {
        if name == host {
            bytes.truncate(bytes.len() / 2);
        }
        as_is(name, bytes)
    };
    let cases: Vec<(&str, String, Option<String>)> = vec![
        ("another archive", serve(evil_dir, as_is).url, None),
        ("a flipped byte", serve(good_dir.clone(), flipped).url, None),
        (
            "a download cut short",
            serve(good_dir.clone(), cut).url,
            None,
        ),
        (
            "a shortened file",
            serve(good_dir.clone(), shortened).url,
            None,
        ),
        ("a server that is not there", unreachable(), None),
        (
            "no such file (404)",
            serve(dir.path().join("nothing"), as_is).url,
            None,
        ),
        (
            "a wrong pinned checksum",
            serve(good_dir.clone(), as_is).url,
            Some(with_checksum(&sums, &host_target(), &"0".repeat(64))),
        ),
    ];
    for (what, url, pins) in cases {
        let plugin = Plugin::new();
        plugin.pin(&pins.unwrap_or_else(|| sums.clone()));
        let out = plugin.start(&url);
        let message = one_line_notice(&out);
        assert!(
            message.contains("next session tries again"),
            "{what}: {message}"
        );
        assert_eq!(plugin.ran(), "", "{what}: nothing ran");
        assert_eq!(
            plugin.installed(),
            Vec::<String>::new(),
            "{what}: nothing landed"
        );
        assert_eq!(plugin.leftovers(), Vec::<String>::new(), "{what}");

        // The next start, with the release as it should be, installs it and runs the loader.
        if what != "a wrong pinned checksum" {
            let good = serve(good_dir.clone(), as_is);
            let retried = plugin.start(&good.url);
            assert!(
                retried.status.success() && plugin.ran().contains("session-start-loader good"),
                "{what}: retried {}",
                said(&retried)
            );
            assert_eq!(plugin.installed().len(), BINARIES.len(), "{what}");
        }
    }
}

#[test]
fn with_no_sha256_tool_nothing_is_fetched_because_nothing_could_be_verified() {
    let plugin = Plugin::new();
    let dir = tempfile::tempdir().unwrap();
    let (served_dir, sums) = release(dir.path(), "good");
    plugin.pin(&sums);
    let server = serve(served_dir, as_is);
    if !Machine::available() {
        return;
    }
    let machine = Machine::default().without("sha256sum").without("shasum");
    let out = plugin.start_in(&server.url, &machine);
    let message = one_line_notice(&out);
    assert!(
        message.contains("neither sha256sum nor shasum"),
        "{message}"
    );
    assert_eq!(server.requests(), Vec::<String>::new(), "nothing fetched");
    assert_eq!(plugin.ran(), "");
    assert_eq!(plugin.installed(), Vec::<String>::new());
}

#[test]
fn pins_for_another_version_or_none_for_this_machine_fetch_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (served_dir, sums) = release(dir.path(), "good");
    let server = serve(served_dir, as_is);

    // Pins a release of another version: the plugin's own version is never fetched from it.
    let plugin = Plugin::new();
    plugin.pin(&sums);
    let pins = plugin.root.join("hooks/release.sha256");
    let text = std::fs::read_to_string(&pins).unwrap();
    std::fs::write(
        &pins,
        text.replace(&format!("version {VERSION}"), "version 0.0.9"),
    )
    .unwrap();
    let message = one_line_notice(&plugin.start(&server.url));
    assert!(
        message.contains("for vigil 0.0.9, not its own"),
        "{message}"
    );

    // A machine vigil has no release for: told to build from source.
    let plugin = Plugin::new();
    plugin.pin(&sums);
    if Machine::available() {
        let uname = "#!/bin/sh\ncase $1 in -s) echo FreeBSD ;; -m) echo amd64 ;; esac\n";
        let machine = Machine::default().with("uname", uname);
        let message = one_line_notice(&plugin.start_in(&server.url, &machine));
        assert!(
            message.contains("no release for FreeBSD amd64") && message.contains("./install.sh"),
            "{message}"
        );
    }

    // Pins with no line for this machine's target.
    let plugin = Plugin::new();
    plugin.pin(&sums);
    let text = std::fs::read_to_string(pins_of(&plugin)).unwrap();
    let without: String = text
        .lines()
        .filter(|l| !l.starts_with(&host_target()))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(pins_of(&plugin), without).unwrap();
    let message = one_line_notice(&plugin.start(&server.url));
    assert!(
        message.contains(&format!("no checksum for {}", host_target())),
        "{message}"
    );
    assert_eq!(server.requests(), Vec::<String>::new(), "nothing fetched");
}

fn pins_of(plugin: &Plugin) -> PathBuf {
    plugin.root.join("hooks/release.sha256")
}

#[test]
fn the_archive_fetched_is_the_one_for_the_machine_the_launcher_runs_on() {
    let dir = tempfile::tempdir().unwrap();
    let (served_dir, sums) = release(dir.path(), "good");
    let server = serve(served_dir, as_is);
    if !Machine::available() {
        return;
    }
    for (os, cpu, target) in [
        ("Darwin", "arm64", "aarch64-apple-darwin"),
        ("Darwin", "x86_64", "x86_64-apple-darwin"),
        ("Linux", "aarch64", "aarch64-unknown-linux-musl"),
        ("Linux", "x86_64", "x86_64-unknown-linux-musl"),
    ] {
        let plugin = Plugin::new();
        plugin.pin(&sums);
        let uname = format!("#!/bin/sh\ncase $1 in -s) echo {os} ;; -m) echo {cpu} ;; esac\n");
        let out = plugin.start_in(&server.url, &Machine::default().with("uname", &uname));
        assert!(out.status.success(), "{target}: {}", said(&out));
        assert_eq!(
            server.requests().last().unwrap(),
            &format!("/vigil-{target}.tar.xz")
        );
        assert_eq!(plugin.installed().len(), BINARIES.len(), "{target}");
    }
}

#[test]
fn two_sessions_starting_at_once_both_run_and_leave_one_whole_install() {
    let plugin = Plugin::new();
    let dir = tempfile::tempdir().unwrap();
    let (served_dir, sums) = release(dir.path(), "good");
    plugin.pin(&sums);
    let server = serve(served_dir, as_is);
    let starts: Vec<_> = (0..4)
        .map(|_| {
            let mut cmd = plugin.launcher(&server.url);
            cmd.stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for start in starts {
        let out = start.wait_with_output().unwrap();
        let answer: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", said(&out)));
        assert_eq!(answer["hookSpecificOutput"]["additionalContext"], "good");
    }
    assert_eq!(plugin.installed().len(), BINARIES.len());
    assert_eq!(plugin.leftovers(), Vec::<String>::new());
}

#[test]
fn a_data_directory_that_cannot_be_made_is_said_in_one_line_and_the_session_goes_on() {
    let plugin = Plugin::new();
    let dir = tempfile::tempdir().unwrap();
    let (served_dir, sums) = release(dir.path(), "good");
    plugin.pin(&sums);
    let server = serve(served_dir, as_is);
    // A file where the version's directory goes: no one, root included, can make it.
    std::fs::write(plugin.data.join(VERSION), "not a directory").unwrap();
    let message = one_line_notice(&plugin.start(&server.url));
    assert!(message.contains("cannot create"), "{message}");
    assert_eq!(server.requests(), Vec::<String>::new());
    assert_eq!(plugin.ran(), "");
    assert_eq!(
        std::fs::read_to_string(plugin.data.join(VERSION)).unwrap(),
        "not a directory",
        "left as it was"
    );
}

// --- A clone ------------------------------------------------------------------------------------

/// Runs a hooks.json entry as Claude Code's exec form does: the command with the plugin's
/// paths filled in, its args, no shell.
fn run_hook(plugin: &Plugin, event: &str, stdin: &str, cwd: &Path) -> Output {
    let hooks = json_of(&repo_path("hooks/hooks.json"));
    let hook = &hooks["hooks"][event][0]["hooks"][0];
    let fill = |s: &str| {
        s.replace("${CLAUDE_PLUGIN_DATA}", plugin.data.to_str().unwrap())
            .replace("${CLAUDE_PLUGIN_ROOT}", plugin.root.to_str().unwrap())
    };
    let mut cmd = Command::new(fill(hook["command"].as_str().unwrap()));
    for arg in hook["args"].as_array().unwrap() {
        cmd.arg(fill(arg.as_str().unwrap()));
    }
    cmd.env_clear()
        .env("HOME", &plugin.home)
        .env("PATH", "/usr/bin:/bin")
        .env("VIGIL_STATE_HOME", state_home())
        .current_dir(cwd);
    feed(cmd, stdin)
}

#[test]
fn a_clone_links_the_binaries_of_its_own_version_and_the_hooks_then_exec_them() {
    let plugin = Plugin::new();
    plugin.build_in_clone();
    let out = plugin.start(&unreachable());
    assert!(out.status.success(), "{}", said(&out));
    for binary in BINARIES {
        assert_eq!(
            std::fs::read_link(plugin.bin().join(binary)).unwrap(),
            plugin.root.join("target/release").join(binary),
            "{binary}"
        );
    }
    assert!(plugin.bin().join(".installed").is_file());
    // The Stop hook, as Claude Code runs it: the binary itself, no launcher and no shell. With
    // no loop and no checks it allows the stop, silently.
    let project = tempfile::tempdir().unwrap();
    let payload = sample_payload(
        "claude-stop.json",
        &[("cwd", Value::String(project.path().display().to_string()))],
    );
    let stop = run_hook(&plugin, "Stop", &payload, project.path());
    assert!(
        stop.status.success() && stop.stdout.is_empty(),
        "{}",
        said(&stop)
    );
}

#[test]
fn a_clone_with_nothing_of_its_version_installed_says_install_sh_and_links_nothing() {
    for place in ["target/release", "home/.local/bin", "none"] {
        let plugin = Plugin::new();
        // Binaries of another version where ./install.sh puts them, as an old install leaves
        // them; or nothing anywhere.
        let dir = match place {
            "target/release" => Some(plugin.root.join(place)),
            "home/.local/bin" => Some(plugin.home.join(".local/bin")),
            _ => None,
        };
        if let Some(dir) = &dir {
            std::fs::create_dir_all(dir).unwrap();
            for binary in BINARIES {
                let path = dir.join(binary);
                std::fs::write(
                    &path,
                    format!(
                        "#!/bin/sh\necho ran >>\"$VIGIL_TEST_CANARY\"\necho '{binary} 0.0.1'\n"
                    ),
                )
                .unwrap();
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
        }
        let message = one_line_notice(&plugin.start(&unreachable()));
        assert!(
            message.contains(&format!("{VERSION} is not installed; run ./install.sh")),
            "{place}: {message}"
        );
        assert_eq!(plugin.installed(), Vec::<String>::new(), "{place}");
        // Asked its version, never run as the hook.
        assert!(
            plugin.ran().lines().count() <= 1,
            "{place}: {}",
            plugin.ran()
        );
    }
}

/// What a project's `.claude/settings.json` can put in a hook's environment: a PATH with its
/// own `sha256sum` first (one that prints the pinned sum for anything), and TAR_OPTIONS that run
/// a command. Neither reaches the launcher, so another archive is still refused and nothing
/// runs.
#[test]
fn a_path_or_tar_options_from_the_projects_settings_never_get_an_archive_past_its_pin() {
    let dir = tempfile::tempdir().unwrap();
    let (good_dir, sums) = release(dir.path(), "good");
    let (evil_dir, _) = release(dir.path(), "evil");
    let pinned = sums
        .lines()
        .find(|l| l.ends_with(&format!("vigil-{}.tar.xz", host_target())))
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    let planted = dir.path().join("project/.bin");
    std::fs::create_dir_all(&planted).unwrap();
    let canary = dir.path().join("planted-ran");
    for program in ["sha256sum", "shasum", "tar", "curl", "dirname", "uname"] {
        let path = planted.join(program);
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\necho {program} >>'{}'\necho '{pinned}  '\"$1\"\n",
                canary.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let tar_ran = dir.path().join("tar-options-ran");
    let plugin = Plugin::new();
    plugin.pin(&sums);
    let evil = serve(evil_dir, as_is);
    let mut cmd = plugin.launcher(&evil.url);
    cmd.env("PATH", format!("{}:/usr/bin:/bin", planted.display()))
        .env(
            "TAR_OPTIONS",
            format!(
                "--checkpoint=1 --checkpoint-action=exec=touch\\ {}",
                tar_ran.display()
            ),
        )
        .env("XZ_OPT", "--memlimit=1");
    let out = feed(cmd, "{}");
    let message = one_line_notice(&out);
    assert!(
        message.contains("does not match its pinned checksum"),
        "{message}"
    );
    assert_eq!(plugin.ran(), "", "nothing of the other archive ran");
    assert_eq!(plugin.installed(), Vec::<String>::new());
    assert!(!canary.exists(), "no planted program ran");

    // With the real release, TAR_OPTIONS and XZ_OPT still change nothing: it installs, and the
    // checkpoint command never runs.
    let good = serve(good_dir, as_is);
    let mut cmd = plugin.launcher(&good.url);
    cmd.env(
        "TAR_OPTIONS",
        format!(
            "--checkpoint=1 --checkpoint-action=exec=touch\\ {}",
            tar_ran.display()
        ),
    )
    .env("XZ_OPT", "--memlimit=1");
    let out = feed(cmd, "{}");
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(plugin.installed().len(), BINARIES.len(), "{}", said(&out));
    assert!(!tar_ran.exists(), "TAR_OPTIONS ran a command");
}

/// A pinned archive that is no archive (or one a full disk cuts while it unpacks): nothing is
/// installed, nothing is stamped, and the next start fetches again.
#[test]
fn an_archive_that_does_not_unpack_installs_nothing_and_the_next_start_fetches_again() {
    let dir = tempfile::tempdir().unwrap();
    let (good_dir, _) = release(dir.path(), "good");
    let broken_dir = dir.path().join("broken");
    std::fs::create_dir_all(&broken_dir).unwrap();
    let mut sums = String::new();
    for target in TARGETS {
        let file = broken_dir.join(format!("vigil-{target}.tar.xz"));
        // xz's magic, then nothing an archive holds.
        std::fs::write(&file, b"\xfd7zXZ\x00 this is not an archive").unwrap();
        sums.push_str(&format!("{} *vigil-{target}.tar.xz\n", sha256(&file)));
    }
    let plugin = Plugin::new();
    plugin.pin(&sums);
    let broken = serve(broken_dir, as_is);
    let message = one_line_notice(&plugin.start(&broken.url));
    assert!(message.contains("could not unpack"), "{message}");
    assert_eq!(plugin.installed(), Vec::<String>::new());
    assert_eq!(plugin.leftovers(), Vec::<String>::new());
    assert_eq!(plugin.ran(), "");

    // Half an install (binaries there, no stamp, as a start killed between renames leaves it)
    // is fetched again, not taken as installed.
    let (_, good_sums) = release(&dir.path().join("again"), "good");
    let plugin = Plugin::new();
    plugin.pin(&good_sums);
    std::fs::create_dir_all(plugin.bin()).unwrap();
    std::fs::write(plugin.bin().join("stop-gate"), "#!/bin/sh\necho half\n").unwrap();
    let good = serve(dir.path().join("again/good"), as_is);
    let out = plugin.start(&good.url);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(good.requests().len(), 1, "fetched again");
    assert_eq!(plugin.installed().len(), BINARIES.len());
    drop(good_dir);
}

#[test]
fn the_slash_commands_run_what_is_installed_and_never_fetch() {
    let plugin = Plugin::new();
    let dir = tempfile::tempdir().unwrap();
    let (served_dir, sums) = release(dir.path(), "good");
    plugin.pin(&sums);
    let server = serve(served_dir, as_is);
    // As the commands' `!` lines run it: Claude Code fills in the data directory in the
    // command's text, and the shell it runs has no CLAUDE_PLUGIN_DATA.
    let mut cmd = Command::new(plugin.root.join("hooks/vigil-run"));
    cmd.arg("--data")
        .arg(&plugin.data)
        .args(["stop-gate", "loop", "status"])
        .env_clear()
        .env("HOME", &plugin.home)
        .env("PATH", format!("{}:/usr/bin:/bin", bin_dir().display()))
        .env("VIGIL_DOWNLOAD_URL", &server.url)
        .env("VIGIL_TEST_CANARY", &plugin.canary);
    let out = cmd.output().unwrap();
    let message = one_line_notice(&out);
    assert!(
        message.contains("fetched when a session starts"),
        "{message}"
    );
    assert_eq!(server.requests(), Vec::<String>::new());
    // Once a session start has installed it, the same command runs the installed binary.
    assert!(plugin.start(&server.url).status.success());
    let out = cmd.output().unwrap();
    assert!(
        plugin.ran().contains("stop-gate good loop status"),
        "{}",
        said(&out)
    );
}

// --- The one-line installer ---------------------------------------------------------------------

/// `curl …/hooks/vigil-run | sh -s -- --to DIR`: the script on a pipe, its pins and the archive
/// from `url`, in a HOME with nothing installed, on `machine`.
fn install_release(url: &str, machine: &Machine, dir: &Path) -> Output {
    install_release_to(url, machine, dir, &dir.join("home/.local/bin"))
}

fn install_release_to(url: &str, machine: &Machine, dir: &Path, to: &Path) -> Output {
    let script = std::fs::read_to_string(repo_path("hooks/vigil-run")).unwrap();
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut cmd = Command::new("sh");
    cmd.args(["-s", "--", "--to"])
        .arg(to)
        .env_clear()
        .env("HOME", &home)
        .env("PATH", "/usr/bin:/bin")
        .env("VIGIL_PINS_URL", format!("{url}/release.sha256"))
        .env("VIGIL_DOWNLOAD_URL", url)
        .env("VIGIL_TEST_CANARY", dir.join("ran"))
        .current_dir(&home);
    feed(machine.wrap(cmd), &script)
}

/// The stub release of `kind`, served with its pins beside it (as the default branch serves
/// hooks/release.sha256), pinned by scripts/pin-release.sh.
fn served_release(dir: &Path, kind: &str) -> PathBuf {
    let plugin = Plugin::new();
    let (served, sums) = release(dir, kind);
    plugin.pin(&sums);
    std::fs::copy(pins_of(&plugin), served.join("release.sha256")).unwrap();
    served
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn the_installer_installs_the_pinned_release_and_says_the_next_step_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let served = served_release(dir.path(), "good");
    let server = serve(served, as_is);
    let out = install_release(&server.url, &Machine::default(), dir.path());
    assert!(out.status.success(), "{}", said(&out));
    let bin = dir.path().join("home/.local/bin");
    let mut expected: Vec<String> = BINARIES.iter().map(|b| b.to_string()).collect();
    expected.sort();
    assert_eq!(listing(&bin), expected, "the six binaries and nothing else");
    let said_out = stdout_of(&out);
    assert_eq!(said_out.lines().count(), 1, "{said_out}");
    assert!(
        said_out.contains(&format!(
            "Next, in your project: {}/settings-merge install --settings .claude/settings.local.json --bin-dir {}",
            bin.display(),
            bin.display()
        )),
        "{said_out}"
    );
    assert_eq!(
        server.requests(),
        vec![
            "/release.sha256".to_string(),
            format!("/vigil-{}.tar.xz", host_target())
        ]
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ran")).ok(),
        None,
        "nothing ran"
    );
}

#[test]
fn the_installer_refuses_each_bad_download_in_one_line_and_installs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let good = served_release(dir.path(), "good");
    let evil_dir = dir.path().join("evil-release");
    std::fs::create_dir_all(&evil_dir).unwrap();
    let (evil, _) = release(&evil_dir, "evil");
    // The good release's pins beside the other archive.
    std::fs::copy(good.join("release.sha256"), evil.join("release.sha256")).unwrap();
    let host = format!("vigil-{}.tar.xz", host_target());
    let cut = {
        let host = host.clone();
        move |name: &str, mut bytes: Vec<u8>| -> Reply {
            let length = bytes.len();
            if name == host {
                bytes.truncate(length / 2);
            }
            (bytes, length)
        }
    };
    let no_pins = move |name: &str, bytes: Vec<u8>| -> Reply {
        if name == "release.sha256" {
            return (Vec::new(), 10);
        }
        as_is(name, bytes)
    };
    let plain = Machine::default();
    let no_sha = if Machine::available() {
        Machine::default().without("sha256sum").without("shasum")
    } else {
        Machine::default()
    };
    for (what, url, machine) in [
        ("another archive", serve(evil, as_is).url, &plain),
        ("a download cut short", serve(good.clone(), cut).url, &plain),
        ("pins cut short", serve(good.clone(), no_pins).url, &plain),
        ("a server that is not there", unreachable(), &plain),
        ("no sha256 tool", serve(good.clone(), as_is).url, &no_sha),
    ] {
        if what == "no sha256 tool" && no_sha.binds.is_empty() {
            continue;
        }
        let case = tempfile::tempdir().unwrap();
        let out = install_release(&url, machine, case.path());
        assert_eq!(out.status.code(), Some(1), "{what}: {}", said(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{what}: {stderr}");
        assert!(
            stderr.starts_with("vigil: ")
                && (stderr.contains("nothing was") || stderr.contains("was not downloaded")),
            "{what}: {stderr}"
        );
        assert_eq!(
            listing(&case.path().join("home/.local/bin")),
            Vec::<String>::new(),
            "{what}: nothing installed, nothing left behind"
        );
        assert_eq!(
            std::fs::read_to_string(case.path().join("ran")).ok(),
            None,
            "{what}: nothing ran"
        );
    }
}

#[test]
fn the_installers_next_step_quotes_a_directory_with_spaces_and_a_flag_without_its_value_is_refused()
{
    let dir = tempfile::tempdir().unwrap();
    let served = served_release(dir.path(), "good");
    let server = serve(served, as_is);
    let to = dir.path().join("my bin");
    let out = install_release_to(&server.url, &Machine::default(), dir.path(), &to);
    assert!(out.status.success(), "{}", said(&out));
    let said_out = stdout_of(&out);
    assert!(
        said_out.contains(&format!("'{}'/settings-merge install", to.display()))
            && said_out.contains(&format!("--bin-dir '{}'", to.display())),
        "{said_out}"
    );
    assert_eq!(listing(&to).len(), BINARIES.len());

    for args in [
        &["--to"][..],
        &["--to", ""][..],
        &["--data"][..],
        &["--pins"][..],
    ] {
        let out = Command::new("sh")
            .arg(repo_path("hooks/vigil-run"))
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", said(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.lines().count() == 1 && stderr.contains("needs a value"),
            "{args:?}: {stderr}"
        );
    }
}
