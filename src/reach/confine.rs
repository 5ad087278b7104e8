//! Confined checks (SPEC §9): the command of `stop-gate --run` and of `marker-writer run
//! --snapshot` is project code the agent may have written, so it runs where it can read the
//! machine but write only the reach of `reach` (the project or the snapshot, a private
//! temporary directory, directories the user names), cannot see the hidden set (the state home,
//! the signing key, the engines' homes, the user's session sockets), has its own PID namespace
//! and session (it cannot signal or inspect the gate), gets no `VIGIL_*` variable, and has no
//! network unless asked.
//!
//! Linux: bubblewrap, found only where the system keeps it (never through `PATH`, which the
//! agent may extend). Its `--json-status-fd` says whether the command was started: a sandbox
//! that could not be set up never looks like a check that failed, and the agent's code, which
//! could print anything, never decides that. macOS: Seatbelt, with a profile of the same reach
//! (`seatbelt`). Elsewhere confinement cannot be had yet.

mod seatbelt;
mod watch;

use seatbelt::seatbelt_command;
pub(crate) use watch::{Appeared, left_behind};
use watch::{Watch, nested_entries};

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::reach::{self, Entry};
use crate::sys::atomic;
use crate::sys::atomic::Durability;
use crate::sys::files;
use crate::sys::process;

/// Where bubblewrap may be; a copy anywhere else (the project, a directory the agent put on
/// `PATH`) is never run.
const BWRAP: &[&str] = &[
    "/usr/bin/bwrap",
    "/bin/bwrap",
    "/usr/local/bin/bwrap",
    "/run/current-system/sw/bin/bwrap",
];

/// The names of vigil's binaries, masked inside the confinement.
const BINARIES: &[&str] = &[
    "promise-matcher",
    "stop-gate",
    "marker-writer",
    "session-end-handoff",
    "session-start-loader",
    "settings-merge",
];

/// The package that brings the confinement, for the one useful line.
pub(crate) const PACKAGE: &str = "bubblewrap";

/// macOS's sandbox (Seatbelt), which takes a profile of its own language (SBPL).
const SEATBELT: &str = "/usr/bin/sandbox-exec";

/// What a check is confined to.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// The directory the command may write: the project's top, or the snapshot copy.
    pub work: PathBuf,
    /// Where the command starts (inside `work`).
    pub cwd: PathBuf,
    /// More directories the user lets it write (`--check-write`).
    pub writable: Vec<PathBuf>,
    /// Whether it may use the network (`--check-network`).
    pub network: bool,
    /// Files it must not see beyond the hidden set (the signing key).
    pub hide: Vec<PathBuf>,
    /// The project's `.vigil` (its in-project fallback state is hidden).
    pub project_state: PathBuf,
    /// A clean environment (`marker-writer run --snapshot`): only `snapshot::KEPT_ENV`, the
    /// locale and these names; `None` keeps the environment (less the withheld variables).
    pub clean_env: Option<Vec<String>>,
    /// Paths inside `work` the command may read but not write (a hold's tests, SPEC §11).
    pub read_only: Vec<PathBuf>,
    /// Places outside `work` shown read-only at a path inside it (`from`, `to`): a hold's
    /// declared environment (SPEC §11); the mount point at `to` is there already.
    pub bound: Vec<(PathBuf, PathBuf)>,
    /// Variables set for the command (a hold's check cache: `CARGO_TARGET_DIR`, …).
    pub env: Vec<(String, PathBuf)>,
    /// Where the stand-ins made in the project are listed (in the protected state) while a
    /// check runs, so that those of a gate killed outright are removed by the next run.
    pub ledger: Option<PathBuf>,
    /// Whether `work` is the project itself, not a copy thrown away after the run: then the
    /// read-only names below its top and what git runs from it are bound read-only too, and a
    /// walk after the run names those that appeared (`Confined::appeared`).
    pub in_place: bool,
}

