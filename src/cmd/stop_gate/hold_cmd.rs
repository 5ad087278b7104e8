//! `stop-gate hold`: the human holds the tests that judge the work (SPEC §11), sees how the
//! tree differs, renews a path after a legitimate change, and releases it.

use std::ffi::OsString;
use std::path::Path;

use lexopt::prelude::*;

use crate::cli::defs::{self, Given, Scope};
use crate::cli::flags::print;
use crate::cli::output::diagnostic;
use crate::evidence::held::{self, Change, Taken};
use crate::evidence::snapshot;
use crate::evidence::subject::Limits;
use crate::gate::held_check;
use crate::state::hold::{self, Hold, Matcher};
use crate::state::project::Project;
use crate::verdict::defang;
use crate::{Error, Exit, Result};

const NAME: &str = "stop-gate";

pub(super) const HELP: &str = "\
stop-gate hold: hold the tests that judge the work, so the agent cannot weaken them.

Usage:
  stop-gate hold add [--at REV] PATH|GLOB...   hold them as the tree (or commit REV) has them
  stop-gate hold add [--at REV]                hold what the repository's .vigil-hold names
  stop-gate hold add --env PATH... [--copy [--max-size SIZE]]
                                               what the check needs that git ignores (.venv):
                                               bound as it is, or held as a copy made now
  stop-gate hold refresh --env                 copy the environments held as copies again
  stop-gate hold show [--json]                 what is held
  stop-gate hold diff [--patch]                how the tree differs (exit 1 when it does)
  stop-gate hold refresh [PATH|GLOB...]        renew held files from the tree (a change you made)
  stop-gate hold release PATH|GLOB... | --all  stop holding them
  stop-gate hold cat PATH                      a held file's bytes, as held
  stop-gate hold baseline [--check-network] [--timeout SECS] CMD
                                               run the check under the hold and record which
                                               tests passed: each must still pass, by name
  stop-gate hold must-pass ID...               these tests must pass (those the work fixes)
  stop-gate hold flaky ID...                   these tests are not held to the baseline
  stop-gate hold add ... --baseline CMD        hold, then record the baseline
In Claude Code, the human's /vigil-hold [PATH...] [--at REV] [--baseline CMD] does hold add.
A PATH is a file, or a directory and everything below it; a GLOB (quote it) takes `*` within a
directory and `**` across them, e.g. 'tests/**/test_*.py'. Paths are taken from the directory
you run it in. A committed .vigil-hold at the repository's top may say what to hold (a
pattern a line, # for comments); it takes effect only when a human runs hold add (or
/vigil-hold) with no paths, and CI reads it from the base branch (marker-writer run
--hold-from REF). The hold belongs to the repository: every worktree's loops use it. It lives in
vigil's protected state, out of the agent's reach under settings-merge install --protect, and
vigil never changes your working tree for it.

With a hold, the Stop hook's check (--run) runs on what it judges: in a private copy of the
files the verdict names, every held file as held and read-only, new files under a held path
left out, build and cache directories (CARGO_TARGET_DIR, PYTHONPYCACHEPREFIX, GOCACHE,
XDG_CACHE_HOME) in a check cache of the protected state. A declaration while a held file is
modified or deleted is refused, naming it. What git ignores is not in the copy: declare what
the check needs with --env: mounted in the copy read-only, as it is in the project, or with
--copy as a copy made now (its size told, refused over --max-size, default 2G), which what the
agent installs later does not reach; a new dependency then needs the human's refresh --env.
Under --protect the file-tool guard refuses writes to held files and new runner configuration
(conftest.py, pytest.ini, package.json, ...) under a held path.

