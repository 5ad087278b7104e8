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

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::cli::flags::BINARIES;
use crate::error;
use crate::install::finding::Finding;
use crate::state::protected;
use crate::sys::atomic;
use crate::sys::digest::sha256_hex;
use crate::sys::files;
use crate::sys::paths;
use crate::verdict::defang;

/// The file in the project's protected state that holds the baseline.
pub const BASELINE_FILE: &str = "planted-baseline.json";
pub const BASELINE_SCHEMA: &str = "vigil.planted-baseline/v1";

/// How deep a walk goes below the directory it starts from: a plugin's hooks are at
/// `plugins/cache/<marketplace>/<plugin>/<version>/hooks/hooks.json`, six levels down.
const MAX_DEPTH: usize = 6;
/// How many directory entries one walk looks at before it stops (and says so): a marketplace
/// is a whole clone, and the doctor must answer in moments.
pub const MAX_ENTRIES: usize = 10_000;
/// An agent, command or skill file larger than this is not read; it is named instead.
const MAX_MARKDOWN: u64 = 1 << 20;
/// `~/.claude.json` keeps every project's history, and grows.
const MAX_JSON: u64 = 64 << 20;

/// Which kind of Markdown file Claude Code reads the frontmatter of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
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
pub enum What {
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
}

/// One planted thing: where, what, and a sha256 of what Claude Code would run from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planted {
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
    pub fn what(&self) -> String {
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
        }
    }

    /// The doctor's line: a warning, or (`news`: not in the baseline) a failure saying so.
    pub fn finding(&self, news: Option<News>) -> Finding {
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
pub enum News {
    /// Not there at all.
    Appeared,
    /// There, with other bytes.
    Changed,
}

/// What a scan found, and the walks it stopped early.
#[derive(Debug, Default)]
pub struct Scan {
    pub found: Vec<Planted>,
    /// The directories a walk stopped in at `MAX_ENTRIES`.
    pub cut_short: Vec<PathBuf>,
    /// MCP files too large to read, whose servers are not known.
    pub too_large: Vec<PathBuf>,
}

/// `scan` with the user's home (`sys::user::home`) and an absolute `$CLAUDE_CONFIG_DIR`.
pub fn scan_here(project: &Path) -> Scan {
    let config_dir = std::env::var_os("CLAUDE_CONFIG_DIR")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute());
    scan(
        project,
        crate::sys::user::home().as_deref(),
        config_dir.as_deref(),
    )
}

/// Everything planted that Claude Code would run for the project at `project`, with the user's
/// home `home` and (when set) its config directory `config_dir`, in the order of their keys.
pub fn scan(project: &Path, home: Option<&Path>, config_dir: Option<&Path>) -> Scan {
    let mut scan = Scan::default();
    // The project's `.claude/` and the user's: each once, whatever its spelling (the user's
    // own settings have the home as their project).
    let mut claude_dirs: Vec<PathBuf> = vec![project.join(".claude")];
    let mut user_dirs: Vec<PathBuf> = Vec::new();
    user_dirs.extend(home.map(|home| home.join(".claude")));
    user_dirs.extend(config_dir.map(Path::to_path_buf));
    claude_dirs.extend(user_dirs.iter().cloned());
    paths::dedup_canonical(&mut claude_dirs);
    paths::dedup_canonical(&mut user_dirs);
    for dir in &claude_dirs {
        for (sub, kind) in [("agents", Kind::Agent), ("commands", Kind::Command)] {
            let root = dir.join(sub);
            let (files, cut) = walk(&root, true, |name| name.ends_with(".md"));
            if cut {
                scan.cut_short.push(root);
            }
            for file in files {
                scan.found.extend(markdown(&file, kind));
            }
        }
        let (skills, cut) = skill_files(&dir.join("skills"));
        if cut {
            scan.cut_short.push(dir.join("skills"));
        }
        for file in skills {
            scan.found.extend(markdown(&file, Kind::Skill));
        }
    }
    // Plugins live in the user's directory only; a project enables them, never holds them.
    for dir in &user_dirs {
        let root = dir.join("plugins");
        let (files, cut) = walk(&root, false, |name| name == "hooks.json");
        if cut {
            scan.cut_short.push(root);
        }
        for file in files {
            scan.found.extend(plugin_hooks(&file));
        }
    }
    let mcp = project.join(".mcp.json");
    match read_prefix(&mcp, MAX_JSON) {
        Some((_, true)) => scan.too_large.push(mcp),
        Some((bytes, false)) => scan.found.extend(mcp_json(&mcp, &bytes)),
        None => {}
    }
    let mut configs: Vec<PathBuf> = Vec::new();
    configs.extend(home.map(|home| home.join(".claude.json")));
    configs.extend(config_dir.map(|dir| dir.join(".claude.json")));
    paths::dedup_canonical(&mut configs);
    let top = protected::state_top(project);
    for config in configs {
        match read_prefix(&config, MAX_JSON) {
            Some((_, true)) => scan.too_large.push(config),
            Some((bytes, false)) => scan.found.extend(claude_json(&config, &bytes, &top)),
            None => {}
        }
    }
    scan.found.sort_by(|a, b| a.key.cmp(&b.key));
    scan.found.dedup_by(|a, b| a.key == b.key);
    scan
}

