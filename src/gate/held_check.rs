//! The check under the human's hold (SPEC §11): run confined in a prepared copy of what the
//! verdict names with the held tests as held, its build caches in the project's check cache,
//! its JUnit report (`{junit}`) written to a fresh path outside the project, and its tests read
//! one by one: every test that passed when the hold was made must pass, the tests the human
//! names must pass, a held test that vanishes or turns skipped fails by name, and a run of zero
//! tests is no pass.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::evidence::held;
use crate::evidence::results::{self, Outcome, Results};
use crate::evidence::subject::Limits;
use crate::gate::command::{self, Checked};
use crate::reach::confine::Plan;
use crate::state::hold::{Hold, TestRules};
use crate::state::project::Project;
use crate::sys::{files, process};

/// The placeholder a check command writes where its JUnit report goes.
pub(crate) const JUNIT: &str = "{junit}";
/// The largest JUnit report read.
const MAX_REPORT: u64 = 256 << 20;
/// The most tests named in one line.
const NAMED: usize = 10;

/// A fresh, empty directory for a run's JUnit report, outside the project (in the protected
/// state), removed when dropped.
pub(crate) struct Report {
    dir: tempfile::TempDir,
}

impl Report {
    /// A report directory for `command` when it names `{junit}`; the command with the
    /// placeholder replaced by the report's path (quoted for `sh`).
    pub(crate) fn for_command(
        project: &Project,
        command: &str,
    ) -> std::io::Result<(String, Option<Report>)> {
        if !command.contains(JUNIT) {
            return Ok((command.to_string(), None));
        }
        let parent = project.protected().dir.join("reports");
        files::make_private_dir(&parent)?;
        let dir = tempfile::Builder::new()
            .prefix("run-")
            .tempdir_in(&parent)?;
        let report = Report { dir };
        let path = report.path().to_string_lossy().into_owned();
        Ok((
            command.replace(JUNIT, &process::shell_word(&path)),
            Some(report),
        ))
    }

    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `text` with the report's path written back as `{junit}`: the model and the person read
    /// the command as it was given, not a path that changes with every run.
    pub(crate) fn unsubstitute(&self, text: &str) -> String {
        text.replace(&self.path().to_string_lossy().into_owned(), JUNIT)
    }

    /// A check's result with the report's path written back as `{junit}`.
    pub(crate) fn shown(&self, mut checked: Checked) -> Checked {
        if let Err(failure) = checked.result.as_mut() {
            failure.line = self.unsubstitute(&failure.line);
            failure.tail = self.unsubstitute(&failure.tail);
        }
        checked
    }

    pub(crate) fn path(&self) -> PathBuf {
        self.dir.path().join("junit.xml")
    }

    /// The report, read once the check's processes are gone: a regular file, never through a
    /// link; `Err` when there is none or it cannot be read.
    pub(crate) fn read(&self) -> Result<Results, String> {
        let path = self.path();
        match files::read_regular(&path, MAX_REPORT, false) {
            Ok(Some(bytes)) => results::from_junit(&bytes).map_err(|e| e.to_string()),
            Ok(None) => Err(format!(
                "the check wrote no JUnit report where {JUNIT} said"
            )),
            Err(e) => Err(format!("the JUnit report cannot be read: {e}")),
        }
    }
}

/// Runs the check `command` confined as `plan` says, `{junit}` in it replaced by a fresh report
/// path that the check may write (and that its failure line shows as `{junit}` again): what it
/// did, and the report to read.
pub(crate) fn run_reported(
    project: &Project,
    command: &str,
    mut plan: Plan,
    required: impl FnOnce() -> bool,
    timeout: Duration,
    capture: usize,
) -> Result<(Checked, Option<Report>), String> {
    let (command, report) = Report::for_command(project, command)
        .map_err(|e| format!("stop-gate: cannot make a place for the check's JUnit report: {e}"))?;
    if let Some(report) = &report {
        plan.writable.push(report.dir().to_path_buf());
    }
    let mut checked = command::run_check(&command, &plan, required, timeout, capture);
    if let Some(report) = &report {
        checked = report.shown(checked);
    }
    Ok((checked, report))
}

/// One run of the check under the hold.
pub(crate) struct Ran {
    pub checked: Checked,
    /// The tests by name (the report's, else the output's), and the runners' counts.
    pub results: Result<Results, String>,
    /// What the runner's own lines said (to set against the report).
    pub printed: Results,
    /// Files under a held path the copy left out.
    pub left_out: Vec<String>,
    /// The tree the copy was made of (`git-tree:…`), as the verdict names it.
    pub subject: String,
}