Tests by name: a check whose command holds {junit} writes a JUnit report there (a fresh path
outside the project, read after the check's processes are gone): pytest --junitxml={junit},
node --test --test-reporter=junit --test-reporter-destination={junit}. Without one, the lines
runners print are read: cargo test's `test X ... ok`, go test -json, pytest -rA, unittest -v.
With a baseline or a must-pass test, every test that passed at the baseline must pass, a held
test that is gone, renamed or skipped fails the Stop by name, and a baseline test that fails
is run once more before it blocks. A run whose runners say 0 tests ran is no pass.
Exit 0 on success, 1 when diff finds a difference (or show finds no hold), 2 on an error.
";

/// `stop-gate hold --help`, with the options of each action from the table.
pub(super) fn help() -> String {
    let mut text = HELP.to_string();
    text.push_str("Options:\n");
    for flag in defs::of_binary(NAME).filter(|f| f.scope_words().any(|w| w.starts_with("hold-"))) {
        text.push_str(&defs::entry(&flag.usage(), flag.help.unwrap_or("")));
    }
    text
}

pub(super) fn hold_command(args: Vec<OsString>) -> Result<Exit> {
    let dashes = args.first().is_some_and(|a| a == "--");
    let mut parser = lexopt::Parser::from_args(args);
    let Some(action) = action_of(&mut parser)? else {
        return print(help().as_bytes());
    };
    let mut at: Option<String> = None;
    let mut env = false;
    let mut copy = false;
    let mut max_size = hold::DEFAULT_MAX_ENV;
    let mut json = false;
    let mut patch = false;
    let mut all = false;
    let mut baseline: Option<String> = None;
    let mut network = false;
    let mut timeout: u64 = 600;
    let mut paths: Vec<String> = Vec::new();
    // After `--`, as before the action, everything is a path.
    let mut rest: Vec<OsString> = parser.raw_args()?.collect();
    if dashes {
        rest.insert(0, "--".into());
    }
    let mut args = defs::Args::new(rest, Scope::of(NAME, scope_word(&action)));
    loop {
        let given = args.next().map_err(|e| match e {
            lexopt::Error::UnexpectedOption(_) => Error::usage(format!(
                "{e} with hold {}; see stop-gate hold --help",
                defang::field_max(&action, 20)
            )),
            other => other.into(),
        })?;
        let (flag, value) = match given {
            None => break,
            Some(Given::Help) => return print(help().as_bytes()),
            Some(Given::Value(value)) => {
                paths.push(
                    value
                        .into_string()
                        .map_err(|_| Error::usage("a path to hold is not valid UTF-8"))?,
                );
                continue;
            }
            Some(Given::Flag(flag, value)) => (flag, value.unwrap_or_default()),
        };
        let text = || flag.text(value.clone());
        match flag.name {
            "--at" => at = Some(text()?),
            "--env" => env = true,
            "--copy" => copy = true,
            "--max-size" => max_size = flag.size(&text()?)?,
            "--json" => json = true,
            "--patch" => patch = true,
            "--all" => all = true,
            "--baseline" => baseline = Some(text()?),
            "--check-network" => network = true,
            "--timeout" => timeout = flag.number(&text()?)?,
            _ => return Err(flag.unread()),
        }
    }
    let project = Project::resolve(None, None);
    // Those that only read look the state up where it is, making nothing: the slash
    // command's `!` block runs `hold show` in the sandbox, where the state home is read-only.
    let project = if matches!(action.as_str(), "show" | "diff" | "cat") {
        project.for_reading()
    } else {
        project
    };
    let run = Baseline {
        network,
        timeout: std::time::Duration::from_secs(timeout),
    };
    match action.as_str() {
        "add" if env => add_env(&project, &paths, copy.then_some(max_size)),
        "add" if copy => Err(Error::usage(
            "--copy goes with --env: hold add --env .venv --copy",
        )),
        "refresh" if env && paths.is_empty() => refresh_env(&project),
        "refresh" if env => Err(Error::usage(
            "hold refresh --env renews every environment held as a copy; it takes no paths",
        )),
        "add" => {
            let exit = add(&project, &paths, at.as_deref())?;
            match baseline {
                Some(command) => record_baseline(&project, &command, &run),
                None => Ok(exit),
            }
        }
        "baseline" if paths.len() == 1 => record_baseline(&project, &paths[0], &run),
        "baseline" => Err(Error::usage(
            "hold baseline takes the check command as one argument, e.g. stop-gate hold baseline 'python3 -m pytest -q --junitxml={junit}'",
        )),
        "must-pass" | "flaky" if !paths.is_empty() => name_tests(&project, &action, &paths),
        "must-pass" | "flaky" => Err(Error::usage(format!(
            "hold {action} needs the tests' identities, as `stop-gate hold show` lists them"
        ))),
        "show" if paths.is_empty() => show(&project, json),
        "diff" if paths.is_empty() => diff(&project, patch),
        "refresh" => refresh(&project, &paths),
        "release" => release(&project, &paths, all),
        "cat" if paths.len() == 1 => cat(&project, &paths[0]),
        "show" | "diff" => Err(Error::usage(format!("hold {action} takes no paths"))),
        "cat" => Err(Error::usage("hold cat takes one path")),
        other => Err(Error::usage(format!(
            "hold {} is not add, show, diff, refresh, release, cat, baseline, must-pass or flaky; see stop-gate hold --help",
            defang::field_max(other, 40)
        ))),
    }
}

/// The action, the first argument; `None` for --help (or nothing).
fn action_of(parser: &mut lexopt::Parser) -> Result<Option<String>> {
    Ok(match parser.next()? {
        None | Some(Short('h') | Long("help")) => None,
        Some(Value(action)) => Some(
            action
                .into_string()
                .map_err(|_| Error::usage("a hold command is not valid UTF-8"))?,
        ),
        Some(other) => {
            return Err(Error::usage(format!(
                "{}: say what to do first (add, show, diff, refresh, release, cat, baseline, must-pass, flaky); see stop-gate hold --help",
                other.unexpected()
            )));
        }
    })
}

/// The flags of an action, as the table gives them (`hold-add`, …).
fn scope_word(action: &str) -> &'static str {
    match action {
        "add" => "hold-add",
        "refresh" => "hold-refresh",
        "show" => "hold-show",
        "diff" => "hold-diff",
        "release" => "hold-release",
        "baseline" => "hold-baseline",
        _ => "hold",
    }
}

