//! The read-only set below the project's top (issue 43): what the engine, an editor or git
//! would run with the user's rights from anywhere in the project, not only its top.
//!
//! - The names of [`READ_ONLY`] at any depth: a subdirectory's `.claude/` (a session started
//!   there reads its hooks), a nested repository's `.git`, a package's `.mcp.json`.
//! - What git runs from the project ([`git_runs`]): the hooks directory `core.hooksPath` names
//!   (husky's `.husky/`), the files `include.path` and `includeIf` bring in, and the programs the
//!   settings that run one name (filters, `core.fsmonitor`, `core.sshCommand`, diff and merge
//!   drivers, aliases that run a shell, …), each as git itself reads the configuration.
//!
//! One walk finds them. The confinement binds each read-only; the file tools' guard denies a
//! write to any; and since no mount can forbid a name that does not exist yet, a walk after an
//! in-place check names what appeared ([`appeared`]).

use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crate::reach::{Entry, READ_ONLY};
use crate::sys::git;
use crate::sys::paths;
use crate::sys::time::Deadline;

/// The most repositories below the top whose configuration is read: each costs a git run.
/// A project with more is refused rather than half protected.
pub(crate) const MAX_REPOSITORIES: usize = 256;

/// How long reading every repository's configuration may take together (an include that
/// names a FIFO would otherwise hold it): past it the project is refused, never half read.
pub(crate) const CONFIG_BUDGET: Duration = Duration::from_secs(2);

/// What one walk of a project found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Found {
    /// Each read-only name below the top, where it is (never followed), and what it is; a
    /// symlink is listed as a file.
    pub entries: Vec<(PathBuf, Entry)>,
    /// Which of `entries` are symlinks: a mount covers where a link leads, never the link.
    pub links: Vec<PathBuf>,
    /// Each of `entries` with its inode: a folder replaced under the same path (the old one
    /// renamed away, a new one made) is not the one that was there.
    pub inodes: Vec<(PathBuf, u64)>,
    /// Directories the walk could not read: what is in them is not known.
    pub unreadable: Vec<PathBuf>,
}

/// Whether `name` is one of the read-only names, in any case (a case-insensitive disk takes
/// `.CLAUDE` for `.claude`).
pub(crate) fn is_read_only_name(name: &std::ffi::OsStr) -> bool {
    let name = name.as_encoded_bytes();
    // Every one starts with a dot: most names are passed at the first byte.
    name.first() == Some(&b'.')
        && READ_ONLY
            .iter()
            .any(|(entry, _)| entry.as_bytes().eq_ignore_ascii_case(name))
}

/// Every read-only name below `top` (the top's own are not listed: the confinement handles
/// them with stand-ins). No link is followed and no read-only directory entered (it is bound
/// read-only whole); what cannot be read is passed over (the agent's code, with fewer rights,
/// cannot write it either). Directories are read by as many threads as the machine has cores
/// (at most 4): a project of 100,000 files has thousands.
pub(crate) fn walk(top: &Path) -> Found {
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .clamp(1, 4);
    let shared = Shared {
        queue: Mutex::new((vec![(top.to_path_buf(), 0usize)], 0)),
        ready: Condvar::new(),
        found: Mutex::new(Found::default()),
    };
    std::thread::scope(|scope| {
        for _ in 1..threads {
            scope.spawn(|| shared.work());
        }
        shared.work();
    });
    let mut found = shared.found.into_inner().unwrap_or_else(|e| e.into_inner());
    found.entries.sort_by(|a, b| a.0.cmp(&b.0));
    found.entries.dedup_by(|a, b| a.0 == b.0);
    found.links.sort();
    found.unreadable.sort();
    found
}

/// What the walk's threads share: the directories left to read (and how many threads are
/// reading one now, which may add more), and what was found.
struct Shared {
    queue: Mutex<(Vec<(PathBuf, usize)>, usize)>,
    ready: Condvar,
    found: Mutex<Found>,
}