/// Why a command could not be confined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Unavailable {
    /// No confinement on this machine: it runs unconfined only where the user allows it.
    Machine(String),
    /// This project cannot be confined as it is (a link the sandbox would write through):
    /// nothing runs, whatever the machine offers.
    Project(String),
}

impl Unavailable {
    pub(crate) fn message(&self) -> &str {
        match self {
            Unavailable::Machine(m) | Unavailable::Project(m) => m,
        }
    }
}

/// bubblewrap on this machine, when there is one.
pub(crate) fn sandbox() -> Result<PathBuf, Unavailable> {
    // Debug builds only (the test suite's): a machine without bubblewrap, or another copy.
    #[cfg(debug_assertions)]
    if let Some(path) = std::env::var_os("VIGIL_TEST_BWRAP").map(PathBuf::from) {
        return if files::is_executable(&path) {
            Ok(path)
        } else {
            Err(Unavailable::Machine(format!(
                "bubblewrap is not installed (install the package {PACKAGE})"
            )))
        };
    }
    if cfg!(target_os = "macos") {
        let seatbelt = PathBuf::from(SEATBELT);
        return if files::is_executable(&seatbelt) {
            Ok(seatbelt)
        } else {
            Err(Unavailable::Machine(format!("{SEATBELT} is missing")))
        };
    }
    if cfg!(windows) {
        return Err(Unavailable::Machine(
            "Windows has no sandbox for a check (Claude Code's is for Linux and macOS)".to_string(),
        ));
    }
    if !cfg!(target_os = "linux") {
        return Err(Unavailable::Machine(
            "no confinement is built for this system yet".to_string(),
        ));
    }
    BWRAP
        .iter()
        .map(PathBuf::from)
        .find(|path| files::is_executable(path))
        .ok_or_else(|| {
            Unavailable::Machine(format!(
                "bubblewrap is not installed (install the package {PACKAGE})"
            ))
        })
}

/// What a confined command leaves to look at once it has run: `started` says whether the
/// sandbox was set up and the command started, and dropping it removes the mount points it
/// had to make in the project.
pub(crate) struct Confined {
    /// bubblewrap's status pipe; `None` for Seatbelt, which reports nothing of the kind (a
    /// profile it refuses fails the run, which a check then reports as failed).
    status: Option<std::io::PipeReader>,
    made: Made,
    ledger: Option<PathBuf>,
    /// What was below the top before the run, to compare with after it (in place only).
    watch: Option<Watch>,
    /// The project's lock on its stand-ins, held for the run: a run going on at once (two of
    /// the user's hooks on one event) would remove stand-ins this one binds, or bind its own.
    _stand_ins: Option<crate::sys::lock::FileLock>,
    /// Seatbelt's private temporary directory, removed with this.
    _tmp: Option<tempfile::TempDir>,
}

impl Confined {
    /// Whether bubblewrap started the command. Read once the run has ended.
    pub(crate) fn started(&mut self) -> bool {
        let Some(status) = self.status.as_mut() else {
            return true;
        };
        process::set_nonblocking(status);
        let mut text = String::new();
        let _ = status.read_to_string(&mut text);
        text.contains("\"child-pid\"")
    }

    /// What the run made that the engine, an editor or git would run with the user's rights
    /// (a `.claude/` or `.git` below the top, a hook where `core.hooksPath` points): in place
    /// only, where nothing throws the work away. Read once the run has ended.
    pub(crate) fn appeared(&self) -> Appeared {
        self.watch.as_ref().map(Watch::appeared).unwrap_or_default()
    }
}

impl Drop for Confined {
    fn drop(&mut self) {
        remove_stand_ins(&self.made);
        if let Some(ledger) = &self.ledger
            && !self.made.is_empty()
        {
            let _ = std::fs::remove_file(ledger);
        }
    }
}

