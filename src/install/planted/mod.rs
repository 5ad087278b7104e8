//! Planted code (SPEC §9, "File tools held to the sandbox's reach"): files Claude Code later
//! executes with the user's rights, outside any sandbox, which an agent's file tools or shell
//! can write. The doctor names each one it finds:
//!
//! - agent, command and skill files whose YAML frontmatter has a top-level `hooks` key
//!   (`.claude/agents/**/*.md`, `.claude/commands/**/*.md`, `.claude/skills/*/SKILL.md`, in the
//!   project and in `~/.claude/`), and those whose frontmatter cannot be read (one may hide it);
//! - plugin hook files, `hooks.json` anywhere under `~/.claude/plugins/` (vigil's own excepted);
//! - MCP servers: `mcpServers` of the project's `.mcp.json`, and of `~/.claude.json` (at its top,
//!   or for this project under `projects`).
//!
//! `install --protect` records what is there (a sha256 each) in the project's protected state,
//! where the agent cannot reach; one found later that is not in that baseline appeared, or
//! changed, after the user vouched for the project, and the doctor fails on it.
//!
//! Every walk is bounded (6 levels, 10,000 entries). The plugins' walk follows no symlinked
//! directory; those of agents and commands do, as Claude Code does (the bounds end a loop).
//! What cannot be read is passed over: Claude Code, with the same rights, cannot read it either.
//!
//! Here what is planted, the baseline and the doctor's lines; finding it is `scan`, reading
//! frontmatter `frontmatter`.

mod frontmatter;
pub(crate) mod hooks;
mod scan;

pub use frontmatter::frontmatter_has_hooks;
pub(crate) use scan::scan_here;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::error;
use crate::install::finding::Finding;
use crate::state::protected;
use crate::sys::atomic;
use crate::sys::files;
use crate::verdict::defang;

/// The file in the project's protected state that holds the baseline.
pub(crate) const BASELINE_FILE: &str = "planted-baseline.json";
pub(crate) const BASELINE_SCHEMA: &str = "vigil.planted-baseline/v1";

/// How many directory entries one walk looks at before it stops (and says so): a marketplace
/// is a whole clone, and the doctor must answer in moments.
pub(crate) const MAX_ENTRIES: usize = 10_000;
/// `~/.claude.json` keeps every project's history, and grows.
const MAX_JSON: u64 = 64 << 20;

/// Which kind of Markdown file Claude Code reads the frontmatter of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Agent,
    Command,
    Skill,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Agent => "agent",
            Kind::Command => "command",
            Kind::Skill => "skill",
        }
    }

    /// The name with its article.
    fn one(self) -> &'static str {
        match self {
            Kind::Agent => "an agent",
            Kind::Command => "a command",
            Kind::Skill => "a skill",
        }
    }
}

/// What was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum What {
    /// Frontmatter with a top-level `hooks` key.
    Hooks(Kind),
    /// Frontmatter that cannot be read as YAML, and why.
    Unparsed(Kind, String),
    /// A plugin's `hooks.json`.
    PluginHooks,
    /// MCP servers, by name; `scope` is where in the file (`projects["/p"]`), when not its top.
    Mcp {
        servers: Vec<String>,
        scope: Option<String>,
    },
    /// A read-only name below the project's top (`reach::nested`), spelled in lower case: a
    /// subdirectory's `.claude/`, a nested repository's `.git`.
    Nested(String),
    /// A file in the project one of the user's own hooks runs, and the hook's event
    /// (`hooks`): the agent can rewrite it.
    HookFile(String),
}

/// One planted thing: where, what, and a sha256 of what Claude Code would run from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Planted {
    /// Its name in the baseline: the path, and for MCP servers the place in the file.
    pub key: String,
    pub path: PathBuf,
    pub what: What,
    pub sha256: String,
}

impl Planted {
    /// The path, and the place in the file when it is not the whole file.
    fn place(&self) -> String {
        match &self.what {
            What::Mcp {
                scope: Some(scope), ..
            } => format!("{} ({scope})", self.path.display()),
            _ => self.path.display().to_string(),
        }
    }