impl Shared {
    /// Reads directories until none is left and no thread is reading one.
    fn work(&self) {
        loop {
            let (dir, depth) = {
                let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    if let Some(next) = queue.0.pop() {
                        queue.1 += 1;
                        break next;
                    }
                    if queue.1 == 0 {
                        self.ready.notify_all();
                        return;
                    }
                    queue = self.ready.wait(queue).unwrap_or_else(|e| e.into_inner());
                }
            };
            let mut dirs = Vec::new();
            let mut found = Vec::new();
            let mut unreadable = false;
            // A git directory by its shape (`HEAD`, `objects/`, `refs/`), whatever its name:
            // `git init --bare lib` with a `core.worktree`, or `--separate-git-dir`.
            let mut shape = (false, false, false);
            match std::fs::read_dir(&dir) {
                Ok(entries) => {
                    for entry in entries.flatten() {
                        let Ok(kind) = entry.file_type() else {
                            continue;
                        };
                        let name = entry.file_name();
                        match name.as_encoded_bytes() {
                            b"HEAD" => shape.0 = kind.is_file(),
                            b"objects" => shape.1 = kind.is_dir(),
                            b"refs" => shape.2 = kind.is_dir(),
                            _ => {}
                        }
                        if is_read_only_name(&name) {
                            if depth > 0 {
                                found.push((dir.join(&name), kind.is_dir(), kind.is_symlink()));
                            }
                        } else if kind.is_dir() {
                            dirs.push((dir.join(&name), depth + 1));
                        }
                    }
                }
                Err(e) => unreadable = e.kind() != std::io::ErrorKind::NotFound,
            }
            if shape == (true, true, true) && depth > 0 {
                // Read-only whole, as a `.git` is: nothing in it is walked.
                dirs.clear();
                found.push((dir.clone(), true, false));
            }
            if !found.is_empty() || unreadable {
                let mut all = self.found.lock().unwrap_or_else(|e| e.into_inner());
                if unreadable {
                    all.unreadable.push(dir.clone());
                }
                for (path, is_dir, is_link) in found {
                    if is_link {
                        all.links.push(path.clone());
                    }
                    if let Ok(meta) = std::fs::symlink_metadata(&path) {
                        all.inodes
                            .push((path.clone(), crate::sys::files::inode(&meta)));
                    }
                    all.entries
                        .push((path, if is_dir { Entry::Dir } else { Entry::File }));
                }
            }
            let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            queue.0.extend(dirs);
            queue.1 -= 1;
            self.ready.notify_all();
        }
    }
}

/// The read-only names below the top in `after` that `before` did not have (or had as another
/// file: one replaced under the same path), and the directories `after` could not read that
/// `before` could (what the agent's code made there is hidden): each a place the engine or git
/// would run that the agent's code made.
pub(crate) fn appeared(before: &Found, after: &Found) -> Vec<PathBuf> {
    let inode = |found: &Found, path: &Path| {
        found
            .inodes
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, inode)| *inode)
    };
    let mut made: Vec<PathBuf> = after
        .entries
        .iter()
        .filter(|(path, _)| {
            !before.entries.iter().any(|(p, _)| p == path)
                || inode(before, path) != inode(after, path)
        })
        .map(|(path, _)| path.clone())
        .collect();
    made.extend(
        after
            .unreadable
            .iter()
            .filter(|dir| !before.unreadable.contains(dir))
            .cloned(),
    );
    made
}

/// The repositories of a project at `top`: the `.git` of the top, then those `found` below it.
pub(crate) fn repositories(top: &Path, found: &Found) -> Vec<PathBuf> {
    let mut repos = Vec::new();
    let own = top.join(".git");
    if std::fs::symlink_metadata(&own).is_ok() {
        repos.push(own);
    }
    // A `.git`, or a git directory by its shape (the walk lists it as a directory of the
    // read-only set under its own name).
    repos.extend(
        found
            .entries
            .iter()
            .filter(|(path, _)| {
                path.file_name().is_some_and(|n| n == ".git")
                    || !path.file_name().is_some_and(is_read_only_name)
            })
            .map(|(path, _)| path.clone()),
    );
    repos
}