fn normalized(top: &Path, args: &[String]) -> Result<Vec<String>> {
    args.iter().map(|arg| normalize(top, arg)).collect()
}

/// An argument as a hold keeps it, taken from the directory this runs in.
fn normalize(top: &Path, arg: &str) -> Result<String> {
    let here = std::env::current_dir()
        .map_err(|e| Error::Io(format!("cannot tell where this runs: {e}")))?;
    held::normalize(top, &here, arg)
}

/// Says where the hold is kept when the agent could write it there, and, where Claude Code's
/// sandbox is on, how its rules come to list the held files.
fn warn_if_reachable(project: &Project) {
    if crate::reach::sandbox::sandbox_on(&project.dir) {
        diagnostic(
            NAME,
            "the sandbox's rules list the held files as the last `install.sh --protect` found them: run it again (or settings-merge install --protect) so the agent's shell cannot write them from the next session; the file tools' guard and the Stop hold them already",
        );
    }
    let place = project.protected();
    if place.agent_writable() {
        diagnostic(
            NAME,
            &format!(
                "the hold is kept in {}, where the agent can write: it holds only against an agent that does not look there; set VIGIL_STATE_HOME to a directory outside the project and the agent's sandbox",
                hold::dir(project).display()
            ),
        );
    }
}

fn add(project: &Project, args: &[String], at: Option<&str>) -> Result<Exit> {
    let top = held::top(project)?;
    let patterns = if args.is_empty() {
        held::setting_patterns(project, at)?
    } else {
        normalized(&top, args)?
    };
    let added = held::add(project, &patterns, at)?;
    warn_if_reachable(project);
    print(format!("stop-gate: {}\n", added.told()).as_bytes())
}

