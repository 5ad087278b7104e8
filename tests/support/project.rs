//! A throwaway project, built as a test asks: a temporary directory, a real git repository
//! with a test's author, a HOME of its own, vigil installed into its local settings.
//!
//! `Project::new()` is an empty directory, `Project::git()` a repository with `lib.rs`
//! committed on `main`; `Project::builder()` says more:
//!
//! ```ignore
//! let p = Project::builder().git().subdirectory("sub").home().installed(&["--protect"]).build();
//! ```

use std::path::{Path, PathBuf};

use super::{bin_dir, git, ok, protected_dir, session_record_of, settings_merge, write_file};

/// A throwaway project, and the ways a test talks to the binaries about it (the Stop hook and
/// the loop commands are in `stop.rs` and `loops.rs`).
pub struct Project {
    root: tempfile::TempDir,
    /// The repository's top: the temporary directory, or the directory named in it.
    top: PathBuf,
    /// The project: the top, or a subdirectory of it.
    dir: PathBuf,
    home: Option<tempfile::TempDir>,
}

/// What a [`Project`] is made of, before it is made.
#[derive(Default)]
pub struct ProjectBuilder {
    named: Option<String>,
    subdirectory: Option<String>,
    files: Vec<(String, String)>,
    git: bool,
    home: bool,
    install: Option<Vec<String>>,
    outside_tmp: bool,
}

impl ProjectBuilder {
    /// The repository is the directory `name` inside the temporary directory, which leaves
    /// room beside it (a HOME, a state home).
    pub fn named(mut self, name: &str) -> ProjectBuilder {
        self.named = Some(name.to_string());
        self
    }

    /// A file of the repository (committed with [`ProjectBuilder::git`]); `lib.rs` when none
    /// is given.
    pub fn file(mut self, relative: &str, contents: &str) -> ProjectBuilder {
        self.files
            .push((relative.to_string(), contents.to_string()));
        self
    }

    /// A real git repository: `git init` on `main`, its files committed by a test's author.
    pub fn git(mut self) -> ProjectBuilder {
        self.git = true;
        self
    }

    /// The project is this directory of the repository, as in a monorepo.
    pub fn subdirectory(mut self, relative: &str) -> ProjectBuilder {
        self.subdirectory = Some(relative.to_string());
        self
    }

    /// Made outside the system's temporary directory (in cargo's own, under `target/`), where
    /// a confined check sees it: a check hides `/tmp`.
    pub fn outside_tmp(mut self) -> ProjectBuilder {
        self.outside_tmp = true;
        self
    }

    /// A HOME of the project's own, for the installer and the hooks ([`Project::home`]).
    pub fn home(mut self) -> ProjectBuilder {
        self.home = true;
        self
    }

    /// vigil installed into the project's `.claude/settings.local.json` with these flags
    /// ([`Project::install`]).
    pub fn installed(mut self, flags: &[&str]) -> ProjectBuilder {
        self.install = Some(flags.iter().map(|f| f.to_string()).collect());
        self
    }

    pub fn build(self) -> Project {
        let root = if self.outside_tmp {
            tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
        } else {
            tempfile::tempdir().unwrap()
        };
        let top = match &self.named {
            Some(name) => root.path().join(name),
            None => root.path().to_path_buf(),
        };
        std::fs::create_dir_all(&top).unwrap();
        let mut files = self.files;
        if files.is_empty() && self.git {
            files.push(("lib.rs".into(), "fn main() {}\n".into()));
        }
        if self.git {
            git(&top, &["init", "-q", "-b", "main"]);
        }
        for (relative, contents) in &files {
            let path = top.join(relative);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, contents).unwrap();
        }
        if self.git {
            git(&top, &["add", "."]);
            git(&top, &["commit", "-qm", "init"]);
        }
        let dir = match &self.subdirectory {
            Some(sub) => top.join(sub),
            None => top.clone(),
        };
        std::fs::create_dir_all(&dir).unwrap();
        let project = Project {
            root,
            top,
            dir,
            home: self.home.then(|| tempfile::tempdir().unwrap()),
        };
        if let Some(flags) = self.install {
            let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
            project.install(&flags);
        }
        project
    }
}