/// Runs `command` once under `hold`, confined as `base` says but in the prepared copy.
pub(crate) fn run_once(
    project: &Project,
    hold: &Hold,
    command: &str,
    base: &Plan,
    required: &dyn Fn() -> bool,
    timeout: Duration,
    limits: Limits,
) -> Result<Ran, String> {
    let prepared = held::prepare(project, hold, limits).map_err(|e| {
        format!("stop-gate: the check's copy under the human's hold could not be made: {e}")
    })?;
    // A copy in the temporary directory (the protected state could not take it) is one the
    // sandboxed agent can write while the check runs.
    if !prepared.snapshot.protected && !project.protected().agent_writable() {
        return Err(format!(
            "stop-gate: the check's copy under the human's hold could not be made in the protected state ({}), and a copy elsewhere is within the agent's reach; the stop is blocked",
            project.protected().dir.join("snapshots").display()
        ));
    }
    let mut plan = base.clone();
    plan.work = prepared.snapshot.path().to_path_buf();
    // The live tree is not the check's to see: hidden, so nothing the agent puts there (a
    // socket a process it left running listens on) reaches the check, which could hand that
    // process a handle on the copy that outlives the check. Not where the copy itself or the
    // user's home lies inside it (the fallback state, a project at the home).
    let top = held::top(project).map_err(|e| format!("stop-gate: {e}"))?;
    let work = crate::sys::paths::canonical(&plan.work);
    let home = crate::sys::user::home().map(|home| crate::sys::paths::canonical(&home));
    if !work.starts_with(&top) && !home.is_some_and(|home| home.starts_with(&top)) {
        plan.hide.push(top);
    }
    plan.cwd = prepared.snapshot.cwd.clone();
    plan.read_only = prepared.read_only.clone();
    plan.bound = prepared.bound.clone();
    plan.ledger = None;
    // The copy is thrown away after the run: nothing it makes reaches the project.
    plan.in_place = false;
    if let Ok(cache) = check_cache(project) {
        plan.env = cache_variables(&cache);
        plan.writable.push(cache);
    }
    if let Some(path) = check_path(project, hold, &prepared)? {
        plan.env.push(("PATH".to_string(), path));
    }
    let (checked, report) = run_reported(
        project,
        command,
        plan,
        required,
        timeout,
        command::OUTPUT_WHOLE,
    )?;
    let printed = results::from_output(&checked.output);
    let results = match &report {
        Some(report) => report.read(),
        None => Ok(printed.clone()),
    };
    Ok(Ran {
        checked,
        results,
        printed,
        left_out: prepared.left_out,
        subject: prepared.snapshot.subject.clone(),
    })
}

/// The check's PATH under the hold: an entry inside the project is the agent's to fill (a
/// `.venv/bin/git` it planted), so it must be in the environment the human declared, and then
/// it names that environment in the copy; any other is refused. `None`: PATH as it is.
fn check_path(
    project: &Project,
    hold: &Hold,
    prepared: &held::Prepared,
) -> Result<Option<PathBuf>, String> {
    let Some(path) = std::env::var_os("PATH") else {
        return Ok(None);
    };
    let top = held::top(project).map_err(|e| format!("stop-gate: {e}"))?;
    let copy = crate::sys::paths::canonical(prepared.snapshot.path());
    let mut changed = false;
    let mut entries = Vec::new();
    for entry in std::env::split_paths(&path) {
        // An empty or relative entry names the directory the check runs in: the project.
        if !entry.is_absolute() {
            return Err(format!(
                "stop-gate: the check's PATH holds {:?}, a relative entry, which finds programs in the project the agent can write; take it off PATH",
                entry.display().to_string()
            ));
        }
        let real = crate::sys::paths::canonical(&entry);
        let Ok(inside) = real.strip_prefix(&top) else {
            entries.push(entry);
            continue;
        };
        let declared = hold
            .env
            .iter()
            .any(|env| inside.starts_with(Path::new(env)));
        if !declared {
            return Err(format!(
                "stop-gate: the check's PATH holds {}, inside the project, where the agent can put programs of its own; declare it with `stop-gate hold add --env {}` (a human's step), or take it off PATH",
                entry.display(),
                inside.components().next().map_or_else(
                    || ".".into(),
                    |c| c.as_os_str().to_string_lossy().into_owned()
                )
            ));
        }
        entries.push(copy.join(inside));
        changed = true;
    }
    if !changed {
        return Ok(None);
    }
    std::env::join_paths(entries)
        .map(|joined| Some(PathBuf::from(joined)))
        .map_err(|e| format!("stop-gate: the check's PATH cannot be made: {e}"))
}

