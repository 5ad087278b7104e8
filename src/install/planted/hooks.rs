//! The files your own hooks run that the agent can rewrite (issue 43 item 2): a hook of the
//! settings Claude Code merges for the project that runs a file inside it, a program found
//! through a PATH entry inside it, or the project's own code through a runner. The doctor names
//! each hook (`settings::doctor`); `install --protect` records each file's bytes in the
//! baseline, and a Stop tells the person when one changed.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::install::settings::{handler_line, vigil_binary};
use crate::reach::nested;
use crate::sys::{files, paths};

/// Runners that run the project's own code, with what they run: the first word, the words
/// after it that make it a runner (empty: any), and what the person is told it runs.
pub(crate) const RUNNERS: &[(&str, &[&str], &str)] = &[
    ("npx", &[], "node_modules/.bin or package.json"),
    ("bunx", &[], "node_modules/.bin or package.json"),
    ("pnpm", &[], "node_modules/.bin or package.json's scripts"),
    ("yarn", &[], "node_modules/.bin or package.json's scripts"),
    (
        "npm",
        &["run", "exec", "test", "start"],
        "package.json's scripts or node_modules/.bin",
    ),
    ("uv", &["run"], ".venv/bin or pyproject.toml"),
    ("poetry", &["run"], ".venv/bin or pyproject.toml"),
    ("pipenv", &["run"], ".venv/bin or the Pipfile"),
    ("bundle", &["exec"], "the Gemfile's binstubs"),
    ("make", &[], "the Makefile's recipes"),
    ("just", &[], "the justfile's recipes"),
    ("python", &["-m"], "a module of the project"),
    ("python3", &["-m"], "a module of the project"),
    ("pytest", &[], "conftest.py and the project's tests"),
    (
        "cargo",
        &["run", "test", "build", "check", "clippy", "bench"],
        "build.rs and the project's code",
    ),
    (
        "go",
        &["run", "test", "generate", "build"],
        "the project's code",
    ),
    (
        "bun",
        &["run", "x", "test"],
        "package.json's scripts or the project's code",
    ),
    (
        "deno",
        &["run", "task", "test"],
        "the project's code or deno.json's tasks",
    ),
    ("tox", &[], "tox.ini's commands"),
    ("nox", &[], "noxfile.py"),
    ("pre-commit", &[], ".pre-commit-config.yaml's hooks"),
];

/// Tools that load a configuration file of the project as code, with the files that would be.
const CODE_CONFIGS: &[(&str, &[&str])] = &[
    (
        "prettier",
        &[
            ".prettierrc.js",
            ".prettierrc.cjs",
            ".prettierrc.mjs",
            "prettier.config.js",
            "prettier.config.cjs",
            "prettier.config.mjs",
        ],
    ),
    (
        "eslint",
        &[
            "eslint.config.js",
            "eslint.config.cjs",
            "eslint.config.mjs",
            ".eslintrc.js",
            ".eslintrc.cjs",
        ],
    ),
];

/// Each hook of `layers` (a settings file and its settings) that runs what the agent can
/// rewrite in `project` (canonical): the file, the event, the command, and what it runs.
pub(crate) fn hooks_in(
    project: &Path,
    layers: &[(PathBuf, Map<String, Value>)],
) -> Vec<(PathBuf, String, String, What)> {
    let mut found = Vec::new();
    for (file, root) in layers {
        let Some(events) = root.get("hooks").and_then(Value::as_object) else {
            continue;
        };
        for (event, groups) in events {
            let handlers = groups
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|group| group.get("hooks")?.as_array())
                .flatten();
            for handler in handlers {
                let Some(command) = handler_line(handler) else {
                    continue;
                };
                // vigil's own, and a hook already run confined (`stop-gate confine -- …`), when
                // it is that alone: `stop-gate confine -- true; scripts/format.sh` is not.
                let alone =
                    !command.contains([';', '&', '|', '\n', '`']) && !command.contains("$(");
                if alone && vigil_binary(&command).is_some() {
                    continue;
                }
                if let Some(what) = runs_from_project(&command, project) {
                    found.push((file.clone(), event.clone(), command, what));
                }
            }
        }
    }
    found
}

/// The files the hooks of the settings Claude Code merges for `project` run that the agent
/// can rewrite, each with the event that runs it (not the user's own settings alone, whose
/// "project" is the home directory).
pub(crate) fn files_run(project: &Path) -> Vec<(PathBuf, String)> {
    if crate::sys::user::is_home(project) {
        return Vec::new();
    }
    let home = crate::sys::user::home();
    let project = paths::canonical(project);
    let layers: Vec<(PathBuf, Map<String, Value>)> =
        crate::reach::sandbox::layer_files(&project, home.as_deref())
            .into_iter()
            .filter_map(|path| Some((path.clone(), crate::reach::sandbox::read_layer(&path)?)))
            .collect();
    let mut files: Vec<(PathBuf, String)> = Vec::new();
    for (_, event, _, what) in hooks_in(&project, &layers) {
        if let What::File(path) | What::OnPath(path) = what
            && !files.iter().any(|(p, _)| *p == path)
        {
            files.push((path, event));
        }
    }
    files
}