    /// What it is, as the doctor names it: `an agent whose frontmatter has hooks:`.
    pub(crate) fn what(&self) -> String {
        match &self.what {
            What::Hooks(kind) => format!("{} whose frontmatter has hooks:", kind.one()),
            What::Unparsed(kind, why) => format!(
                "{} whose frontmatter does not parse as YAML ({why})",
                kind.one()
            ),
            What::PluginHooks => "plugin hooks".to_string(),
            What::Mcp { servers, .. } if servers.len() == 1 => {
                format!("the MCP server {}", servers[0])
            }
            What::Mcp { servers, .. } => format!("the MCP servers {}", servers.join(", ")),
            What::HookFile(event) => format!("a file your own {event} hook runs"),
            What::Nested(name) => match name.as_str() {
                ".git" => "a repository below the project's top".to_string(),
                ".mcp.json" => "MCP servers below the project's top".to_string(),
                ".vscode" | ".idea" => "an editor's folder below the project's top".to_string(),
                _ => format!("a {name} folder below the project's top"),
            },
        }
    }

    /// When it runs, and with what rights: why the human should look.
    fn runs(&self) -> String {
        match &self.what {
            What::Hooks(kind) => format!(
                "Claude Code runs those hooks with your rights, outside the sandbox, whenever the {} is used",
                kind.name()
            ),
            What::Unparsed(..) => "it may hide hooks:, which would run with your rights, outside the sandbox".to_string(),
            What::PluginHooks => "Claude Code runs them with your rights, outside the sandbox, while the plugin is enabled".to_string(),
            What::Mcp { .. } => "Claude Code starts each with your rights, outside the sandbox, once approved".to_string(),
            What::HookFile(event) => format!(
                "it runs with your rights at every {event}; `stop-gate confine -- …` runs the hook without them"
            ),
            What::Nested(name) => match name.as_str() {
                ".claude" => "a Claude Code session started in that folder runs its hooks, agents and MCP servers with your rights, outside the sandbox".to_string(),
                ".codex" => "Codex started in that folder runs its hooks with your rights, outside the sandbox".to_string(),
                ".mcp.json" => "a session started in that folder starts them with your rights, outside the sandbox".to_string(),
                ".git" => "git runs its hooks and the programs its configuration names with your rights when you work in it".to_string(),
                _ => "an editor opened on that folder runs its tasks with your rights".to_string(),
            },
        }
    }

    /// The doctor's line: a warning, or (`news`: not in the baseline) a failure saying so.
    pub(crate) fn finding(&self, news: Option<News>) -> Finding {
        // A file's name and what is in it are the agent's words: one line each, defanged, or
        // a newline in a name would end the headline there.
        let (place, what) = (defang::field(&self.place()), defang::field(&self.what()));
        match news {
            None => Finding::Warn(format!(
                "{}: {}; check it is yours\n{}",
                place,
                what,
                self.runs()
            )),
            Some(news) => Finding::Fail(format!(
                "{}: {} {} after vigil was installed with --protect; {}: check it is yours, then run ./install.sh --protect again to record it, or remove it",
                place,
                what,
                match news {
                    News::Appeared => "appeared",
                    News::Changed => "changed",
                },
                self.runs()
            )),
        }
    }
}

/// How a planted thing differs from the baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum News {
    /// Not there at all.
    Appeared,
    /// There, with other bytes.
    Changed,
}

/// What a scan found, and the walks it stopped early.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    pub found: Vec<Planted>,
    /// The directories a walk stopped in at `MAX_ENTRIES`.
    pub cut_short: Vec<PathBuf>,
    /// MCP files too large to read, whose servers are not known.
    pub too_large: Vec<PathBuf>,
}

/// Where the project's baseline is kept: its directory in the state home.
pub(crate) fn baseline_path(project: &Path) -> Option<PathBuf> {
    Some(protected::install_dir(project)?.join(BASELINE_FILE))
}