/// The files below `root` whose names `wanted` takes, at most `MAX_DEPTH` levels down, from
/// at most `MAX_ENTRIES` entries (the bool: it stopped there). A symlinked directory is walked
/// into only with `follow` (Claude Code follows them in agents and commands; the depth and
/// the count bound a loop); a symlink with a wanted name is returned either way, for its
/// reader to open. `.git` is never walked: nothing is loaded from it.
fn walk(root: &Path, follow: bool, wanted: impl Fn(&str) -> bool) -> (Vec<PathBuf>, bool) {
    let mut found = Vec::new();
    if !std::fs::metadata(root).is_ok_and(|meta| meta.is_dir()) {
        return (found, false);
    }
    let mut seen = 0;
    let mut stack = vec![(root.to_path_buf(), 1)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_ENTRIES {
                found.sort();
                return (found, true);
            }
            let path = entry.path();
            let Ok(mut kind) = entry.file_type() else {
                continue;
            };
            if kind.is_symlink() && follow {
                match std::fs::metadata(&path) {
                    Ok(meta) => kind = meta.file_type(),
                    Err(_) => continue,
                }
            }
            let name = entry.file_name();
            if kind.is_dir() {
                if depth < MAX_DEPTH && name != ".git" {
                    stack.push((path, depth + 1));
                }
            } else if wanted(&name.to_string_lossy()) {
                found.push(path);
            }
        }
    }
    found.sort();
    (found, false)
}

/// `skills/*/SKILL.md`: one level, as Claude Code reads skills.
fn skill_files(root: &Path) -> (Vec<PathBuf>, bool) {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(root) else {
        return (found, false);
    };
    for (n, entry) in entries.flatten().enumerate() {
        if n >= MAX_ENTRIES {
            found.sort();
            return (found, true);
        }
        let file = entry.path().join("SKILL.md");
        if std::fs::symlink_metadata(&file).is_ok() {
            found.push(file);
        }
    }
    found.sort();
    (found, false)
}

/// Up to `cap` bytes of a regular file (opened without blocking), and whether there was more;
/// `None` when it cannot be read (Claude Code, with the same rights, cannot read it either).
fn read_prefix(path: &Path, cap: u64) -> Option<(Vec<u8>, bool)> {
    let file = files::open_regular(path).ok()?;
    let mut bytes = Vec::new();
    file.take(cap + 1).read_to_end(&mut bytes).ok()?;
    let more = bytes.len() as u64 > cap;
    bytes.truncate(cap as usize);
    Some((bytes, more))
}