fn add_env(project: &Project, args: &[String], copy: Option<u64>) -> Result<Exit> {
    if args.is_empty() {
        return Err(Error::usage(
            "hold add --env needs what the check needs, e.g. stop-gate hold add --env .venv",
        ));
    }
    let top = held::top(project)?;
    let mut record = hold::load(project)?.ok_or_else(|| {
        Error::usage("there is no hold yet: hold the tests first (stop-gate hold add tests/)")
    })?;
    let mut named = Vec::new();
    for arg in args {
        let path = normalize(&top, arg)?;
        if hold::is_glob(&path) {
            return Err(Error::usage(format!(
                "--env takes a path, not a glob: `{path}`"
            )));
        }
        if std::fs::symlink_metadata(top.join(&path)).is_err() {
            return Err(Error::usage(format!(
                "`{path}` is not there; make it (e.g. the virtualenv) before declaring it"
            )));
        }
        record.env.retain(|e| *e != path);
        record.env_copies.retain(|e| e.path != path);
        match copy {
            Some(max) => {
                let held = held::copy_env(project, &path, max)?;
                named.push(format!(
                    "{path} as a copy of {} made now",
                    crate::sys::files::human_bytes(held.bytes)
                ));
                record.env_copies.push(held);
            }
            None => {
                named.push(format!("{path} read-only, as it is in the project"));
                record.env.push(path);
            }
        }
    }
    record.settle();
    hold::save(project, &record)?;
    warn_if_reachable(project);
    print(
        format!(
            "stop-gate: the check under the hold gets {}\n",
            named.join(", ")
        )
        .as_bytes(),
    )
}

/// `hold refresh --env`: every environment held as a copy, copied again as it is now.
fn refresh_env(project: &Project) -> Result<Exit> {
    let mut record = loaded(project)?;
    if record.env_copies.is_empty() {
        return Err(Error::usage(
            "no environment is held as a copy (hold add --env PATH --copy makes one)",
        ));
    }
    let mut said = Vec::new();
    for held in &mut record.env_copies {
        let max = hold::DEFAULT_MAX_ENV.max(held.bytes.saturating_mul(2));
        *held = held::copy_env(project, &held.path, max)?;
        said.push(format!(
            "{} ({})",
            held.path,
            crate::sys::files::human_bytes(held.bytes)
        ));
    }
    record.settle();
    hold::save(project, &record)?;
    print(format!("stop-gate: renewed the held copy of {}\n", said.join(", ")).as_bytes())
}

fn loaded(project: &Project) -> Result<Hold> {
    hold::load(project)?.ok_or_else(|| {
        Error::usage(format!(
            "nothing is held for {}; hold the tests with stop-gate hold add tests/",
            project.dir.display()
        ))
    })
}

fn show(project: &Project, json: bool) -> Result<Exit> {
    let Some(record) = hold::load(project)? else {
        if json {
            print(b"null\n")?;
        } else {
            print(
                format!(
                    "nothing is held for {}; hold the tests with stop-gate hold add tests/\n",
                    project.dir.display()
                )
                .as_bytes(),
            )?;
        }
        return Ok(Exit::Negative);
    };
    if json {
        let mut text = serde_json::to_string_pretty(&record).expect("a hold serializes");
        text.push('\n');
        return print(text.as_bytes());
    }
    let mut text = format!(
        "held since {} (renewed {}), {} files:\n",
        record.made_at,
        record.updated_at,
        record.files.len()
    );
    for pattern in &record.patterns {
        let count = Matcher::new(std::iter::once(pattern.pattern.as_str()));
        let n = record
            .files
            .iter()
            .filter(|f| count.matches(&f.path))
            .count();
        text.push_str(&format!(
            "  {}  ({n} files, at {})\n",
            pattern.pattern, pattern.at
        ));
    }
    for env in &record.env {
        text.push_str(&format!(
            "  env {env}  (in the check's copy, read-only, as it is)\n"
        ));
    }
    for held in &record.env_copies {
        text.push_str(&format!(
            "  env {}  (held as a copy of {}, made {}; hold refresh --env renews it)\n",
            held.path,
            crate::sys::files::human_bytes(held.bytes),
            held.made_at
        ));
    }
    if let Some(rules) = &record.tests {
        if let Some(command) = &rules.command {
            text.push_str(&format!(
                "baseline of `{command}` ({}): {} passed, {} failed, {} skipped; each that passed must pass\n",
                rules.recorded_at.as_deref().unwrap_or("?"),
                rules.passed.len(),
                rules.failed.len(),
                rules.skipped.len()
            ));
        }
        for id in &rules.must_pass {
            text.push_str(&format!("  must pass: {id}\n"));
        }
        for id in &rules.flaky {
            text.push_str(&format!("  flaky: {id}\n"));
        }
    }
    print(text.as_bytes())
}