/// Records what is planted now for the project at `project` (`install --protect`): the
/// human vouches for it by installing, and the doctor fails on what comes after.
pub(crate) fn record_baseline(project: &Path, found: &[Planted]) -> crate::Result<PathBuf> {
    let dir = protected::made_install_dir(project).map_err(|e| {
        crate::Error::input(format!(
            "--protect cannot keep what is planted in the project in the state home: {}",
            error::plain_io(&e)
        ))
    })?;
    let path = dir.join(BASELINE_FILE);
    let planted: Vec<Value> = found
        .iter()
        .map(|p| match &p.what {
            // Named so a Stop can look at these alone, without reading the settings.
            What::HookFile(_) => json!({"key": p.key, "sha256": p.sha256, "kind": "hook-file"}),
            _ => json!({"key": p.key, "sha256": p.sha256}),
        })
        .collect();
    let mut bytes = serde_json::to_vec_pretty(&json!({
        "schema": BASELINE_SCHEMA,
        "planted": planted,
    }))
    .expect("JSON values serialize");
    bytes.push(b'\n');
    atomic::write_atomic(&path, &bytes, 0o600).map_err(|e| crate::Error::io("write", &path, &e))?;
    Ok(path)
}

/// The baseline as read: each key's sha256.
#[derive(Debug)]
pub(crate) enum Baseline {
    Missing,
    Unreadable(String),
    Found(BTreeMap<String, String>),
}

/// Reads a baseline, never through a symlink (vigil's own state file).
pub(crate) fn read_baseline(path: &Path) -> Baseline {
    let file = match files::open_state(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Baseline::Missing,
        Err(e) => return Baseline::Unreadable(error::plain_io(&e)),
    };
    let bytes = match files::read_capped(file, 64 << 20, "the baseline", path) {
        Ok(bytes) => bytes,
        Err(e) => return Baseline::Unreadable(e.to_string()),
    };
    let Ok(root) = serde_json::from_slice::<Value>(&bytes) else {
        return Baseline::Unreadable("not JSON".into());
    };
    if root.get("schema") != Some(&json!(BASELINE_SCHEMA)) {
        return Baseline::Unreadable(format!("not {BASELINE_SCHEMA}"));
    }
    let Some(list) = root.get("planted").and_then(Value::as_array) else {
        return Baseline::Unreadable("no list of what was planted".into());
    };
    let mut map = BTreeMap::new();
    for entry in list {
        match (
            entry.get("key").and_then(Value::as_str),
            entry.get("sha256").and_then(Value::as_str),
        ) {
            (Some(key), Some(sha)) => {
                map.insert(key.to_string(), sha.to_string());
            }
            _ => return Baseline::Unreadable("an entry without key or sha256".into()),
        }
    }
    Baseline::Found(map)
}

/// The doctor's lines for the project at `project`. `protected`: its install record says
/// `--protect` was applied.
pub(crate) fn findings(project: &Path, protected: bool) -> Vec<Finding> {
    let scan = scan_here(project);
    let mut findings = Vec::new();
    let baseline_path = baseline_path(project);
    let baseline = baseline_path
        .as_deref()
        .map_or(Baseline::Missing, read_baseline);
    let known: Option<BTreeMap<String, String>> = match baseline {
        Baseline::Found(map) => Some(map),
        Baseline::Unreadable(why) => {
            findings.push(Finding::Fail(format!(
                "{} (what was planted when vigil was installed with --protect) cannot be read: {why}; run ./install.sh --protect again to record what is there now",
                baseline_path.as_deref().unwrap_or(Path::new("")).display()
            )));
            Some(BTreeMap::new())
        }
        Baseline::Missing if protected => {
            findings.push(Finding::Warn(
                "no record of the hooks and agents there were at --protect; run ./install.sh --protect again\nvigil was installed with --protect before it kept a record of the agent, command, skill, plugin and MCP files there were, so one planted since is not told apart".into(),
            ));
            None
        }
        Baseline::Missing => None,
    };
    let mut told = 0;
    for planted in &scan.found {
        let news = known.as_ref().and_then(|known| news_of(known, planted));
        // A nested folder is told only when it is news since --protect, or (without a record)
        // when it is an engine's: a monorepo's repositories and editor folders are the norm.
        // The doctor's own-hooks line names the hook; its file is told here only as news.
        if matches!(planted.what, What::HookFile(_)) && news.is_none() {
            continue;
        }
        if let What::Nested(name) = &planted.what
            && news.is_none()
            && (known.is_some() || !matches!(name.as_str(), ".claude" | ".codex" | ".mcp.json"))
        {
            continue;
        }
        told += 1;
        findings.push(planted.finding(news));
    }
    for path in &scan.too_large {
        findings.push(Finding::Warn(format!(
            "{} is too large to check its MCP servers; check them with claude mcp list\nit is larger than {}",
            path.display(),
            files::human_bytes(MAX_JSON)
        )));
    }
    for dir in &scan.cut_short {
        findings.push(Finding::Warn(format!(
            "stopped looking in {} after {MAX_ENTRIES} entries; remove what is not needed there\na hook or agent file further in is not checked",
            dir.display()
        )));
    }
    if told == 0 && scan.cut_short.is_empty() && scan.too_large.is_empty() {
        findings.push(Finding::Ok(
            "no planted code: no agent, command or skill with hooks:, no plugin hooks, no MCP servers".into(),
        ));
    }
    findings
}