/// Removes stand-ins only where they are still as they were made: an empty directory, an
/// empty regular file.
fn remove_stand_ins(made: &[(PathBuf, Entry)]) {
    for (path, entry) in made.iter().rev() {
        match entry {
            Entry::Dir => {
                let _ = std::fs::remove_dir(path);
            }
            Entry::File => {
                if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && m.len() == 0) {
                    let _ = std::fs::remove_file(path);
                }
            }
        }
    }
}

/// The stand-ins a ledger lists: `d PATH` or `f PATH`, a line each.
fn read_ledger(ledger: &Path) -> Made {
    let Ok(text) = std::fs::read_to_string(ledger) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let (kind, path) = line.split_once(' ')?;
            let entry = match kind {
                "d" => Entry::Dir,
                "f" => Entry::File,
                _ => return None,
            };
            Some((PathBuf::from(path), entry))
        })
        .collect()
}

fn write_ledger(ledger: &Path, made: &Made) {
    let text: String = made
        .iter()
        .filter_map(|(path, entry)| {
            let kind = if *entry == Entry::Dir { "d" } else { "f" };
            Some(format!("{kind} {}\n", path.to_str()?))
        })
        .collect();
    let _ = atomic::write_atomic_as(ledger, text.as_bytes(), 0o600, Durability::Skip);
}

/// Mount points made in the project for entries that were not there, removed after the run.
type Made = Vec<(PathBuf, Entry)>;

/// One mount of the sandbox's view, applied parents first.
#[derive(Clone, Debug)]
enum Mount {
    Writable(PathBuf),
    ReadOnly(PathBuf),
    /// An empty read-only directory in place of what is there.
    EmptyDir(PathBuf),
    /// An empty read-only file in place of what is there.
    EmptyFile(PathBuf),
    /// What is at `.0`, read-only, at `.1`.
    ReadOnlyAt(PathBuf, PathBuf),
}

impl Mount {
    fn path(&self) -> &Path {
        match self {
            Mount::Writable(p) | Mount::ReadOnly(p) | Mount::EmptyDir(p) | Mount::EmptyFile(p) => p,
            Mount::ReadOnlyAt(_, to) => to,
        }
    }

    fn args(&self, out: &mut Vec<OsString>) {
        let path = self.path().as_os_str().to_os_string();
        match self {
            Mount::Writable(_) => out.extend(["--bind".into(), path.clone(), path]),
            Mount::ReadOnly(_) => out.extend(["--ro-bind".into(), path.clone(), path]),
            // Made read-only at the end, once what is mounted inside it is (`command`).
            Mount::EmptyDir(_) => out.extend(["--tmpfs".into(), path]),
            Mount::EmptyFile(_) => out.extend(["--ro-bind".into(), "/dev/null".into(), path]),
            Mount::ReadOnlyAt(from, _) => {
                out.extend(["--ro-bind".into(), from.as_os_str().to_os_string(), path])
            }
        }
    }
}

/// What a sandbox's view is made of: its mounts, the stand-ins made for it, what is watched
/// below the top, and the project's lock on its stand-ins.
type View = (
    Vec<Mount>,
    Made,
    Option<Watch>,
    Option<crate::sys::lock::FileLock>,
);