/// An agent, command or skill file, when its frontmatter has hooks or cannot be read.
fn markdown(path: &Path, kind: Kind) -> Option<Planted> {
    let (bytes, more) = read_prefix(path, MAX_MARKDOWN)?;
    let what = if more {
        What::Unparsed(
            kind,
            format!("larger than {}, not read", files::human_bytes(MAX_MARKDOWN)),
        )
    } else {
        match std::str::from_utf8(&bytes) {
            Err(e) => What::Unparsed(kind, format!("not UTF-8 at byte {}", e.valid_up_to())),
            Ok(text) => match frontmatter_has_hooks(text) {
                Ok(false) => return None,
                Ok(true) => What::Hooks(kind),
                Err(why) => What::Unparsed(kind, why),
            },
        }
    };
    Some(Planted {
        key: path.display().to_string(),
        path: path.to_path_buf(),
        what,
        sha256: sha256_hex(&bytes),
    })
}

/// A plugin's hooks file, unless it is vigil's own.
fn plugin_hooks(path: &Path) -> Option<Planted> {
    let (bytes, more) = read_prefix(path, MAX_JSON)?;
    if !more
        && let Ok(root) = serde_json::from_slice::<Value>(&bytes)
        && vigils_own(path, &root)
    {
        return None;
    }
    Some(Planted {
        key: path.display().to_string(),
        path: path.to_path_buf(),
        what: What::PluginHooks,
        sha256: sha256_hex(&bytes),
    })
}

/// Whether a plugin's `hooks.json` is vigil's: `<plugin>/hooks/hooks.json` of a plugin whose
/// manifest names vigil, every handler a command that runs one of vigil's binaries the way
/// the plugin's own file does (`hooks/vigil-run --install BINARY` from the plugin, or
/// `BINARY` from the plugin's data directory), and nothing else.
fn vigils_own(path: &Path, root: &Value) -> bool {
    let Some(plugin) = path
        .parent()
        .filter(|dir| dir.file_name().is_some_and(|name| name == "hooks"))
        .and_then(Path::parent)
    else {
        return false;
    };
    let manifest = plugin.join(".claude-plugin/plugin.json");
    let named_vigil = read_prefix(&manifest, MAX_MARKDOWN)
        .and_then(|(bytes, _)| serde_json::from_slice::<Value>(&bytes).ok())
        .is_some_and(|manifest| manifest.get("name") == Some(&json!("vigil")));
    if !named_vigil {
        return false;
    }
    let is_binary = |word: &str| BINARIES.contains(&word);
    let ours = |handler: &Value| {
        let args: Vec<&str> = match handler.get("args") {
            None => Vec::new(),
            Some(Value::Array(args)) => match args.iter().map(Value::as_str).collect() {
                Some(args) => args,
                None => return false,
            },
            Some(_) => return false,
        };
        if handler.get("type") != Some(&json!("command")) {
            return false;
        }
        let Some(command) = handler.get("command").and_then(Value::as_str) else {
            return false;
        };
        if command == "${CLAUDE_PLUGIN_ROOT}/hooks/vigil-run" {
            // The launcher's own flags (`--data`, `--to`) would send it elsewhere.
            return args.len() >= 2 && args[0] == "--install" && is_binary(args[1]);
        }
        let Some(rest) = command.strip_prefix("${CLAUDE_PLUGIN_DATA}/") else {
            return false;
        };
        let parts: Vec<&str> = rest.split('/').collect();
        matches!(parts.as_slice(), [version, "bin", binary]
            if !version.is_empty()
                && version.chars().all(|c| c.is_ascii_alphanumeric() || ".-+".contains(c))
                && is_binary(binary))
    };
    let Some(hooks) = root.get("hooks").and_then(Value::as_object) else {
        return false;
    };
    let mut handlers = 0;
    for groups in hooks.values() {
        let Some(groups) = groups.as_array() else {
            return false;
        };
        for group in groups {
            let Some(list) = group.get("hooks").and_then(Value::as_array) else {
                return false;
            };
            for handler in list {
                if !ours(handler) {
                    return false;
                }
                handlers += 1;
            }
        }
    }
    handlers > 0
}

/// The project's `.mcp.json` (its bytes), when it names servers. What is hashed is the
/// servers as Claude Code reads them: what else the file says, or how it is spaced, changes
/// nothing that runs.
fn mcp_json(path: &Path, bytes: &[u8]) -> Option<Planted> {
    let root: Value = serde_json::from_slice(bytes).ok()?;
    servers(
        path,
        path.display().to_string(),
        None,
        root.get("mcpServers")?,
    )
}