/// How `planted` differs from the baseline `known`, if it does.
fn news_of(known: &BTreeMap<String, String>, planted: &Planted) -> Option<News> {
    match known.get(&planted.key) {
        None => Some(News::Appeared),
        Some(sha) if *sha != planted.sha256 => Some(News::Changed),
        Some(_) => None,
    }
}

/// What a Stop tells the person, where `install --protect` recorded a baseline: each file one
/// of the user's own hooks runs whose bytes changed (the hook runs it with the user's rights),
/// and each read-only name below the top that appeared or changed (a `.claude/` the sandboxed
/// shell made, which no rule forbids before it exists: told at the Stop that follows, before a
/// session starts there). One read of the baseline, one walk below the top; nothing without a
/// baseline, so an unprotected Stop pays for neither.
pub(crate) fn at_stop(project: &Path) -> Vec<String> {
    let Some(path) = baseline_path(project) else {
        return Vec::new();
    };
    let Ok(file) = files::open_state(&path) else {
        return Vec::new();
    };
    let Ok(bytes) = files::read_capped(file, 64 << 20, "the baseline", &path) else {
        return Vec::new();
    };
    let Ok(root) = serde_json::from_slice::<Value>(&bytes) else {
        return Vec::new();
    };
    let entries = root.get("planted").and_then(Value::as_array);
    let mut known = BTreeMap::new();
    let mut told = Vec::new();
    for entry in entries.into_iter().flatten() {
        let (Some(key), Some(recorded)) = (
            entry.get("key").and_then(Value::as_str),
            entry.get("sha256").and_then(Value::as_str),
        ) else {
            continue;
        };
        known.insert(key.to_string(), recorded.to_string());
        if entry.get("kind").and_then(Value::as_str) == Some("hook-file")
            && scan::file_digest(Path::new(key)) != recorded
        {
            told.push(format!(
                "vigil: {}, which one of your own hooks runs with your rights, changed after vigil was installed with --protect; check it, or run the hook as `stop-gate confine -- …` (`settings-merge check` names it)",
                defang::field(key)
            ));
        }
    }
    told.extend(scan::nested(project).iter().filter_map(|planted| {
        Some(format!(
            "vigil: {}",
            news_line(planted, news_of(&known, planted)?)
        ))
    }));
    if told.len() > MAX_AT_STOP {
        let more = told.len() - MAX_AT_STOP;
        told.truncate(MAX_AT_STOP);
        told.push(format!(
            "vigil: and {more} more planted since vigil was installed with --protect; `settings-merge check` names each"
        ));
    }
    told
}

/// The most lines of planted code a Stop tells the person.
const MAX_AT_STOP: usize = 10;

/// One line of planted code new since the baseline, defanged.
fn news_line(planted: &Planted, news: News) -> String {
    format!(
        "{}: {} {} after vigil was installed with --protect; {}",
        defang::field(&planted.place()),
        planted.what(),
        match news {
            News::Appeared => "appeared",
            News::Changed => "changed",
        },
        planted.runs()
    )
}

/// Planted code that appeared or changed since `install --protect` recorded the baseline (an
/// agent with `hooks:`, MCP servers, a `.claude/` or repository below the top, a file one of the
/// user's hooks runs), each in one line (defanged); nothing without a baseline.
pub(crate) fn news(project: &Path) -> Vec<String> {
    let Some(path) = baseline_path(project) else {
        return Vec::new();
    };
    let Baseline::Found(known) = read_baseline(&path) else {
        return Vec::new();
    };
    scan_here(project)
        .found
        .iter()
        .filter_map(|planted| Some(news_line(planted, news_of(&known, planted)?)))
        .collect()
}

