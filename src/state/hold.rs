//! The human's hold (SPEC §11): the test files and globs that judge the work, as a human held
//! them, kept in the protected state of the repository (every worktree's loops read it) with a
//! copy of every held file's bytes. Only a human makes, refreshes or releases it (`stop-gate
//! hold`); the gate, the guard and the check read it. Paths are from the repository's top,
//! with `/`.

use std::path::{Path, PathBuf};

use globset::{Glob, GlobMatcher};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::state::project::Project;
use crate::sys::atomic;
use crate::sys::files;

pub(crate) const SCHEMA: &str = "vigil.hold/v1";
/// The hold's record, in the hold's directory.
const RECORD: &str = "hold.json";
/// The largest hold record read: far past any real one (an agent cannot write it, but a
/// damaged disk can).
const MAX_RECORD: u64 = 64 << 20;
/// The largest held file: a test file, not a data set.
pub(crate) const MAX_HELD_FILE: u64 = 16 << 20;
/// The most files one hold keeps.
pub(crate) const MAX_HELD_FILES: usize = 100_000;

/// Where a path was held from: a commit (its id), or the working tree as it was.
pub(crate) const WORKING_TREE: &str = "working-tree";

/// A hold as `hold.json` keeps it (`schemas/hold.schema.json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Hold {
    pub schema: String,
    pub made_at: String,
    pub updated_at: String,
    /// What the human named: a path (a file, or a directory and all below it) or a glob.
    pub patterns: Vec<Pattern>,
    /// Every file the patterns held, with the git blob id of its held bytes.
    pub files: Vec<HeldFile>,
    /// What the check needs that git ignores (a virtualenv, `node_modules`): put into the
    /// check's copy as it is in the project, read-only.
    #[serde(default)]
    pub env: Vec<String>,
    /// What the check needs that git ignores, held as a copy made when it was declared
    /// (`hold add --env PATH --copy`), renewed only by `hold refresh --env`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_copies: Vec<EnvCopy>,
    /// Per-test rules: the tests that passed when the hold was made, and those the human
    /// names; `None` until a baseline is recorded or a test is named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests: Option<TestRules>,
}

/// A declared environment held as a copy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct EnvCopy {
    /// Where it is in the project (and goes in the check's copy), from the top.
    pub path: String,
    /// Its copy's directory under the hold's `env/`.
    pub copy: String,
    pub bytes: u64,
    pub made_at: String,
}

/// The largest environment held as a copy by default (`--max-size`).
pub(crate) const DEFAULT_MAX_ENV: u64 = 2 << 30;

/// Where the copies of held environments are.
pub(crate) fn env_dir(project: &Project) -> PathBuf {
    dir(project).join("env")
}

/// What the tests must do under the hold (SPEC §11), by their identities.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TestRules {
    /// The check the baseline was recorded with (`stop-gate hold baseline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_at: Option<String>,
    /// Passed at the baseline: each must still pass, by name.
    #[serde(default)]
    pub passed: Vec<String>,
    /// Failed at the baseline (what the work is to fix).
    #[serde(default)]
    pub failed: Vec<String>,
    /// Skipped at the baseline.
    #[serde(default)]
    pub skipped: Vec<String>,
    /// Named by the human: each must pass.
    #[serde(default)]
    pub must_pass: Vec<String>,
    /// Named flaky by the human: their outcome is not held to the baseline.
    #[serde(default)]
    pub flaky: Vec<String>,
}