/// The MCP servers of `~/.claude.json`: the user's (every project's), and those of the
/// projects at or below `top` (Claude Code keys them by the directory it started in). The
/// file changes with every session, so only the servers are hashed.
fn claude_json(path: &Path, bytes: &[u8], top: &Path) -> Vec<Planted> {
    let mut found = Vec::new();
    let Ok(root) = serde_json::from_slice::<Value>(bytes) else {
        return found;
    };
    let shown = path.display().to_string();
    if let Some(value) = root.get("mcpServers") {
        found.extend(servers(path, format!("{shown}#mcpServers"), None, value));
    }
    if let Some(projects) = root.get("projects").and_then(Value::as_object) {
        for (dir, project) in projects {
            let Some(value) = project.get("mcpServers") else {
                continue;
            };
            let dir_path = Path::new(dir);
            if dir_path.is_absolute() && paths::canonical(dir_path).starts_with(top) {
                let scope = format!("projects[{}].mcpServers", json!(dir));
                found.extend(servers(
                    path,
                    format!("{shown}#{scope}"),
                    Some(scope),
                    value,
                ));
            }
        }
    }
    found
}

/// A non-empty `mcpServers` object, as one planted thing.
fn servers(path: &Path, key: String, scope: Option<String>, value: &Value) -> Option<Planted> {
    let servers = value.as_object().filter(|servers| !servers.is_empty())?;
    Some(Planted {
        key,
        path: path.to_path_buf(),
        what: What::Mcp {
            servers: servers.keys().cloned().collect(),
            scope,
        },
        sha256: sha256_hex(value.to_string().as_bytes()),
    })
}

/// Whether a Markdown file's YAML frontmatter has a top-level `hooks` key; `Err` says why that
/// cannot be told. A file that does not start with a `---` line has no frontmatter; one whose
/// frontmatter never closes is read to its end (a reader that takes it whole must not find
/// more than this one). The frontmatter is read by a YAML parser (yaml-rust2); one that uses an
/// alias is refused before it is loaded, since the loader copies what an alias names and a
/// few lines of them grow without bound.
pub fn frontmatter_has_hooks(text: &str) -> Result<bool, String> {
    use yaml_rust2::parser::{Event, EventReceiver, Parser};
    use yaml_rust2::{Yaml, YamlLoader};
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text
        .split('\n')
        .map(|line| line.strip_suffix('\r').unwrap_or(line));
    let opening = loop {
        match lines.next() {
            None => return Ok(false),
            Some(line) if line.trim().is_empty() => continue,
            Some(line) => break line,
        }
    };
    if !opening.starts_with("---") {
        return Ok(false);
    }
    if opening.trim_end() != "---" {
        return Err(format!("its first line is `{}`, not `---`", clip(opening)));
    }
    let yaml: Vec<&str> = lines.take_while(|line| line.trim_end() != "---").collect();
    let yaml = yaml.join("\n");

    struct Aliases(bool);
    impl EventReceiver for Aliases {
        fn on_event(&mut self, event: Event) {
            self.0 |= matches!(event, Event::Alias(_));
        }
    }
    let mut aliases = Aliases(false);
    Parser::new_from_str(&yaml)
        .load(&mut aliases, true)
        .map_err(|e| e.to_string())?;
    if aliases.0 {
        return Err("it uses an alias (*), which can stand for hooks".to_string());
    }
    let docs = YamlLoader::load_from_str(&yaml).map_err(|e| e.to_string())?;
    if docs.len() > 1 {
        return Err("it holds more than one YAML document".to_string());
    }
    let hooks = Yaml::String("hooks".to_string());
    Ok(docs
        .first()
        .is_some_and(|doc| matches!(doc, Yaml::Hash(map) if map.contains_key(&hooks))))
}