/// The mounts of `plan`, parents before what is inside them, and the mount points made for
/// read-only entries that did not exist.
fn mounts(plan: &Plan) -> Result<View, Unavailable> {
    let mut mounts = Vec::new();
    let mut made = Vec::new();
    // One run of a project at a time makes, binds and removes its stand-ins.
    let lock = match &plan.ledger {
        Some(ledger) => Some(
            crate::sys::lock::FileLock::acquire(
                &ledger.with_file_name("stand-ins.lock"),
                STAND_INS_WAIT,
            )
            .map_err(|e| {
                Unavailable::Project(format!(
                    "another confined run of this project did not end within {} s ({e})",
                    STAND_INS_WAIT.as_secs()
                ))
            })?,
        ),
        None => None,
    };
    // What a gate killed during its check left in the project goes first.
    if let Some(ledger) = &plan.ledger
        && ledger.exists()
    {
        remove_stand_ins(&read_ledger(ledger));
        let _ = std::fs::remove_file(ledger);
    }
    let real = |path: &Path| std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let work = real(&plan.work);
    let hidden = reach::hidden(&plan.project_state, &plan.hide);
    mounts.push(Mount::Writable(work.clone()));
    for dir in &plan.writable {
        if dir.is_dir() {
            mounts.push(Mount::Writable(real(dir)));
        }
    }
    for path in &plan.read_only {
        if std::fs::symlink_metadata(path).is_ok() {
            mounts.push(Mount::ReadOnly(path.clone()));
        }
    }
    for (from, to) in &plan.bound {
        mounts.push(Mount::ReadOnlyAt(real(from), to.clone()));
    }
    let planned = read_only_entries(&work, &hidden, &mut mounts)?;
    let watch = if plan.in_place {
        Some(nested_entries(
            &work,
            &hidden,
            &mut mounts,
            plan.ledger.as_deref(),
        )?)
    } else {
        None
    };
    // Listed once before any is made, so a gate killed at any instant leaves them named; not
    // waited for on the disk (only a crash loses the list, and then only the removal).
    if let Some(ledger) = &plan.ledger
        && !planned.is_empty()
    {
        write_ledger(ledger, &planned);
    }
    for (path, entry) in planned {
        let created = match entry {
            Entry::Dir => std::fs::create_dir(&path).is_ok(),
            Entry::File => std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
                .is_ok(),
        };
        if created {
            made.push((path.clone(), entry));
            mounts.push(match entry {
                Entry::Dir => Mount::EmptyDir(path),
                Entry::File => Mount::EmptyFile(path),
            });
        }
    }
    for (path, entry) in hidden {
        // The directory the check works in may sit inside a hidden one (a snapshot in the
        // state home): the rest is hidden, and the work, deeper, is bound after it.
        if path == work {
            continue;
        }
        mounts.push(match entry {
            Entry::Dir => Mount::EmptyDir(path),
            Entry::File => Mount::EmptyFile(path),
        });
    }
    // The shell's start-up files, where the project is the home itself (or holds it).
    if let Some(home) = crate::sys::user::home()
        && real(&home).starts_with(&work)
    {
        for name in reach::START_UP_FILES {
            let path = real(&home).join(name);
            if path.is_file() {
                mounts.push(Mount::ReadOnly(path));
            }
        }
    }
    if let Some(dir) = std::env::current_exe().ok().and_then(|exe| {
        std::fs::canonicalize(exe)
            .ok()
            .and_then(|e| e.parent().map(Path::to_path_buf))
    }) {
        for name in BINARIES {
            let path = dir.join(name);
            // A build inside the work (vigil's own tests as the check) writes its binaries.
            if path.is_file() && !path.starts_with(&work) {
                mounts.push(Mount::EmptyFile(path));
            }
        }
    }
    // Parents first, so what is inside a mount is mounted over it (the work inside a hidden
    // directory, a read-only entry inside the work); the sort keeps the order above for equals.
    mounts.sort_by_key(|m| m.path().components().count());
    Ok((mounts, made, watch, lock))
}

/// How long a confined run waits for another of the same project to end.
const STAND_INS_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