/// What the person and the model hear of planted code at a session start: the `news`, and
/// what a confined check made below the top that is still there (`reach::confine::left_behind`),
/// each one line.
pub(crate) fn told(project: &crate::state::project::Project) -> Vec<String> {
    news(&project.dir)
        .into_iter()
        .chain(
            crate::reach::confine::left_behind(&project.protected().dir)
                .iter()
                .map(|path| {
                    format!(
                        "{}, which a confined check made, is still there: the engine or git would run it with your rights; remove it (no check passes while it is there)",
                        defang::field(&path.display().to_string())
                    )
                }),
        )
        .collect()
}

/// Where a session's end keeps the planted code it saw: beside the baseline, in the state
/// home, out of the agent's reach (a handoff record in `.vigil/` is the agent's to write).
const AT_END_FILE: &str = "planted-at-end.json";
/// The most lines a session's end keeps, and the most characters of each.
const MAX_AT_END: usize = 20;
const MAX_AT_END_LINE: usize = 1000;

/// SessionEnd: keeps `lines` (what `told` says as session `session` ends) beside the baseline,
/// for the next start to tell what is gone since (it may have run in between). Only where a
/// protected install keeps a baseline; nothing is written for no lines. One write that does not
/// wait for the disk (a handoff's, P6): a lost one only loses the "gone since" line.
pub(crate) fn keep_at_end(project: &Path, session: &str, lines: &[String]) -> crate::Result<()> {
    let Some(baseline) = baseline_path(project).filter(|path| path.is_file()) else {
        return Ok(());
    };
    if lines.is_empty() {
        return Ok(());
    }
    let path = baseline.with_file_name(AT_END_FILE);
    let lines: Vec<String> = lines
        .iter()
        .take(MAX_AT_END)
        .map(|line| defang::field_max(line, MAX_AT_END_LINE))
        .collect();
    let bytes = serde_json::to_vec(&json!({"session": session, "planted": lines}))
        .expect("JSON values serialize");
    atomic::write_atomic_as(&path, &bytes, 0o600, atomic::Durability::Skip)
        .map_err(|e| crate::Error::io("write", &path, &e))
}

/// SessionStart: the lines a session's end kept that are not among `now` (removed since, or
/// taken into the baseline by an install: either way it may have run), each saying which
/// session's end named it; the kept lines are then let go, so each is told once.
pub(crate) fn gone_since_end(project: &Path, now: &[String]) -> Vec<String> {
    let Some(path) = baseline_path(project).map(|b| b.with_file_name(AT_END_FILE)) else {
        return Vec::new();
    };
    let Ok(file) = files::open_state(&path) else {
        return Vec::new();
    };
    let kept = files::read_capped(file, 1 << 20, "the planted code kept at the end", &path)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok());
    let _ = std::fs::remove_file(&path);
    let Some(kept) = kept else {
        return Vec::new();
    };
    let session = defang::field(kept.get("session").and_then(Value::as_str).unwrap_or("?"));
    kept.get("planted")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .take(MAX_AT_END)
        .map(|line| defang::field_max(line, MAX_AT_END_LINE))
        .filter(|line| !now.contains(line))
        .map(|line| {
            format!(
                "{line} (named when session {session} ended, and not now: removed since, or taken in by an install; it may have run already)"
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planted_lines_name_the_file_and_the_servers() {
        let planted = Planted {
            key: "/h/.claude.json#mcpServers".into(),
            path: PathBuf::from("/h/.claude.json"),
            what: What::Mcp {
                servers: vec!["a".into(), "b".into()],
                scope: None,
            },
            sha256: String::new(),
        };
        let Finding::Warn(line) = planted.finding(None) else {
            panic!()
        };
        assert!(
            line.starts_with("/h/.claude.json: the MCP servers a, b;"),
            "{line}"
        );
        let Finding::Fail(line) = planted.finding(Some(News::Appeared)) else {
            panic!()
        };
        assert!(line.contains("appeared after vigil was installed with --protect"));
    }
}