/// A line, cut to fit in a message.
fn clip(line: &str) -> String {
    let cut: String = line.chars().take(40).collect();
    if cut.len() < line.len() {
        format!("{cut}…")
    } else {
        cut
    }
}

/// Where the project's baseline is kept: its directory in the state home.
pub fn baseline_path(project: &Path) -> Option<PathBuf> {
    Some(protected::install_dir(project)?.join(BASELINE_FILE))
}

/// Records what is planted now for the project at `project` (`install --protect`): the
/// human vouches for it by installing, and the doctor fails on what comes after.
pub fn record_baseline(project: &Path, found: &[Planted]) -> crate::Result<PathBuf> {
    let dir = protected::made_install_dir(project).map_err(|e| {
        crate::Error::input(format!(
            "--protect cannot keep what is planted in the project in the state home: {}",
            error::plain_io(&e)
        ))
    })?;
    let path = dir.join(BASELINE_FILE);
    let planted: Vec<Value> = found
        .iter()
        .map(|p| json!({"key": p.key, "sha256": p.sha256}))
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
pub enum Baseline {
    Missing,
    Unreadable(String),
    Found(BTreeMap<String, String>),
}

/// Reads a baseline, never through a symlink (vigil's own state file).
pub fn read_baseline(path: &Path) -> Baseline {
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
pub fn findings(project: &Path, protected: bool) -> Vec<Finding> {
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
    for planted in &scan.found {
        let news = known
            .as_ref()
            .and_then(|known| match known.get(&planted.key) {
                None => Some(News::Appeared),
                Some(sha) if *sha != planted.sha256 => Some(News::Changed),
                Some(_) => None,
            });
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
    if scan.found.is_empty() && scan.cut_short.is_empty() && scan.too_large.is_empty() {
        findings.push(Finding::Ok(
            "no planted code: no agent, command or skill with hooks:, no plugin hooks, no MCP servers".into(),
        ));
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hooks(text: &str) -> Result<bool, String> {
        frontmatter_has_hooks(text)
    }

    #[test]
    fn a_top_level_hooks_key_is_found_in_every_spelling() {
        for text in [
            "---\nname: x\nhooks:\n  Stop: []\n---\nbody\n",
            "---\r\nhooks: {}\r\n---\r\n",
            "\u{feff}---\nhooks:\n---\n",
            "---\n\"hooks\": 1\n---\n",
            "---\n'hooks' : 1\n---\n",
            "---\nhooks   : 1\n---\n",
            "---\nhooks: 1\n",
            "\n\n---\nhooks: 1\n---\n",
        ] {
            assert_eq!(hooks(text), Ok(true), "{text:?}");
        }
    }

    #[test]
    fn nested_or_absent_hooks_are_not_top_level() {
        for text in [
            "no frontmatter\nhooks: 1\n",
            "---\nname: x\n---\nhooks: 1\n",
            "---\nname: x\nmeta:\n  hooks: 1\n---\n",
            "---\ndescription: |\n  hooks: 1\n---\n",
            "---\nhooksy: 1\n# hooks: 1\n---\n",
            "---\nurl: http://x\n---\n",
        ] {
            assert_eq!(hooks(text), Ok(false), "{text:?}");
        }
    }

    #[test]
    fn what_could_hide_a_key_is_refused() {
        for text in [
            // An alias stands for what its anchor holds, and loading it copies that.
            "---\nbase: &a {hooks: 1}\nother: *a\n---\n",
            "---\nname: [unclosed\n---\n",
            "---\na: b: c\n---\n",
            "---yaml\nhooks: 1\n---\n",
            "---\nname: x\n...\nhooks: 1\n---\n",
        ] {
            assert!(hooks(text).is_err(), "{text:?}: {:?}", hooks(text));
        }
        // What a parser reads as a top-level hooks key, however it is written.
        for text in [
            "---\n{hooks: 1}\n---\n",
            "---\n? hooks\n: 1\n---\n",
            "---\n!!str hooks: 1\n---\n",
            "---\n\"ho\\x6fks\": 1\n---\n",
        ] {
            assert_eq!(hooks(text), Ok(true), "{text:?}");
        }
    }

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