/// The mounts of the read-only entries of `work` that are there, with the git directories a
/// `.git` file names; the entries that are not there, to be made as mount points (only where
/// their parent is a real directory). A link in place of an entry: the project cannot be
/// confined.
fn read_only_entries(
    work: &Path,
    hidden: &[(PathBuf, Entry)],
    mounts: &mut Vec<Mount>,
) -> Result<Made, Unavailable> {
    let mut planned: Made = Vec::new();
    for (path, entry) in reach::read_only_in(work) {
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                // A mount covers where a link leads, never the link: the check could replace
                // the link itself (with a directory of its own), or write through one to
                // nothing.
                return Err(Unavailable::Project(format!(
                    "{} is a symlink, which a confined check could replace with files of its own that the engine or git would then run; make it a real {}",
                    path.display(),
                    if entry == Entry::Dir {
                        "directory"
                    } else {
                        "file"
                    }
                )));
            }
            Ok(meta) => {
                // A worktree's or submodule's `.git` file names the git directory git reads
                // config and hooks from: that, and its common directory, stay read-only too
                // (and visible, where they are under the private /tmp).
                // What the file names is the agent's choice: never a place of the hidden set.
                if meta.is_file() && path.file_name().is_some_and(|n| n == ".git") {
                    mounts.extend(
                        git_dirs(&path)
                            .into_iter()
                            .filter(|dir| !hidden.iter().any(|(h, _)| dir.starts_with(h)))
                            .map(Mount::ReadOnly),
                    );
                }
                mounts.push(Mount::ReadOnly(path));
            }
            Err(_) => {
                // Not there: an empty read-only stand-in keeps the check from making it. Its
                // mount point is made here (only where its parent is a real directory) and
                // removed after the run.
                let parent_is_dir = path
                    .parent()
                    .and_then(|p| std::fs::symlink_metadata(p).ok())
                    .is_some_and(|m| m.is_dir());
                if !parent_is_dir {
                    continue;
                }
                planned.push((path, entry));
            }
        }
    }
    Ok(planned)
}

/// The git directory a `.git` file names (`gitdir: …`), and its common directory (`commondir`),
/// as they really are.
/// Both files are the agent's to write: each is read only as a regular file of a few KiB, so a
/// FIFO or a huge file in its place holds nothing up.
fn git_dirs(dot_git: &Path) -> Vec<PathBuf> {
    let small = |path: &Path| {
        let file = files::open_regular(path).ok()?;
        let bytes = files::read_capped(file, 4096, "a git pointer", path).ok()?;
        Some(String::from_utf8(bytes).ok()?.trim_end().to_string())
    };
    let mut dirs = Vec::new();
    let Some(base) = dot_git.parent() else {
        return dirs;
    };
    let Some(named) =
        small(dot_git).and_then(|text| Some(text.strip_prefix("gitdir:")?.trim().to_string()))
    else {
        return dirs;
    };
    let Ok(gitdir) = std::fs::canonicalize(base.join(named)) else {
        return dirs;
    };
    if let Some(common) = small(&gitdir.join("commondir"))
        .and_then(|text| std::fs::canonicalize(gitdir.join(text)).ok())
    {
        dirs.push(common);
    }
    dirs.push(gitdir);
    dirs
}