impl TestRules {
    /// Whether any rule needs tests by name.
    pub(crate) fn any(&self) -> bool {
        !self.passed.is_empty() || !self.must_pass.is_empty()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Pattern {
    pub pattern: String,
    /// A commit id, or `working-tree`.
    pub at: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct HeldFile {
    pub path: String,
    /// The git blob id (hex) of the held bytes; the bytes are in the hold's `blobs/`.
    pub blob: String,
    /// `100644`, `100755` or `120000` (a link, whose bytes are its target).
    pub mode: String,
}

impl Hold {
    pub(crate) fn new() -> Hold {
        let now = crate::sys::time::now_rfc3339();
        Hold {
            schema: SCHEMA.to_string(),
            made_at: now.clone(),
            updated_at: now,
            patterns: Vec::new(),
            files: Vec::new(),
            env: Vec::new(),
            env_copies: Vec::new(),
            tests: None,
        }
    }

    /// The held file at `path`, when it is one.
    pub(crate) fn file(&self, path: &str) -> Option<&HeldFile> {
        self.files
            .binary_search_by(|f| f.path.as_str().cmp(path))
            .ok()
            .map(|i| &self.files[i])
    }

    /// The patterns, ready to match.
    pub(crate) fn matcher(&self) -> Matcher {
        Matcher::new(self.patterns.iter().map(|p| p.pattern.as_str()))
    }

    /// Each pattern's literal prefix (the directory, or file, all it matches is in), none
    /// inside another; `""` is the top.
    pub(crate) fn prefixes(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .patterns
            .iter()
            .map(|p| literal_prefix(&p.pattern).to_string())
            .collect();
        all.sort();
        all.dedup();
        all.iter()
            .filter(|p| !all.iter().any(|other| other != *p && within(p, other)))
            .cloned()
            .collect()
    }

    /// Why the file at `path` (from the top) is left out of the check's copy, when the hold
    /// does not hold it: under a held pattern, or runner configuration in a held path (any
    /// name `is_runner_config` knows) or on the way to one (`RUNNER_CODE`). `None`: it is
    /// held, or is the project's own to change.
    pub(crate) fn unheld(&self, matcher: &Matcher, path: &str) -> Option<Unheld> {
        if self.file(path).is_some() {
            return None;
        }
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        let prefixes = self.prefixes();
        let inside = prefixes
            .iter()
            .any(|prefix| !prefix.is_empty() && within(path, prefix));
        if (inside || matcher.matches(path)) && is_runner_config(name) {
            return Some(Unheld::RunnerConfig);
        }
        let on_the_way = prefixes
            .iter()
            .any(|prefix| prefix.is_empty() || within(prefix, dir) || within(dir, prefix));
        if on_the_way && RUNNER_CODE.contains(&name) {
            return Some(Unheld::RunnerConfig);
        }
        matcher.matches(path).then_some(Unheld::NewTest)
    }

    /// Keeps the files sorted by path, one entry each (the last one given wins).
    pub(crate) fn settle(&mut self) {
        self.files.reverse();
        self.files.sort_by(|a, b| a.path.cmp(&b.path));
        self.files.dedup_by(|later, kept| later.path == kept.path);
        self.patterns.dedup_by(|a, b| a.pattern == b.pattern);
        self.env.sort();
        self.env.dedup();
        self.env_copies.sort_by(|a, b| a.path.cmp(&b.path));
        self.updated_at = crate::sys::time::now_rfc3339();
    }
}

impl Default for Hold {
    fn default() -> Hold {
        Hold::new()
    }
}

/// A path or test name as a person reads it: one line, no escape sequences, no reordering
/// characters, defanged, at most 300 characters (the agent chooses file and test names).
pub(crate) fn shown(name: &str) -> String {
    crate::verdict::defang::field_max(name, 300)
}

/// Whether a pattern is a glob rather than a path.
pub(crate) fn is_glob(pattern: &str) -> bool {
    pattern.contains(['*', '?', '[', '{'])
}

/// The part of a pattern before its first glob component: the directory (or file) every path
/// it matches is in, "" for the top.
pub(crate) fn literal_prefix(pattern: &str) -> &str {
    if !is_glob(pattern) {
        return pattern;
    }
    let mut end = 0;
    for (at, part) in pattern_parts(pattern) {
        if is_glob(part) {
            break;
        }
        end = at + part.len();
    }
    &pattern[..end]
}

/// Whether `path` is `dir` or below it (`""` is the top, which holds everything).
pub(crate) fn within(path: &str, dir: &str) -> bool {
    dir.is_empty()
        || path == dir
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

fn pattern_parts(pattern: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut at = 0;
    pattern.split('/').map(move |part| {
        let start = at;
        at += part.len() + 1;
        (start, part)
    })
}

/// The patterns of a hold, compiled once.
pub(crate) struct Matcher {
    literal: Vec<String>,
    globs: Vec<GlobMatcher>,
}

impl Matcher {
    pub(crate) fn new<'a>(patterns: impl Iterator<Item = &'a str>) -> Matcher {
        let mut literal = Vec::new();
        let mut globs = Vec::new();
        for pattern in patterns {
            if is_glob(pattern) {
                // Checked when the pattern was held; one that no longer compiles holds nothing.
                if let Ok(glob) = compile(pattern) {
                    globs.push(glob);
                }
            } else {
                literal.push(pattern.to_string());
            }
        }
        Matcher { literal, globs }
    }

    /// Whether a path from the top is under one of the patterns: the path itself, a file below
    /// a held directory, or a path a glob matches.
    pub(crate) fn matches(&self, path: &str) -> bool {
        self.literal.iter().any(|held| {
            held.is_empty()
                || path == held
                || path
                    .strip_prefix(held.as_str())
                    .is_some_and(|rest| rest.starts_with('/'))
        }) || self.globs.iter().any(|glob| glob.is_match(path))
    }
}

/// A glob as a hold reads it: `*` stays within one directory, `**` crosses them.
pub(crate) fn compile(pattern: &str) -> Result<GlobMatcher> {
    globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map(|glob: Glob| glob.compile_matcher())
        .map_err(|e| Error::usage(format!("`{pattern}` is not a glob vigil can read: {e}")))
}

/// File names that configure a test runner: new ones under a held pattern are refused by the
/// file-tool guard (and absent from the check's copy), since each can turn a failure into a
/// pass without touching a held test.
pub(crate) const RUNNER_CONFIG: &[&str] = &[
    "conftest.py",
    "pytest.ini",
    "tox.ini",
    "setup.cfg",
    "pyproject.toml",
    "sitecustomize.py",
    "usercustomize.py",
    "pytest.py",
    "unittest.py",
    "Makefile",
    "makefile",
    "GNUmakefile",
    "package.json",
    ".mocharc.js",
    ".mocharc.json",
    ".mocharc.yml",
    "Cargo.toml",
    "build.rs",
    ".cargo",
    "go.mod",
];

/// File names a test runner imports as code from any directory on the way to the tests (pytest's
/// `conftest.py` from the top down, a module that shadows the runner, Python's start-up
/// hooks): under a hold they are held or left out of the check's copy, wherever they stand
/// between the repository's top and a held path.
pub(crate) const RUNNER_CODE: &[&str] = &[
    "conftest.py",
    "pytest.py",
    "unittest.py",
    "sitecustomize.py",
    "usercustomize.py",
];

/// Why a file the hold does not hold is left out of the check's copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unheld {
    /// It is under a held pattern: a new test, which the hold does not judge.
    NewTest,
    /// It configures or runs inside the test runner, in a held path or on the way to one.
    RunnerConfig,
}

/// Whether a file name configures a test runner (its own name, or `jest.config.*`,
/// `vitest.config.*` and the like).
pub(crate) fn is_runner_config(name: &str) -> bool {
    RUNNER_CONFIG.contains(&name)
        || [
            "jest.config.",
            "vitest.config.",
            "babel.config.",
            ".babelrc",
        ]
        .iter()
        .any(|prefix| name.starts_with(prefix))
}

/// The hold's directory: in the protected state of the repository's main checkout, which
/// every worktree of the repository reads.
pub(crate) fn dir(project: &Project) -> PathBuf {
    project.repository_state().join("hold")
}

/// The hold, when a human made one. A record that is there but cannot be read or parsed is
/// an error: a gate denies on it (SPEC P1), never takes it for no hold.
pub(crate) fn load(project: &Project) -> Result<Option<Hold>> {
    load_from(&dir(project))
}

pub(crate) fn load_from(dir: &Path) -> Result<Option<Hold>> {
    let path = dir.join(RECORD);
    let file = match files::open_state(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("read the hold", &path, &e)),
    };
    let bytes = files::read_capped(file, MAX_RECORD, "the hold", &path)?;
    let hold: Hold = serde_json::from_slice(&bytes).map_err(|e| {
        Error::input(format!(
            "the hold {} is damaged ({e}); make it again with `stop-gate hold add`",
            path.display()
        ))
    })?;
    if hold.schema != SCHEMA {
        return Err(Error::input(format!(
            "the hold {} is of schema {:?}, not {SCHEMA}; make it again with `stop-gate hold add`",
            path.display(),
            hold.schema
        )));
    }
    // Every path it names stays inside the repository, and every copy in the hold's own
    // directory: a record in the fallback state is the agent's to write.
    let damaged = |what: &str| {
        Error::input(format!(
            "the hold {} names {what}; make it again with `stop-gate hold add`",
            path.display()
        ))
    };
    for name in hold
        .files
        .iter()
        .map(|f| f.path.as_str())
        .chain(hold.env.iter().map(String::as_str))
        .chain(hold.env_copies.iter().map(|e| e.path.as_str()))
        .chain(hold.patterns.iter().map(|p| p.pattern.as_str()))
    {
        check_path(name)
            .map_err(|_| damaged(&format!("a path outside the repository ({name:?})")))?;
    }
    for file in &hold.files {
        blob_name(&file.blob).map_err(|_| damaged("a held copy that is no blob id"))?;
        if !matches!(file.mode.as_str(), "100644" | "100755" | "120000") {
            return Err(damaged("a file of no mode git knows"));
        }
    }
    if hold
        .env_copies
        .iter()
        .any(|e| e.copy.len() != 16 || !e.copy.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return Err(damaged("an environment copy outside the hold"));
    }
    if !hold.files.windows(2).all(|w| w[0].path < w[1].path) {
        return Err(damaged("its files out of order"));
    }
    Ok(Some(hold))
}

/// A repository above this project whose hold covers it: the agent can make a directory below
/// the top a repository of its own (`git init`, a `.git/HEAD`), which moves where the search
/// for the top ends and so where a hold is looked for. A repository the outer one registered
/// (a worktree, a submodule) is a project of its own; any other is covered by the outer hold.
pub(crate) fn above(project: &Project) -> Option<PathBuf> {
    let home = crate::state::protected::home()?;
    project.dir.ancestors().skip(1).find_map(|outer| {
        let dir = crate::state::protected::dir_in(&home, outer);
        let held = std::fs::symlink_metadata(dir.join("hold").join(RECORD)).is_ok();
        (held && !crate::state::protected::registered(&project.dir, outer))
            .then(|| outer.to_path_buf())
    })
}

/// Saves the hold (atomically, on the disk before it returns).
pub(crate) fn save(project: &Project, hold: &Hold) -> Result<()> {
    let dir = dir(project);
    files::make_private_dir(&dir).map_err(|e| Error::io("create", &dir, &e))?;
    let mut bytes = serde_json::to_vec_pretty(hold).expect("a hold serializes");
    bytes.push(b'\n');
    let path = dir.join(RECORD);
    atomic::write_atomic(&path, &bytes, 0o600).map_err(|e| Error::io("write", &path, &e))
}

/// Removes the hold and its copies.
pub(crate) fn release(project: &Project) -> Result<bool> {
    let dir = dir(project);
    let path = dir.join(RECORD);
    match fs_err::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::fs(e)),
    }
    let _ = std::fs::remove_dir_all(dir.join(BLOBS));
    Ok(true)
}

