//! Your own hooks that run what the agent can rewrite (issue 43 item 2): a hook in the settings
//! Claude Code merges for the project that runs a file inside the project (`scripts/format.sh`,
//! `"$CLAUDE_PROJECT_DIR"/tools/lint.sh`), a program found through a PATH entry inside it
//! (`.venv/bin/black`), or a runner that runs the project's own code (`npx prettier`, `uv run
//! ruff`, `npm run lint`, `make fmt`), as `planted::hooks` finds them. Each runs with the user's
//! rights at every event, so the Write tool that rewrites the file runs its code. Making those
//! files read-only would break `npm install` and `uv add`, so the doctor proposes `stop-gate
//! confine -- …` for each, and names the deny rule that would keep one file read-only for a
//! user who opts in.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::install::finding::Finding;
use crate::install::planted::hooks::{self, What};
use crate::sys::paths;
use crate::verdict::defang;

/// The doctor's lines: one warning per hook of the merged settings (`layers`: each file with
/// its settings) that runs what the agent can rewrite in `project`.
pub(super) fn findings(
    project: &Path,
    layers: &[(PathBuf, Map<String, Value>, bool)],
) -> Vec<Finding> {
    let project = paths::canonical(project);
    // Not for the user's own settings alone, whose "project" is the home directory.
    if crate::sys::user::is_home(&project) {
        return Vec::new();
    }
    let layers: Vec<(PathBuf, Map<String, Value>)> = layers
        .iter()
        .map(|(file, root, _)| (file.clone(), root.clone()))
        .collect();
    hooks::hooks_in(&project, &layers)
        .iter()
        .map(|(file, event, command, what)| finding(event, command, what, file, &project))
        .collect()
}

fn finding(event: &str, command: &str, what: &What, file: &Path, project: &Path) -> Finding {
    let relative = |path: &Path| {
        path.strip_prefix(project)
            .unwrap_or(path)
            .display()
            .to_string()
    };
    let (runs, keep) = match what {
        What::File(path) => (
            format!("{}, a file in the project", relative(path)),
            Some(relative(path)),
        ),
        What::OnPath(path) => (
            format!(
                "{}, found through a PATH entry inside the project",
                path.display()
            ),
            Some(relative(path)),
        ),
        What::Runner(runner, runs) => (
            format!("the project's own code through {runner} ({runs})"),
            None,
        ),
    };
    let opt_in = keep.map_or_else(String::new, |rel| {
        format!("; or keep it read-only to the agent: add \"Edit(/{rel})\" to permissions.deny")
    });
    let shown = defang::field_max(command, 120);
    Finding::Warn(format!(
        "{event}: your hook `{shown}` runs {runs}, which the agent can rewrite; it runs with your rights at every {event}\nin {}: run it confined as a check is: \"command\": \"stop-gate confine -- {shown}\" (with --network if it fetches){opt_in}",
        file.display()
    ))
}