/// `program args…` confined by the bubblewrap at `bwrap` as `plan` says: the command to run
/// (with `process::run`), and what to look at once it has.
pub(crate) fn command(
    bwrap: &Path,
    plan: &Plan,
    program: &std::ffi::OsStr,
    args: &[OsString],
) -> Result<(Command, Confined), Unavailable> {
    if bwrap.ends_with("sandbox-exec") {
        return seatbelt_command(bwrap, plan, program, args);
    }
    let (mounts, made, watch, lock) = mounts(plan)?;
    let (status, status_writer) =
        std::io::pipe().map_err(|e| Unavailable::Machine(format!("cannot make a pipe: {e}")))?;
    let fd = process::descriptor_number(&status_writer);
    let mut words: Vec<OsString> = vec![
        "--ro-bind".into(),
        "/".into(),
        "/".into(),
        "--dev".into(),
        "/dev".into(),
        "--proc".into(),
        "/proc".into(),
        // A private temporary directory, and none of the user's sockets in /run.
        "--tmpfs".into(),
        "/tmp".into(),
        "--tmpfs".into(),
        "/run".into(),
    ];
    if plan.network {
        // Name resolution may live in /run.
        words.extend([
            "--ro-bind-try".into(),
            "/run/systemd/resolve".into(),
            "/run/systemd/resolve".into(),
        ]);
    }
    for mount in &mounts {
        mount.args(&mut words);
    }
    // Deepest first; bubblewrap's remount does not reach into the mounts inside.
    for mount in mounts.iter().rev() {
        if let Mount::EmptyDir(path) = mount {
            words.extend(["--remount-ro".into(), path.as_os_str().to_os_string()]);
        }
    }
    words.extend(
        [
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--new-session",
            "--die-with-parent",
            "--cap-drop",
            "ALL",
        ]
        .map(OsString::from),
    );
    if !plan.network {
        words.push("--unshare-net".into());
    }
    // Where it really is: bubblewrap does not follow a link it has not mounted.
    let cwd = std::fs::canonicalize(&plan.cwd).unwrap_or_else(|_| plan.cwd.clone());
    words.extend(["--chdir".into(), cwd.as_os_str().to_os_string()]);
    words.extend(["--json-status-fd".into(), fd.to_string().into()]);
    words.push("--".into());
    words.push(program.to_os_string());
    words.extend(args.iter().cloned());

    let mut cmd = Command::new(bwrap);
    cmd.args(&words);
    confined_env(&mut cmd, plan);
    cmd.env("TMPDIR", "/tmp");
    // The child gets the writing end, and the parent's copy closes when the command is dropped
    // after the spawn, so the reader sees the end.
    process::pass_only(&mut cmd, status_writer);
    Ok((
        cmd,
        Confined {
            status: Some(status),
            made,
            ledger: plan.ledger.clone(),
            watch,
            _stand_ins: lock,
            _tmp: None,
        },
    ))
}

/// The environment a confined command gets: the plan's clean one where it asks for it, and
/// never a withheld variable (vigil's own, the user's session sockets).
fn confined_env(cmd: &mut Command, plan: &Plan) {
    if let Some(keep) = &plan.clean_env {
        process::clean_env(cmd, keep);
    }
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_none_or(reach::is_withheld_variable) {
            cmd.env_remove(&name);
        }
    }
    for (name, value) in &plan.env {
        cmd.env(name, value);
    }
}

/// Where no bind mount can be had (Seatbelt, an unconfined run), the declared environment of
/// `plan.bound` is linked in at its mount points instead.
pub(crate) fn link_bound(plan: &Plan) {
    for (from, to) in &plan.bound {
        if std::fs::symlink_metadata(to).is_ok_and(|m| m.is_dir()) {
            let _ = std::fs::remove_dir(to);
        } else {
            let _ = std::fs::remove_file(to);
        }
        let _ = files::symlink(from.as_os_str(), to);
    }
}

/// Why a sandbox that is installed is no use here.
pub(crate) fn not_here() -> Unavailable {
    Unavailable::Machine(
        "bubblewrap cannot make a sandbox on this machine (are user namespaces allowed?)"
            .to_string(),
    )
}

/// `sandbox()`, tried once: for callers off the hot path (a writer, the doctor), which ask
/// before they run anything.
pub(crate) fn working_sandbox() -> Result<PathBuf, Unavailable> {
    let sandbox = sandbox()?;
    if works(&sandbox) {
        Ok(sandbox)
    } else {
        Err(not_here())
    }
}

/// Whether bubblewrap can make a sandbox here at all (asked only after a confined run failed
/// to start, to tell the machine's fault from the project's).
pub(crate) fn works(bwrap: &Path) -> bool {
    if bwrap.ends_with("sandbox-exec") {
        return Command::new(bwrap)
            .args(["-p", "(version 1)(allow default)", "/usr/bin/true"])
            .status()
            .is_ok_and(|s| s.success());
    }
    Command::new(bwrap)
        .args([
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--unshare-pid",
            "--unshare-net",
            "--new-session",
            "--die-with-parent",
            "--cap-drop",
            "ALL",
            "--",
            "/bin/true",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