const BLOBS: &str = "blobs";

/// Keeps the bytes of a held file under its blob id.
pub(crate) fn store_blob(project: &Project, blob: &str, bytes: &[u8]) -> Result<()> {
    let dir = dir(project).join(BLOBS);
    files::make_private_dir(&dir).map_err(|e| Error::io("create", &dir, &e))?;
    let path = dir.join(blob_name(blob)?);
    if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && m.len() == bytes.len() as u64)
    {
        return Ok(());
    }
    atomic::write_atomic(&path, bytes, 0o600).map_err(|e| Error::io("write", &path, &e))
}

/// The held bytes of `blob`.
pub(crate) fn blob(project: &Project, blob: &str) -> Result<Vec<u8>> {
    blob_in(&dir(project), blob)
}

pub(crate) fn blob_in(dir: &Path, blob: &str) -> Result<Vec<u8>> {
    let path = dir.join(BLOBS).join(blob_name(blob)?);
    let file = files::open_state(&path).map_err(|e| Error::io("read the held copy", &path, &e))?;
    files::read_capped(file, MAX_HELD_FILE, "a held file", &path)
}

/// A blob id as a file name: hex only, so no record can name a path elsewhere.
fn blob_name(blob: &str) -> Result<&str> {
    if (40..=64).contains(&blob.len()) && blob.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(blob)
    } else {
        Err(Error::input(format!(
            "the hold names a held copy {blob:?} that is no blob id; make the hold again"
        )))
    }
}