/// What exists in the project at `top` (canonical) that the engine or git runs, as the rules an
/// install writes for the engines' sandboxes name it: each read-only entry below the top, and
/// each place git runs from, there or not yet (for the top's
/// repository, the nested ones and the one the project is part of), with its kind. The top's
/// own names are the caller's. Configuration git cannot read in time is passed over: the guard
/// and the Stop still hold what it names. Sorted, each once.
pub(crate) fn what_runs(top: &Path) -> Vec<(PathBuf, Entry)> {
    let found = walk(top);
    let mut repos = repositories(top, &found);
    if let Ok(holder) = git::Repository::locate(top)
        && holder.top != top
    {
        repos.push(holder.top.join(".git"));
    }
    let mut all = found.entries;
    let deadline = Deadline::after(CONFIG_BUDGET);
    for repo in repos.iter().take(MAX_REPOSITORIES) {
        if let Ok(runs) = git_runs(top, repo, deadline) {
            all.extend(runs.into_iter().map(|run| (run.path, run.entry)));
        }
    }
    all.retain(|(path, _)| paths::within(path, top) && path != top);
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all.dedup_by(|a, b| a.0 == b.0);
    all
}

/// A place in the project git runs code from, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GitRun {
    /// Where it really is.
    pub(crate) path: PathBuf,
    pub(crate) entry: Entry,
    pub(crate) why: String,
    /// Whether git's way to it, inside the project, passes a symlink: code that can write the
    /// project could point the link elsewhere, whatever is kept read-only where it leads.
    pub(crate) through_link: bool,
}

/// Whether `spelled` (lexical) passes a symlink at or below `top`.
fn through_link(top: &Path, spelled: &Path) -> bool {
    let Ok(rest) = spelled.strip_prefix(top) else {
        return false;
    };
    let mut at = top.to_path_buf();
    rest.components().any(|part| {
        at.push(part);
        std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink())
    })
}

/// The settings whose value runs a program, as git spells their keys (`*` one subsection):
/// git runs each through the shell, from the working tree's top.
const RUNS_A_PROGRAM: &[&str] = &[
    "core.fsmonitor",
    "core.sshcommand",
    "core.editor",
    "core.pager",
    "core.askpass",
    "sequence.editor",
    "gpg.program",
    "gpg.*.program",
    "diff.external",
    "diff.*.textconv",
    "diff.*.command",
    "merge.*.driver",
    "filter.*.clean",
    "filter.*.smudge",
    "filter.*.process",
    "credential.helper",
    "credential.*.helper",
    "interactive.difffilter",
    "difftool.*.cmd",
    "mergetool.*.cmd",
    "uploadpack.packobjectshook",
    "alias.*",
    "pager.*",
];

/// The hooks git runs, by name (githooks(5)).
const GIT_HOOKS: &[&str] = &[
    "applypatch-msg",
    "pre-applypatch",
    "post-applypatch",
    "pre-commit",
    "pre-merge-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-rebase",
    "post-checkout",
    "post-merge",
    "pre-push",
    "pre-receive",
    "update",
    "proc-receive",
    "post-receive",
    "post-update",
    "reference-transaction",
    "push-to-checkout",
    "pre-auto-gc",
    "post-rewrite",
    "sendemail-validate",
    "fsmonitor-watchman",
    "p4-changelist",
    "p4-prepare-changelist",
    "p4-post-changelist",
    "p4-pre-submit",
    "post-index-change",
];

/// Whether `key` (as git lists it) is one of [`RUNS_A_PROGRAM`].
fn runs_a_program(key: &str) -> bool {
    let (section, rest) = key.split_once('.').unwrap_or((key, ""));
    let name = rest.rsplit('.').next().unwrap_or(rest);
    let sub = rest.len() > name.len();
    RUNS_A_PROGRAM.iter().any(|pattern| {
        let mut parts = pattern.split('.');
        let (Some(p_section), Some(p_rest)) = (parts.next(), parts.next()) else {
            return false;
        };
        let p_name = parts.next();
        match p_name {
            // `section.*.name`: a subsection.
            Some(p_name) => p_section == section && sub && p_name == name,
            // `section.*`: any key of the section, with or without a subsection.
            None if p_rest == "*" => p_section == section,
            None => p_section == section && !sub && p_rest == name,
        }
    })
}

