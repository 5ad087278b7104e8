//! File tools held to the sandbox's reach (SPEC §9): Claude Code's Edit, Write, MultiEdit and
//! NotebookEdit tools are not sandboxed, so under `--protect` vigil's PreToolUse hook lets them
//! write only where the sandboxed Bash tool could (the reach of `reach`): the project, less the
//! files the engine, git and editors run later, and the temporary directory. A path is judged
//! by where it resolves (every link followed, `..` taken both as the engine's path library and
//! as the kernel would take it), never by its spelling.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::cli::hook::HookInput;
use crate::error::Error;
use crate::reach::{self, MAX_LINKS, lexical, nested, resolve};
use crate::state::hold::{self, Hold};
use crate::state::project::Project;
use crate::sys::{files, paths, user};

/// The tools that write files, and the field of their input that names the file.
pub(crate) const WRITERS: &[(&str, &str)] = &[
    ("Edit", "file_path"),
    ("Write", "file_path"),
    ("MultiEdit", "file_path"),
    ("NotebookEdit", "notebook_path"),
];

/// The matcher of vigil's PreToolUse group.
pub(crate) const MATCHER: &str = "Edit|Write|MultiEdit|NotebookEdit";

/// The PreToolUse hook (under `--protect`): a file tool's write within the agent's reach, and
/// clear of the human's hold, passes (`None`); any other is denied with its one useful line.
/// A hook whose flags are wrong (`config`), or input it cannot read, denies the write, as a
/// gate does.
pub(crate) fn hook(config: Result<(), &Error>, input: &Result<HookInput, Error>) -> Option<String> {
    let verdict = match (config, input) {
        (Err(e), _) => Err(format!(
            "vigil: config error: {e}; fix the stop-gate command of the PreToolUse hook"
        )),
        (_, Err(e)) => Err(format!("vigil: {e}; the write is denied")),
        (Ok(()), Ok(input)) => {
            // The project as Claude Code's sandbox has it: the directory it runs in.
            let start = Project::start_dir(input.cwd.as_deref());
            let cwd = input.cwd.clone().unwrap_or_else(|| start.clone());
            let tool = input.tool_name.as_deref().unwrap_or("");
            judge(tool, input.tool_input.as_ref(), &cwd, &start)
                .and_then(|()| held_write(tool, input, &cwd))
        }
    };
    verdict.err()
}

/// The PostToolUse hook (under `--protect`): where the file tool's write really landed. The
/// guard judged the path before the tool ran; a process of the agent's that swapped a
/// directory for a link in between (or made the file a hard link) sent the write elsewhere.
/// `Some(line)`: the path now leads out of the reach, told to the person and the model. vigil
/// holds no bytes of a place it never judged, so it undoes nothing and deletes nothing; the
/// person looks. A swap made and undone between the two hooks is not seen (SECURITY.md).
pub(crate) fn landed(input: &Result<HookInput, Error>) -> Option<String> {
    let input = input.as_ref().ok()?;
    let tool = input.tool_name.as_deref().unwrap_or("");
    let (_, field) = WRITERS.iter().find(|(name, _)| *name == tool)?;
    let raw = input
        .tool_input
        .as_ref()
        .and_then(|i| i.get(*field))
        .and_then(Value::as_str)?;
    let start = Project::start_dir(input.cwd.as_deref());
    let cwd = input.cwd.clone().unwrap_or_else(|| start.clone());
    let why = match judge(tool, input.tool_input.as_ref(), &cwd, &start) {
        Ok(()) => return None,
        Err(why) => why,
    };
    let why = why
        .split_once(" denied: ")
        .map_or(why.as_str(), |(_, why)| why)
        .to_string();
    Some(format!(
        "vigil: the {tool} to {raw} was allowed, but its path now leads out of the agent's reach ({why}): the write may have landed there, with your rights; check what it changed (vigil undoes nothing)"
    ))
}

/// The guard's part of the human's hold (SPEC §11): a write to a held file, or new runner
/// configuration under a held path, is denied. A hold that cannot be read denies the write.
fn held_write(tool: &str, input: &HookInput, cwd: &Path) -> Result<(), String> {
    if !WRITERS.iter().any(|(name, _)| *name == tool) {
        return Ok(());
    }
    let project = Project::resolve(None, input.cwd.as_deref()).for_reading();
    let hold = match hold::load(&project) {
        Ok(Some(hold)) => hold,
        Ok(None) => return Ok(()),
        Err(e) => {
            return Err(format!(
                "vigil: {e}; the write is denied while the human's hold cannot be read"
            ));
        }
    };
    let top = crate::sys::git::Repository::locate(&project.dir)
        .map(|r| r.top)
        .unwrap_or_else(|_| project.dir.clone());
    judge_held(tool, input.tool_input.as_ref(), cwd, &top, &hold)
}

