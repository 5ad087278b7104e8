//! Finding planted code: the walks of the project's and the user's `.claude/` (agents,
//! commands, skills, plugins), bounded, and the MCP servers of `.mcp.json` and `~/.claude.json`.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::frontmatter::frontmatter_has_hooks;
use super::{Kind, MAX_ENTRIES, MAX_JSON, Planted, Scan, What};
use crate::cli::flags::BINARIES;
use crate::state::protected;
use crate::sys::digest::sha256_hex;
use crate::sys::files;
use crate::sys::paths;

/// How deep a walk goes below the directory it starts from: a plugin's hooks are at
/// `plugins/cache/<marketplace>/<plugin>/<version>/hooks/hooks.json`, six levels down.
const MAX_DEPTH: usize = 6;
/// An agent, command or skill file larger than this is not read; it is named instead.
const MAX_MARKDOWN: u64 = 1 << 20;

/// `scan` with the user's home (`sys::user::home`) and an absolute `$CLAUDE_CONFIG_DIR`.
pub(crate) fn scan_here(project: &Path) -> Scan {
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
pub(crate) fn scan(project: &Path, home: Option<&Path>, config_dir: Option<&Path>) -> Scan {
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
    // Not for the user's own settings, whose "project" is the home directory.
    if home.is_none_or(|home| paths::canonical(home) != paths::canonical(project)) {
        scan.found.extend(nested(project));
        for (path, event) in super::hooks::files_run(project) {
            scan.found.push(Planted {
                key: path.display().to_string(),
                sha256: file_digest(&path),
                path,
                what: What::HookFile(event),
            });
        }
    }
    scan.found.sort_by(|a, b| a.key.cmp(&b.key));
    scan.found.dedup_by(|a, b| a.key == b.key);
    scan
}

/// A file's sha256 as the baseline records it (of its first MiB; empty when it cannot be read).
pub(crate) fn file_digest(path: &Path) -> String {
    read_prefix(path, MAX_MARKDOWN)
        .map(|(bytes, _)| sha256_hex(&bytes))
        .unwrap_or_default()
}

/// The most bytes the nested names' digests read in all, and the most names read at all:
/// what is past them is known by its names and sizes, or its presence, alone. The agent's
/// shell makes folders in moments; every Stop of a protected install reads them.
const NESTED_BYTES: u64 = 32 << 20;
const MAX_NESTED: usize = 256;

/// The read-only names below the project's top (`reach::nested`), each with a sha256 of what
/// would run from it: an engine folder's files, a repository's configuration and hooks (not
/// its index or objects, which change with every commit), an `.mcp.json`'s bytes; an editor's
/// folder by its presence alone (editors rewrite their own files all the time). No link is
/// followed (a link is known by where it points), and the reading is bounded
/// ([`NESTED_BYTES`], [`MAX_NESTED`]).
pub(crate) fn nested(project: &Path) -> Vec<Planted> {
    let mut budget = NESTED_BYTES;
    let is_dir = |path: &Path| std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
    crate::reach::nested::walk(project)
        .entries
        .into_iter()
        .enumerate()
        .map(|(at, (path, _))| {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().to_ascii_lowercase())
                .unwrap_or_default();
            let mut parts: Vec<PathBuf> = Vec::new();
            match name.as_str() {
                _ if at >= MAX_NESTED => {}
                ".vscode" | ".idea" => {}
                ".git" => {
                    let git_dir = if is_dir(&path) {
                        Some(path.clone())
                    } else {
                        parts.push(path.clone());
                        crate::sys::git::gitdir_of(&path)
                            .map(|named| path.parent().unwrap_or(&path).join(named))
                    };
                    if let Some(git_dir) = git_dir {
                        parts.push(git_dir.join("config"));
                        let hooks = git_dir.join("hooks");
                        if is_dir(&hooks) {
                            parts.extend(walk(&hooks, false, |_| true).0);
                        } else {
                            parts.push(hooks);
                        }
                    }
                }
                _ if is_dir(&path) => parts.extend(walk(&path, false, |_| true).0),
                _ => parts.push(path.clone()),
            }
            let mut bytes = Vec::new();
            for part in &parts {
                bytes.extend_from_slice(
                    part.strip_prefix(&path)
                        .unwrap_or(part)
                        .to_string_lossy()
                        .as_bytes(),
                );
                bytes.push(0);
                match std::fs::symlink_metadata(part) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        if let Ok(to) = std::fs::read_link(part) {
                            bytes.extend_from_slice(b"-> ");
                            bytes.extend_from_slice(to.to_string_lossy().as_bytes());
                        }
                    }
                    Ok(meta) if budget == 0 => {
                        bytes.extend_from_slice(format!("{} bytes", meta.len()).as_bytes());
                    }
                    Ok(_) => {
                        if let Some((content, _)) = read_prefix(part, MAX_MARKDOWN.min(budget)) {
                            budget = budget.saturating_sub(content.len() as u64);
                            bytes.extend_from_slice(&sha256_hex(&content).into_bytes());
                        }
                    }
                    Err(_) => {}
                }
                bytes.push(0);
            }
            Planted {
                key: path.display().to_string(),
                path,
                what: What::Nested(name),
                sha256: sha256_hex(&bytes),
            }
        })
        .collect()
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