/// How `hold baseline` runs the check.
struct Baseline {
    network: bool,
    timeout: std::time::Duration,
}

/// Runs `command` under the hold as the Stop hook would, and records each test's outcome.
fn record_baseline(project: &Project, command: &str, run: &Baseline) -> Result<Exit> {
    let recorded = held_check::record_baseline(project, command, run.network, run.timeout)?;
    if let Some(note) = &recorded.unconfined {
        diagnostic(NAME, note);
    }
    print(format!("stop-gate: {}\n", recorded.told).as_bytes())
}

/// `hold must-pass` and `hold flaky`: tests the human names.
fn name_tests(project: &Project, action: &str, ids: &[String]) -> Result<Exit> {
    let mut record = loaded(project)?;
    let rules = record.tests.get_or_insert_with(Default::default);
    let list = if action == "flaky" {
        &mut rules.flaky
    } else {
        &mut rules.must_pass
    };
    for id in ids {
        if id.trim().is_empty() || id.contains('\n') {
            return Err(Error::usage(format!("{id:?} is not a test's identity")));
        }
        if !list.contains(id) {
            list.push(id.clone());
        }
    }
    record.settle();
    hold::save(project, &record)?;
    let said = if action == "flaky" {
        "not held to the baseline"
    } else {
        "must pass at every Stop"
    };
    print(format!("stop-gate: {} {said}\n", ids.join(", ")).as_bytes())
}

fn diff(project: &Project, patch: bool) -> Result<Exit> {
    let record = loaded(project)?;
    let compared = held::compare(project, &record)?;
    let mut text = String::new();
    let top = held::top(project)?;
    for (path, change) in &compared.changed {
        text.push_str(&format!("{} {}\n", change.word(), hold::shown(path)));
        if patch && *change == Change::Modified {
            text.push_str(&unified(project, &record, &top, path)?);
        }
    }
    for path in &compared.new {
        text.push_str(&format!(
            "new {} (not held: the check's copy leaves it out)\n",
            hold::shown(path)
        ));
    }
    if text.is_empty() {
        text = format!("the {} held files are as held\n", record.files.len());
    }
    print(text.as_bytes())?;
    Ok(if compared.changed.is_empty() && compared.new.is_empty() {
        Exit::Success
    } else {
        Exit::Negative
    })
}

/// A held file against the tree, as a unified diff (a note where either side is not text).
fn unified(project: &Project, record: &Hold, top: &Path, path: &str) -> Result<String> {
    let Some(file) = record.file(path) else {
        return Ok(String::new());
    };
    let held = hold::blob(project, &file.blob)?;
    let now = std::fs::read(top.join(path)).unwrap_or_default();
    let (Ok(held), Ok(now)) = (std::str::from_utf8(&held), std::str::from_utf8(&now)) else {
        return Ok("  (not text: no patch shown)\n".to_string());
    };
    let diff = similar::TextDiff::from_lines(held, now);
    Ok(diff
        .unified_diff()
        .header(&format!("held/{path}"), &format!("tree/{path}"))
        .to_string())
}