/// Whether `tool` may write what `input` names; `Err` is the one useful line. `cwd` resolves a
/// relative path; `project` is the directory Claude Code runs in (`$CLAUDE_PROJECT_DIR`), which
/// is what its sandbox lets the shell write, not the git top level above it.
pub(crate) fn judge(
    tool: &str,
    input: Option<&Value>,
    cwd: &Path,
    project: &Path,
) -> Result<(), String> {
    let Some((_, field)) = WRITERS.iter().find(|(name, _)| *name == tool) else {
        return Ok(());
    };
    let Some(raw) = input.and_then(|i| i.get(*field)).and_then(Value::as_str) else {
        return Err(format!(
            "vigil: the {tool} tool's input has no {field}; a write vigil cannot place is denied"
        ));
    };
    if raw.is_empty() || raw.contains('\0') {
        return Err(format!(
            "vigil: the {tool} tool's {field} is not a path; denied"
        ));
    }
    let asked = cwd.join(raw);
    let project = real_dir(project);
    // Found once for both readings of the path.
    let hidden: Vec<PathBuf> = reach::hidden(&project.join(".vigil"), &[])
        .into_iter()
        .map(|(path, _)| path)
        .collect();
    // Node's path.resolve takes `..` by spelling, the kernel after following links: both
    // places must be inside the reach.
    for place in [resolve(&lexical(&asked)), resolve(&asked)] {
        let place = place.ok_or_else(|| {
            format!(
                "vigil: {tool} to {raw} denied: its path has a loop of links or more than {MAX_LINKS}"
            )
        })?;
        if let Some(why) = outside(&place, &project, &hidden) {
            return Err(format!(
                "vigil: {tool} to {} denied: {why}; under --protect the file tools write only the project (not .claude, .codex, .git, .mcp.json, .vscode, .idea) and the temporary directory",
                place.display()
            ));
        }
        // A file with other names: the write lands in each, wherever they are (a hard link the
        // sandboxed shell made to `~/.bashrc`; the sandbox lets it link what it can read).
        if files::has_other_names(&place) {
            return Err(format!(
                "vigil: {tool} to {} denied: the file has other names (hard links), which may be outside the project; a write lands in every one of them",
                place.display()
            ));
        }
        if let Some(why) = git_runs_it(&place, &project) {
            return Err(format!(
                "vigil: {tool} to {} denied: {why}, with your rights; under --protect the file tools never write what git runs",
                place.display()
            ));
        }
    }
    Ok(())
}

/// Why git would run `place` (inside `project`) with the user's rights, if it would: the
/// repositories it is in (each directory from it up to the project's top that holds a `.git`,
/// and the repository the project is part of) name it as a hooks directory, an included
/// configuration file or a program (`nested::git_runs`). Configuration that cannot be read in
/// time denies: the guard cannot say the write is safe.
fn git_runs_it(place: &Path, project: &Path) -> Option<String> {
    if !paths::within(place, project) {
        return None;
    }
    let mut repos: Vec<PathBuf> = place
        .ancestors()
        .skip(1)
        .take_while(|dir| paths::within(dir, project))
        .map(|dir| dir.join(".git"))
        .filter(|dot_git| std::fs::symlink_metadata(dot_git).is_ok())
        .collect();
    if let Ok(holder) = crate::sys::git::Repository::locate(project) {
        let dot_git = holder.top.join(".git");
        if !repos.contains(&dot_git) {
            repos.push(dot_git);
        }
    }
    let deadline = crate::sys::time::Deadline::after(nested::CONFIG_BUDGET);
    for repo in repos {
        match nested::git_runs(project, &repo, deadline) {
            Ok(runs) => {
                if let Some(run) = runs.iter().find(|run| paths::within(place, &run.path)) {
                    return Some(format!("{} ({})", run.why, repo.display()));
                }
            }
            Err(e) => {
                return Some(format!(
                    "what git runs from {} cannot be read ({e}), so it may run this",
                    repo.display()
                ));
            }
        }
    }
    None
}