/// The project's check cache (SPEC §11): build and cache directories that only confined checks
/// under a hold write, in the protected state, so a Stop is not a cold build.
pub(crate) fn check_cache(project: &Project) -> std::io::Result<PathBuf> {
    let dir = project.protected().dir.join("check-cache");
    files::make_private_dir(&dir)?;
    Ok(dir)
}

/// The variables that send build and cache directories into the check cache.
pub(crate) fn cache_variables(cache: &Path) -> Vec<(String, PathBuf)> {
    [
        ("CARGO_TARGET_DIR", "cargo-target"),
        ("PYTHONPYCACHEPREFIX", "pycache"),
        ("GOCACHE", "go-build"),
        ("npm_config_cache", "npm"),
        ("XDG_CACHE_HOME", "xdg"),
    ]
    .into_iter()
    .map(|(name, sub)| (name.to_string(), cache.join(sub)))
    .collect()
}

/// A failed check under the hold: the one useful line and the detail.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub line: String,
    pub detail: String,
}

/// What the check under the hold decided, and what the person is told besides.
pub(crate) struct Decided {
    pub result: Result<(), Refusal>,
    pub notices: Vec<String>,
    /// Tests whose outcome moved from the baseline: `id (failed -> passed)`.
    pub moved: Vec<String>,
    /// The tree the check ran on, when it ran.
    pub subject: Option<String>,
}

/// The check under `hold`: run, judged by its exit and by the tests one by one; a test that
/// passed at the baseline and fails now is run again once before it blocks.
pub(crate) fn check(
    project: &Project,
    hold: &Hold,
    command: &str,
    base: &Plan,
    required: &dyn Fn() -> bool,
    timeout: &dyn Fn() -> Duration,
    limits: Limits,
) -> Decided {
    let mut notices = Vec::new();
    let mut again = true;
    loop {
        let ran = match run_once(project, hold, command, base, required, timeout(), limits) {
            Ok(ran) => ran,
            Err(line) => {
                return Decided {
                    result: Err(Refusal {
                        line,
                        detail: String::new(),
                    }),
                    notices,
                    moved: Vec::new(),
                    subject: None,
                };
            }
        };
        if let Some(note) = &ran.checked.unconfined {
            notices.push(note.clone());
        }
        let judged = judge(hold.tests.as_ref(), command, &ran);
        let retry = again && judged.is_err() && baseline_failed(hold.tests.as_ref(), &ran);
        if retry {
            again = false;
            continue;
        }
        let result = judged.map_err(|mut refusal| {
            if !ran.left_out.is_empty() {
                refusal.line.push_str(&format!(
                    " (new files under the human's hold are not in the check's copy: {})",
                    named(&ran.left_out)
                ));
            }
            refusal
        });
        if !again && result.is_ok() {
            notices.push(
                "vigil: a test that passed when the tests were held failed once and passed when run again; if it is flaky, `stop-gate hold flaky ID` says so".to_string(),
            );
        }
        return Decided {
            result,
            notices,
            moved: moved(hold.tests.as_ref(), &ran),
            subject: Some(ran.subject),
        };
    }
}

/// The tests whose outcome is not what the baseline recorded: `id (failed -> passed)`.
fn moved(rules: Option<&TestRules>, ran: &Ran) -> Vec<String> {
    let (Some(rules), Ok(results)) = (rules, &ran.results) else {
        return Vec::new();
    };
    let now = |id: &str| results.outcome(id).map_or("gone", Outcome::word);
    let mut moved = Vec::new();
    for (then, ids) in [
        ("passed", &rules.passed),
        ("failed", &rules.failed),
        ("skipped", &rules.skipped),
    ] {
        for id in ids {
            if now(id) != then {
                moved.push(format!(
                    "{} ({then} -> {})",
                    crate::state::hold::shown(id),
                    now(id)
                ));
            }
        }
    }
    moved
}

/// Whether a test that passed at the baseline failed in this run (worth one more run).
fn baseline_failed(rules: Option<&TestRules>, ran: &Ran) -> bool {
    let (Some(rules), Ok(results)) = (rules, &ran.results) else {
        return false;
    };
    rules
        .passed
        .iter()
        .any(|id| results.outcome(id) == Some(Outcome::Failed))
}