impl Project {
    /// An empty temporary directory.
    pub fn new() -> Project {
        Project::builder().build()
    }

    /// A git repository with one committed file, `lib.rs`.
    pub fn git() -> Project {
        Project::builder().git().build()
    }

    pub fn builder() -> ProjectBuilder {
        ProjectBuilder::default()
    }

    /// The project's directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The repository's top (the project's directory, unless it is a subdirectory).
    pub fn top(&self) -> &Path {
        &self.top
    }

    /// The temporary directory that holds it all.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// The path beside the project named after it, with `-suffix`.
    pub fn beside(&self, suffix: &str) -> PathBuf {
        let name = self.path().file_name().unwrap().to_string_lossy();
        self.path()
            .parent()
            .unwrap()
            .join(format!("{name}-{suffix}"))
    }

    /// The project's own HOME (the builder's [`ProjectBuilder::home`]).
    pub fn home(&self) -> &Path {
        self.home
            .as_ref()
            .expect("a project built with .home()")
            .path()
    }

    /// Writes `contents` at `relative` in the project, making its directories first.
    pub fn write(&self, relative: &str, contents: impl AsRef<[u8]>) {
        write_file(&self.path().join(relative), contents);
    }

    /// The text of the file at `relative` in the project.
    pub fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.path().join(relative)).unwrap()
    }

    /// The project's `.vigil/` (what may be seen and shared, SPEC §2).
    pub fn vigil(&self) -> PathBuf {
        self.path().join(".vigil")
    }

    /// The protected state of this project, where the agent cannot write.
    pub fn protected(&self) -> PathBuf {
        protected_dir(self.path())
    }

    pub fn session_record(&self, session: &str) -> serde_json::Value {
        session_record_of(self.path(), session)
    }

    /// The settings file vigil is installed into by default: `.claude/settings.local.json`.
    pub fn settings(&self) -> PathBuf {
        self.path().join(".claude/settings.local.json")
    }

    /// `settings-merge install` into [`Project::settings`] with `flags`, as install.sh runs
    /// it in the project (with the project's HOME when it has one), which must succeed.
    pub fn install(&self, flags: &[&str]) {
        ok(self.merge("install", flags));
    }

    /// `settings-merge ACTION --settings SETTINGS ARGS` on [`Project::settings`], run in the
    /// project with its HOME when it has one (`install` with the build's `--bin-dir` first):
    /// whatever it answers.
    pub fn merge(&self, action: &str, args: &[&str]) -> std::process::Output {
        settings_merge_in(
            self.path(),
            self.home.as_ref().map(|h| h.path()),
            action,
            args,
        )
    }
}

/// `settings-merge ACTION --settings DIR/.claude/settings.local.json ARGS` run in `dir`, with
/// `HOME` at `home` (the test's own when `None`), `install` with the build's `--bin-dir` first:
/// whatever it answers.
pub fn settings_merge_in(
    dir: &Path,
    home: Option<&Path>,
    action: &str,
    args: &[&str],
) -> std::process::Output {
    let mut cmd = settings_merge();
    if let Some(home) = home {
        cmd.env("HOME", home);
    }
    cmd.arg(action)
        .arg("--settings")
        .arg(dir.join(".claude/settings.local.json"));
    if action == "install" {
        cmd.arg("--bin-dir").arg(bin_dir());
    }
    cmd.args(args).current_dir(dir).output().unwrap()
}

/// `settings-merge install` into `dir`'s `.claude/settings.local.json` with `flags`, run in
/// `dir` as install.sh runs it, with `HOME` at `home` (the test's own when `None`).
pub fn install_at(dir: &Path, home: Option<&Path>, flags: &[&str]) {
    ok(settings_merge_in(dir, home, "install", flags));
}