/// What a hook's `command` runs that the agent can rewrite in `project`, if anything: a file
/// inside it (not one of the read-only names, which the agent cannot write), a program found
/// through a PATH entry inside it, or a runner of the project's own code.
pub(crate) fn runs_from_project(command: &str, project: &Path) -> Option<What> {
    let expanded = command
        .replace("${CLAUDE_PROJECT_DIR}", &project.to_string_lossy())
        .replace("$CLAUDE_PROJECT_DIR", &project.to_string_lossy());
    let words = shlex::split(&expanded)
        .unwrap_or_else(|| expanded.split_whitespace().map(str::to_string).collect());
    // The program: past variable assignments and `env`/`exec`.
    let program_at = words
        .iter()
        .position(|w| !is_assignment(w) && w != "env" && w != "exec")?;
    for word in &words[program_at..] {
        if word.contains('/') {
            let path = if Path::new(word).is_absolute() {
                PathBuf::from(word)
            } else {
                project.join(word)
            };
            let real = paths::canonical(&paths::lexical(&path));
            if paths::within(&real, project)
                && real != project
                && real.is_file()
                && !read_only(&real, project)
            {
                return Some(What::File(real));
            }
        }
    }
    let program = &words[program_at];
    if !program.contains('/') {
        if let Some(found) = files::find_on_path(program)
            && paths::within(&paths::canonical(&found), project)
        {
            return Some(What::OnPath(found));
        }
        let rest = &words[program_at + 1..];
        for (runner, verbs, runs) in RUNNERS {
            if files::program_name(program) == *runner
                && (verbs.is_empty() || rest.first().is_some_and(|w| verbs.contains(&w.as_str())))
            {
                return Some(What::Runner(runner, runs));
            }
        }
        for (tool, configs) in CODE_CONFIGS {
            if files::program_name(program) == *tool
                && let Some(config) = configs.iter().find(|c| project.join(c).is_file())
            {
                return Some(What::File(project.join(config)));
            }
        }
    }
    None
}

/// `NAME=value`, a variable set for the command.
fn is_assignment(word: &str) -> bool {
    word.split_once('=')
        .is_some_and(|(name, _)| !name.is_empty() && !name.contains('/'))
}

/// Whether `path` is inside one of the read-only names below `project`'s top (the agent cannot
/// write it: a `.claude/hooks/` script).
fn read_only(path: &Path, project: &Path) -> bool {
    path.strip_prefix(project).is_ok_and(|rest| {
        rest.components()
            .any(|c| nested::is_read_only_name(c.as_os_str()))
    })
}

/// What a hook runs that the agent can rewrite.
pub(crate) enum What {
    File(PathBuf),
    OnPath(PathBuf),
    Runner(&'static str, &'static str),
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn runners_and_files_in_the_project_are_told_apart_from_system_programs() {
        let dir = tempfile::tempdir().unwrap();
        let project = paths::canonical(dir.path());
        std::fs::create_dir_all(project.join("scripts")).unwrap();
        std::fs::create_dir_all(project.join(".claude/hooks")).unwrap();
        std::fs::write(project.join("scripts/format.sh"), "").unwrap();
        std::fs::write(project.join(".claude/hooks/x.sh"), "").unwrap();
        let file = |c: &str| matches!(runs_from_project(c, &project), Some(What::File(_)));
        assert!(file("scripts/format.sh"));
        assert!(file("bash ./scripts/format.sh --all"));
        assert!(file("\"$CLAUDE_PROJECT_DIR\"/scripts/format.sh"));
        assert!(file("FOO=1 sh ${CLAUDE_PROJECT_DIR}/scripts/format.sh"));
        let runner = |c: &str| matches!(runs_from_project(c, &project), Some(What::Runner(..)));
        assert!(runner("npx prettier --write ."));
        assert!(runner("uv run ruff format"));
        assert!(runner("npm run lint"));
        assert!(!runner("npm --version"));
        assert!(runner("python3 -m tools.fmt"));
        assert!(runner("cargo clippy --fix"));
        assert!(!runner("cargo fmt"));
        assert!(runner("pre-commit run --all-files"));
        std::fs::write(project.join("prettier.config.js"), "").unwrap();
        assert!(file("prettier --write src"));
        for harmless in [
            "\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/x.sh",
            "jq -r .tool_input.file_path",
            "/usr/bin/true",
            "scripts/missing.sh",
        ] {
            assert!(
                runs_from_project(harmless, &project).is_none(),
                "{harmless}"
            );
        }
    }
}