/// A path from the top as a hold keeps it: relative, `/`-separated, no `.` or `..`, no `.git`.
pub(crate) fn check_path(path: &str) -> Result<()> {
    let bad = path.is_empty()
        || path.starts_with('/')
        || path.contains('\0')
        || path
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == ".." || part == ".git");
    if bad {
        return Err(Error::usage(format!(
            "`{path}` is not a path inside the repository vigil can hold"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_directory_holds_what_is_below_it_and_nothing_beside_it() {
        let m = Matcher::new(["tests"].into_iter());
        assert!(m.matches("tests"));
        assert!(m.matches("tests/test_a.py"));
        assert!(m.matches("tests/deep/conftest.py"));
        assert!(!m.matches("tests2/test_a.py"));
        assert!(!m.matches("src/tests.py"));
    }

    #[test]
    fn a_held_glob_keeps_a_star_within_one_directory() {
        let m = Matcher::new(["tests/*.py", "**/*_test.go"].into_iter());
        assert!(m.matches("tests/test_a.py"));
        assert!(!m.matches("tests/sub/test_a.py"));
        assert!(m.matches("pkg/x_test.go"));
        assert!(m.matches("x_test.go"));
        assert!(!m.matches("x_test.gox"));
    }

    #[test]
    fn a_globs_literal_prefix_is_the_directory_it_matches_in() {
        assert_eq!(literal_prefix("tests/unit/*.py"), "tests/unit");
        assert_eq!(literal_prefix("**/*_test.go"), "");
        assert_eq!(literal_prefix("tests/test_a.py"), "tests/test_a.py");
        assert_eq!(literal_prefix("t*/a.py"), "");
    }

    #[test]
    fn a_held_path_never_leaves_the_repository() {
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../b",
            "a//b",
            ".git/config",
            "a/.git",
        ] {
            assert!(check_path(bad).is_err(), "{bad}");
        }
        check_path("tests/test_a.py").unwrap();
        assert!(blob_name("../../x").is_err());
        assert!(blob_name(&"a".repeat(40)).is_ok());
    }

    #[test]
    fn runner_configuration_in_a_held_path_or_on_the_way_to_one_is_left_out() {
        let mut hold = Hold::new();
        hold.patterns.push(Pattern {
            pattern: "pkg/tests/test_*.py".into(),
            at: WORKING_TREE.into(),
        });
        hold.files.push(HeldFile {
            path: "pkg/tests/test_a.py".into(),
            blob: "a".repeat(40),
            mode: "100644".into(),
        });
        let m = hold.matcher();
        assert_eq!(hold.unheld(&m, "pkg/tests/test_a.py"), None);
        assert_eq!(
            hold.unheld(&m, "pkg/tests/test_b.py"),
            Some(Unheld::NewTest)
        );
        for config in [
            "pkg/tests/conftest.py",
            "pkg/tests/sub/pytest.ini",
            "conftest.py",
            "pkg/conftest.py",
            "pytest.py",
        ] {
            assert_eq!(
                hold.unheld(&m, config),
                Some(Unheld::RunnerConfig),
                "{config}"
            );
        }
        // Beside the way to the tests, and the project's own manifests, are the project's.
        for own in [
            "other/conftest.py",
            "pyproject.toml",
            "pkg/calc.py",
            "pkg/tests/helpers.py",
        ] {
            assert_eq!(hold.unheld(&m, own), None, "{own}");
        }
    }

    #[test]
    fn runner_configuration_is_known_by_its_name() {
        for name in [
            "conftest.py",
            "pytest.ini",
            "jest.config.js",
            "Makefile",
            "sitecustomize.py",
        ] {
            assert!(is_runner_config(name), "{name}");
        }
        assert!(!is_runner_config("test_a.py"));
    }
}