/// What git would run from inside `top` for the repository whose `.git` is `dot_git`, each
/// with what it is: the hooks directory, included configuration files, and every path a
/// program setting names (those that do not exist yet too: made later, they would run).
/// A `.git` that is no repository (a file naming nothing, a directory without `HEAD`) runs
/// nothing: git refuses it. `Err`: the configuration could not be read by `deadline`, which a
/// caller takes as a project it cannot vouch for.
pub(crate) fn git_runs(
    top: &Path,
    dot_git: &Path,
    deadline: Deadline,
) -> crate::error::Result<Vec<GitRun>> {
    let Some(worktree) = dot_git.parent() else {
        return Ok(Vec::new());
    };
    let git_dir = match std::fs::symlink_metadata(dot_git) {
        Ok(meta) if meta.is_dir() => dot_git.to_path_buf(),
        Ok(meta) if meta.is_file() => match git::gitdir_of(dot_git) {
            Some(named) => worktree.join(named),
            None => return Ok(Vec::new()),
        },
        _ => return Ok(Vec::new()),
    };
    if !git_dir.join("HEAD").is_file() {
        return Ok(Vec::new());
    }
    deadline.check("reading what git runs")?;
    let settings = match git::settings(dot_git, deadline.remaining()) {
        Ok(settings) => settings,
        // No git on this machine: git runs nothing.
        Err(e) if e.to_string().contains("git is not installed") => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let top = paths::canonical(top);
    let home = crate::sys::user::home();
    let expand = |word: &str, base: &Path| -> PathBuf {
        match (word.strip_prefix("~/"), &home) {
            (Some(rest), Some(home)) => home.join(rest),
            _ => base.join(word),
        }
    };
    let mut runs: Vec<GitRun> = Vec::new();
    let mut keep = |path: PathBuf, entry: Entry, why: String| {
        let spelled = paths::lexical(&path);
        let real = paths::canonical(&spelled);
        if paths::within(&real, &top) && real != top && !runs.iter().any(|r| r.path == real) {
            runs.push(GitRun {
                through_link: through_link(&top, &spelled),
                path: real,
                entry,
                why,
            });
        }
    };
    for setting in &settings {
        if let Some(origin) = &setting.origin {
            keep(
                origin.clone(),
                Entry::File,
                "git reads its configuration from it".to_string(),
            );
        }
        let Some(value) = setting.value.as_deref() else {
            continue;
        };
        let key = setting.key.as_str();
        if key == "core.hookspath" {
            let dir = expand(value, worktree);
            if paths::canonical(&paths::lexical(&dir)) == top {
                // The project's top itself (`core.hooksPath = .`), which cannot be read-only
                // whole: each hook git would run from it is.
                for hook in GIT_HOOKS {
                    keep(
                        dir.join(hook),
                        Entry::File,
                        "core.hooksPath names the project's top: git runs it as a hook".to_string(),
                    );
                }
            } else {
                keep(
                    dir,
                    Entry::Dir,
                    "core.hooksPath names it: git runs the hooks there".to_string(),
                );
            }
        } else if key == "include.path" || (key.starts_with("includeif.") && key.ends_with(".path"))
        {
            // Relative to the file that includes it.
            let base = setting
                .origin
                .as_deref()
                .and_then(Path::parent)
                .unwrap_or(worktree);
            keep(
                expand(value, base),
                Entry::File,
                format!("{key} names it: git reads its configuration from it"),
            );
        } else if runs_a_program(key) {
            // Shell punctuation glued to a word (`!f() { ./fmt.sh; }; f`) is not part of it.
            let line = value
                .strip_prefix('!')
                .unwrap_or(value)
                .replace([';', '&', '|', '(', ')', '{', '}', '<', '>', '`'], " ");
            let words = shlex::split(&line)
                .unwrap_or_else(|| line.split_whitespace().map(str::to_string).collect());
            for (at, word) in words.iter().enumerate() {
                let path = expand(word, worktree);
                // A path (`./scripts/clean.sh`, `tools/fmt`, made later or not), or the program
                // itself where the project holds an executable file of its name; never a bare
                // word that only names a folder (`credential.helper = store`, `!npm test`).
                let program = at == 0 && crate::sys::files::is_executable(&path);
                // A folder is never a program (`alias.fmt = !../../src` would keep the user's
                // own sources from them and from a check).
                if (word.contains('/') || program) && !path.is_dir() {
                    keep(path, Entry::File, format!("{key} names it: git runs it"));
                }
            }
        }
    }
    Ok(runs)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn the_settings_that_run_a_program_are_told_from_data() {
        for key in [
            "core.fsmonitor",
            "filter.lfs.clean",
            "filter.a.b.process",
            "diff.x.textconv",
            "alias.st",
            "pager.log",
            "gpg.ssh.program",
            "credential.https://example.com.helper",
        ] {
            assert!(runs_a_program(key), "{key}");
        }
        for key in [
            "core.bare",
            "user.name",
            "remote.origin.url",
            "submodule.lib.path",
            "filter.lfs.required",
            "core.fsmonitorhookversion",
        ] {
            assert!(!runs_a_program(key), "{key}");
        }
    }

    #[test]
    fn the_walk_finds_read_only_names_below_the_top_and_does_not_enter_them() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path();
        for d in [
            ".claude",
            "web/.claude/agents",
            "a/b/c/.git/hooks",
            "x/.CODEX",
        ] {
            std::fs::create_dir_all(top.join(d)).unwrap();
        }
        std::fs::write(top.join("pkg.mcp.json"), "").unwrap();
        std::fs::create_dir_all(top.join("pkg")).unwrap();
        std::fs::write(top.join("pkg/.mcp.json"), "{}").unwrap();
        crate::sys::files::symlink("/etc".as_ref(), &top.join("web/.idea")).unwrap();
        let found = walk(top);
        let names: Vec<String> = found
            .entries
            .iter()
            .map(|(p, _)| p.strip_prefix(top).unwrap().display().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "a/b/c/.git",
                "pkg/.mcp.json",
                "web/.claude",
                "web/.idea",
                "x/.CODEX"
            ]
        );
        assert_eq!(found.links, [top.join("web/.idea")]);
        let mut after = found.clone();
        after.entries.push((top.join("new/.claude"), Entry::Dir));
        assert_eq!(appeared(&found, &after), [top.join("new/.claude")]);
    }

    /// A folder replaced under the same path (its parent renamed away, a new one made) is
    /// not the one that was there; a directory the walk can no longer read hides what is in it.
    #[test]
    fn a_replaced_folder_and_a_directory_made_unreadable_count_as_made() {
        let web = PathBuf::from("/p/web/.claude");
        let before = Found {
            entries: vec![(web.clone(), Entry::Dir)],
            inodes: vec![(web.clone(), 7)],
            ..Found::default()
        };
        let same = before.clone();
        assert!(appeared(&before, &same).is_empty());
        let replaced = Found {
            inodes: vec![(web.clone(), 8)],
            ..before.clone()
        };
        assert_eq!(appeared(&before, &replaced), std::slice::from_ref(&web));
        let hidden = Found {
            unreadable: vec![PathBuf::from("/p/a")],
            ..before.clone()
        };
        assert_eq!(appeared(&before, &hidden), [PathBuf::from("/p/a")]);
        assert!(
            appeared(&hidden, &hidden).is_empty(),
            "unreadable before too"
        );
    }

    #[test]
    fn a_git_directory_is_found_by_its_shape_whatever_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path();
        for d in [
            "vendor/pkg/objects",
            "vendor/pkg/refs",
            "vendor/pkg/hooks/x",
        ] {
            std::fs::create_dir_all(top.join(d)).unwrap();
        }
        std::fs::write(top.join("vendor/pkg/HEAD"), "ref: refs/heads/main\n").unwrap();
        let found = walk(top);
        assert_eq!(found.entries, [(top.join("vendor/pkg"), Entry::Dir)]);
        assert_eq!(
            repositories(top, &found),
            [top.join("vendor/pkg")],
            "its configuration is read too"
        );
    }
}