/// The run against the rules: its exit, its report, zero tests, and each held test by name.
pub(crate) fn judge(rules: Option<&TestRules>, command: &str, ran: &Ran) -> Result<(), Refusal> {
    let shown = command.trim().replace('\n', "\\n");
    let by_name = rules.is_some_and(TestRules::any);
    let results = match &ran.results {
        Ok(results) => results,
        Err(why) => {
            return Err(Refusal {
                line: format!("stop-gate: `{shown}`: {why}; the tests cannot be read one by one"),
                detail: command::last_lines(&ran.checked.output, command::TAIL_LINES),
            });
        }
    };
    // The report is the runner's, not the code's under test: where both count failures they
    // agree, or something else wrote the report.
    if ran.printed.failed.is_some()
        && results.failed.is_some()
        && ran.printed.failed != results.failed
    {
        return Err(Refusal {
            line: format!(
                "stop-gate: `{shown}`: the JUnit report says {} failed where the runner printed {}; the report was changed after the runner wrote it, so the run is no pass",
                results.failed.unwrap_or(0),
                ran.printed.failed.unwrap_or(0)
            ),
            detail: command::last_lines(&ran.checked.output, command::TAIL_LINES),
        });
    }
    let problems = held_problems(rules, results);
    if let Err(failure) = &ran.checked.result {
        let mut line = failure.line.clone();
        if !problems.is_empty() {
            line.push_str(&format!(
                "; held tests that do not pass: {}",
                named(&problems)
            ));
        }
        if lacks_a_dependency(&ran.checked.output) {
            line.push_str(
                "; the check's environment is what the human declared when the tests were held (what git ignores is not in its copy), so a new dependency needs the human: end with `needs-decision: ` naming it",
            );
        }
        return Err(Refusal {
            line,
            detail: failure.tail.clone(),
        });
    }
    // The runner reported failures, whatever the exit (a hook that sets the exit status).
    let reported = results
        .failed
        .unwrap_or(0)
        .max(ran.printed.failed.unwrap_or(0));
    if reported > 0 {
        let failing: Vec<String> = results
            .tests
            .iter()
            .filter(|(_, o)| **o == Outcome::Failed)
            .map(|(id, _)| id.clone())
            .collect();
        return Err(Refusal {
            line: format!(
                "stop-gate: `{shown}` exited 0, but its runner reports {reported} failed{}; a check passes only when its tests do",
                if failing.is_empty() {
                    String::new()
                } else {
                    format!(": {}", named(&failing))
                }
            ),
            detail: command::last_lines(&ran.checked.output, command::TAIL_LINES),
        });
    }
    if by_name && results.tests.is_empty() {
        return Err(Refusal {
            line: format!(
                "stop-gate: `{shown}` reported no test by name, and the human's hold judges tests by name; add a JUnit report ({JUNIT}: pytest --junitxml={JUNIT}, node --test --test-reporter=junit --test-reporter-destination={JUNIT}), or unittest -v, pytest -rA, go test -json, cargo test as it prints"
            ),
            detail: command::last_lines(&ran.checked.output, command::TAIL_LINES),
        });
    }
    if !problems.is_empty() {
        return Err(Refusal {
            line: format!(
                "stop-gate: held tests do not pass: {}; they are the human's, so fix the code, not the tests (if one is wrong, end with `needs-decision:` and say why)",
                named(&problems)
            ),
            detail: command::last_lines(&ran.checked.output, command::TAIL_LINES),
        });
    }
    if results.ran == Some(0) || ran.printed.ran == Some(0) && results.tests.is_empty() {
        return Err(Refusal {
            line: format!(
                "stop-gate: `{shown}` ran no test (its summary says 0 ran); a check that tests nothing passes nothing"
            ),
            detail: command::last_lines(&ran.checked.output, command::TAIL_LINES),
        });
    }
    Ok(())
}

/// What is wrong with each held test the rules name, in the rules' order: the tests that
/// passed at the baseline (the flaky left out), the tests the human names, then the tests that
/// failed at the baseline.
fn held_problems(rules: Option<&TestRules>, results: &Results) -> Vec<String> {
    let mut problems: Vec<String> = Vec::new();
    let Some(rules) = rules else {
        return problems;
    };
    for id in &rules.passed {
        if rules.flaky.contains(id) {
            continue;
        }
        if let Some(problem) = problem(id, results.outcome(id), true) {
            problems.push(problem);
        }
    }
    for id in &rules.must_pass {
        if let Some(problem) = problem(id, results.outcome(id), false) {
            problems.push(problem);
        }
    }
    // A test that failed at the baseline is what the work fixes: it may fail still (the exit
    // says so), but it may not be skipped or made to vanish.
    for id in &rules.failed {
        if rules.flaky.contains(id) {
            continue;
        }
        match results.outcome(id) {
            Some(Outcome::Passed | Outcome::Failed) => {}
            Some(Outcome::Skipped) => problems.push(format!("{id} (turned skipped)")),
            None => problems.push(format!("{id} (gone: deleted, renamed or not run)")),
        }
    }
    problems
}