fn refresh(project: &Project, args: &[String]) -> Result<Exit> {
    let mut record = loaded(project)?;
    let top = held::top(project)?;
    let chosen = normalized(&top, args)?;
    let select = Matcher::new(chosen.iter().map(String::as_str));
    let wanted = |path: &str| chosen.is_empty() || select.matches(path);
    let taken = held::from_worktree(project, &record.matcher(), Limits::default())?;
    let taken: Vec<Taken> = taken.into_iter().filter(|(f, _)| wanted(&f.path)).collect();
    if !chosen.is_empty() && taken.is_empty() && !record.files.iter().any(|f| wanted(&f.path)) {
        return Err(Error::usage(format!(
            "nothing held matches {}; see stop-gate hold show",
            chosen.join(", ")
        )));
    }
    let before: std::collections::BTreeMap<String, String> = record
        .files
        .iter()
        .map(|f| (f.path.clone(), f.blob.clone()))
        .collect();
    let mut said = Vec::new();
    let present: std::collections::BTreeSet<String> =
        taken.iter().map(|(f, _)| f.path.clone()).collect();
    for (path, _) in before
        .iter()
        .filter(|(p, _)| wanted(p) && !present.contains(*p))
    {
        said.push(format!("dropped {path} (no longer in the tree)"));
    }
    for (file, _) in &taken {
        match before.get(&file.path) {
            None => said.push(format!("added {}", file.path)),
            Some(blob) if *blob != file.blob => said.push(format!("renewed {}", file.path)),
            Some(_) => {}
        }
    }
    record
        .files
        .retain(|f| !wanted(&f.path) || present.contains(&f.path));
    held::keep(project, &mut record, taken)?;
    record.settle();
    hold::save(project, &record)?;
    warn_if_reachable(project);
    if said.is_empty() {
        said.push("nothing changed: the held files are as the tree has them".to_string());
    }
    print(format!("stop-gate: {}\n", said.join("; ")).as_bytes())
}

fn release(project: &Project, args: &[String], all: bool) -> Result<Exit> {
    if all || args.is_empty() {
        if !all {
            return Err(Error::usage(
                "hold release needs the paths to release, or --all",
            ));
        }
        let said = if hold::release(project)? {
            snapshot::discard_warm(project);
            warn_if_reachable(project);
            "stop-gate: the hold is released: the check runs on the tree as it is"
        } else {
            "stop-gate: nothing was held"
        };
        return print(format!("{said}\n").as_bytes());
    }
    let mut record = loaded(project)?;
    let top = held::top(project)?;
    let chosen = normalized(&top, args)?;
    let count = |r: &Hold| (r.patterns.len(), r.env.len(), r.env_copies.len());
    let before = count(&record);
    record.patterns.retain(|p| !chosen.contains(&p.pattern));
    record.env.retain(|e| !chosen.contains(e));
    for held in record
        .env_copies
        .iter()
        .filter(|e| chosen.contains(&e.path))
    {
        let _ = std::fs::remove_dir_all(hold::env_dir(project).join(&held.copy));
    }
    record.env_copies.retain(|e| !chosen.contains(&e.path));
    if count(&record) == before {
        return Err(Error::usage(format!(
            "{} is not held as named; see stop-gate hold show",
            chosen.join(", ")
        )));
    }
    if record.patterns.is_empty() {
        hold::release(project)?;
        snapshot::discard_warm(project);
        return print(b"stop-gate: the hold is released: the check runs on the tree as it is\n");
    }
    let matcher = record.matcher();
    record.files.retain(|f| matcher.matches(&f.path));
    record.settle();
    hold::save(project, &record)?;
    print(
        format!(
            "stop-gate: released {}; {} files stay held\n",
            chosen.join(", "),
            record.files.len()
        )
        .as_bytes(),
    )
}

fn cat(project: &Project, arg: &str) -> Result<Exit> {
    let record = loaded(project)?;
    let top = held::top(project)?;
    let path = normalize(&top, arg)?;
    let file = record.file(&path).ok_or_else(|| {
        Error::usage(format!(
            "{path} is not a held file; see stop-gate hold show"
        ))
    })?;
    let bytes = hold::blob(project, &file.blob)?;
    print(&bytes)
}