/// Whether `tool` may write what `input` names under the human's `hold` (SPEC §11): never a
/// held file, and no runner configuration in a held path (`pytest.ini`, `package.json`, …) or
/// on the way to one (`conftest.py`, `sitecustomize.py`, …); new tests are the agent's to add. `top` is the repository's top, where held paths start.
/// `Err` is the one useful line, for the model.
pub(crate) fn judge_held(
    tool: &str,
    input: Option<&Value>,
    cwd: &Path,
    top: &Path,
    hold: &Hold,
) -> Result<(), String> {
    let Some((_, field)) = WRITERS.iter().find(|(name, _)| *name == tool) else {
        return Ok(());
    };
    let Some(raw) = input.and_then(|i| i.get(*field)).and_then(Value::as_str) else {
        return Ok(());
    };
    let asked = cwd.join(raw);
    let top = real_dir(top);
    let matcher = hold.matcher();
    for place in [resolve(&lexical(&asked)), resolve(&asked)]
        .into_iter()
        .flatten()
    {
        let Some(relative) = place
            .strip_prefix(&top)
            .ok()
            .and_then(Path::to_str)
            .map(|p| p.replace('\\', "/"))
        else {
            continue;
        };
        if hold.file(&relative).is_some() {
            return Err(format!(
                "vigil: {relative} is held by the human; if the test is wrong, end with `needs-decision:` and say why"
            ));
        }
        if hold.unheld(&matcher, &relative) == Some(hold::Unheld::RunnerConfig) {
            return Err(format!(
                "vigil: {relative} would configure the test runner under the human's hold, which the agent does not change; add tests as new test files, or end with `needs-decision:` and say why"
            ));
        }
    }
    Ok(())
}

/// Why `place` is out of the file tools' reach, or `None` when it is in it.
fn outside(place: &Path, project: &Path, hidden: &[PathBuf]) -> Option<String> {
    if own_notes(place) {
        return None;
    }
    for hidden in hidden {
        if paths::within(place, hidden) {
            return Some(format!(
                "it is in {}, which the agent never writes",
                hidden.display()
            ));
        }
    }
    if let Some(home) = user::home() {
        let home = real_dir(&home);
        for name in reach::START_UP_FILES {
            if paths::within(place, &home.join(name)) {
                return Some("it is a shell start-up file, which every later shell runs".into());
            }
        }
    }
    // The temporary directory the sandboxed shell may write: $TMPDIR, else /tmp (Windows:
    // %TEMP%).
    let temporary = real_dir(&paths::temp_dir());
    let root = if paths::within(place, project) {
        project.to_path_buf()
    } else if paths::within(place, &temporary) && !paths::within(&temporary, place) {
        temporary
    } else {
        return Some("it is outside the project and the temporary directory".to_string());
    };
    // A read-only entry at any depth (a nested repository's .git, a subdirectory's .claude),
    // in any case (a case-insensitive disk takes .CLAUDE for .claude).
    let rest = place.strip_prefix(&root).unwrap_or(place);
    let mut at = root.clone();
    for part in rest.components() {
        at.push(part);
        // The file a name writes: on Windows `x::$DATA` and `x.` are `x` itself.
        let name = part.as_os_str().to_string_lossy();
        let name = name.split(':').next().unwrap_or("");
        let name = name.trim_end_matches(['.', ' ']);
        if reach::READ_ONLY
            .iter()
            .any(|(entry, _)| entry.eq_ignore_ascii_case(name))
        {
            return Some(format!(
                "{} holds what the engine or git runs with your rights",
                at.display()
            ));
        }
    }
    None
}

/// Claude Code's own Markdown notes, which it writes with these tools and never runs: plans
/// (`~/.claude/plans/`) and a project's memory (`~/.claude/projects/<project>/memory/`), in
/// `$CLAUDE_CONFIG_DIR` where the client was given one.
fn own_notes(place: &Path) -> bool {
    let Some(claude) = reach::claude_home() else {
        return false;
    };
    let claude = real_dir(&claude);
    let Ok(rest) = place.strip_prefix(&claude) else {
        return false;
    };
    let parts: Vec<&std::ffi::OsStr> = rest.iter().collect();
    let markdown = place.extension().is_some_and(|e| e == "md");
    markdown
        && match parts.as_slice() {
            [plans, _] => *plans == "plans",
            [projects, _, memory, _] => *projects == "projects" && *memory == "memory",
            _ => false,
        }
}

fn real_dir(path: &Path) -> PathBuf {
    resolve(&lexical(path)).unwrap_or_else(|| path.to_path_buf())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_path_resolves_through_links_and_dot_dot_as_the_kernel_takes_it() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(real.join("a")).unwrap();
        crate::sys::files::symlink("/etc".as_ref(), &real.join("a/out")).unwrap();
        crate::sys::files::symlink("out".as_ref(), &real.join("a/via")).unwrap();
        assert_eq!(
            resolve(&real.join("a/via/passwd")).unwrap(),
            PathBuf::from("/etc/passwd")
        );
        // The kernel: a/out/.. is the parent of /etc.
        assert_eq!(
            resolve(&real.join("a/out/../x")).unwrap(),
            PathBuf::from("/x")
        );
        // By spelling: a/out/.. is a.
        assert_eq!(lexical(&real.join("a/out/../x")), real.join("a/x"));
        crate::sys::files::symlink("loop".as_ref(), &real.join("loop")).unwrap();
        assert!(resolve(&real.join("loop/x")).is_none());
    }
}