/// Whether a check's output says a module or package could not be found: under a hold the
/// environment is the one the human declared, so the agent cannot add one itself.
fn lacks_a_dependency(output: &str) -> bool {
    const SIGNS: &[&str] = &[
        "ModuleNotFoundError: No module named",
        "ImportError: No module named",
        "Error: Cannot find module",
        "ERR_MODULE_NOT_FOUND",
        "error[E0432]: unresolved import",
        "error: no matching package named",
        "cannot find package",
        "no required module provides package",
    ];
    let mut start = output.len().saturating_sub(64 << 10);
    while !output.is_char_boundary(start) {
        start += 1;
    }
    SIGNS.iter().any(|sign| output[start..].contains(sign))
}

/// What is wrong with a held test's outcome: `None` when it passed.
fn problem(id: &str, outcome: Option<Outcome>, baseline: bool) -> Option<String> {
    let what = match outcome {
        Some(Outcome::Passed) => return None,
        Some(Outcome::Failed) => "failed",
        Some(Outcome::Skipped) => "turned skipped",
        None if baseline => "gone: deleted, renamed or not run",
        None => "did not run",
    };
    Some(format!("{id} ({what})"))
}

/// Items as one phrase, the first ten named.
pub(crate) fn named(items: &[String]) -> String {
    let mut text = items
        .iter()
        .take(NAMED)
        .map(|item| crate::state::hold::shown(item))
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > NAMED {
        text.push_str(&format!(" and {} more", items.len() - NAMED));
    }
    text
}

/// A baseline recorded: what to tell, and the note for a check that ran unconfined.
pub(crate) struct Recorded {
    pub told: String,
    pub unconfined: Option<String>,
}

/// Runs `command` under the hold as the Stop hook would (confined, in the copy) and records
/// each test's outcome as the baseline: every test that passed must still pass. A check that
/// names no test records nothing.
pub(crate) fn record_baseline(
    project: &Project,
    command: &str,
    network: bool,
    timeout: Duration,
) -> crate::Result<Recorded> {
    use crate::Error;

    let mut record = crate::state::hold::load(project)?.ok_or_else(|| {
        Error::usage("nothing is held: hold the tests first (stop-gate hold add tests/)")
    })?;
    let plan = command::plan(project, Vec::new(), network);
    let required = || crate::reach::sandbox::confinement_required(&project.dir);
    let ran = run_once(
        project,
        &record,
        command,
        &plan,
        &required,
        timeout,
        Limits::default(),
    )
    .map_err(Error::Io)?;
    let results = ran
        .results
        .map_err(|why| Error::input(format!("`{command}`: {why}; no baseline was recorded")))?;
    if results.tests.is_empty() {
        return Err(Error::input(format!(
            "`{command}` reported no test by name, so no baseline was recorded; add a JUnit report ({JUNIT}: pytest --junitxml={JUNIT}), or run unittest -v, pytest -rA, go test -json, or cargo test as it prints"
        )));
    }
    let mut rules = record.tests.take().unwrap_or_default();
    let pick = |outcome: Outcome| -> Vec<String> {
        results
            .tests
            .iter()
            .filter(|(_, o)| **o == outcome)
            .map(|(id, _)| id.clone())
            .collect()
    };
    rules.passed = pick(Outcome::Passed);
    rules.failed = pick(Outcome::Failed);
    rules.skipped = pick(Outcome::Skipped);
    rules.command = Some(command.to_string());
    rules.recorded_at = Some(crate::sys::time::now_rfc3339());
    let told = format!(
        "baseline of `{command}`: {} passed (each must still pass, by name), {} failed, {} skipped",
        rules.passed.len(),
        rules.failed.len(),
        rules.skipped.len()
    );
    record.tests = Some(rules);
    record.settle();
    crate::state::hold::save(project, &record)?;
    Ok(Recorded {
        told,
        unconfined: ran.checked.unconfined,
    })
}
