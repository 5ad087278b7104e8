//! Merging vigil's hooks into Claude Code settings and Codex `hooks.json` (SPEC §8) without
//! ever losing what the user has: every other key, hook and entry is kept, in order; a file
//! that does not parse is refused and left as it is; the original is backed up before the
//! first change; what was added is recorded, so uninstall removes exactly that, or restores
//! the original byte for byte when nothing else changed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::atomic::write_atomic;
pub use crate::cli::shell_quote;
use crate::error::{Error, Result};
use crate::lock::FileLock;
use crate::subject::sha256_hex;

pub const INSTALLED_SCHEMA: &str = "vigil.installed/v1";
/// The binaries a vigil entry runs; a handler naming one of them is vigil's.
pub const BINARIES: [&str; 3] = ["stop-gate", "session-start-loader", "session-end-handoff"];
/// A check command gets this long; the Stop hook's own timeout is set above it.
const HOOK_TIMEOUT_SECS: u64 = 600;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Claude,
    Codex,
}

/// Where the commands find vigil's binaries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Binaries {
    /// Absolute paths in this directory: for files only this machine reads.
    Dir(PathBuf),
    /// Found through PATH and the usual install places when the hook runs: for settings that
    /// are committed and shared, where every machine installs vigil somewhere else.
    Search,
}

/// What to install.
#[derive(Clone, Debug)]
pub struct Plan {
    pub engine: Engine,
    pub binaries: Binaries,
    /// What to change in the Stop handler's stop-gate flags (`--run`, `--require-marker`…);
    /// what it does not name stays as the settings file has it.
    pub gate: crate::gateflags::Changes,
    /// `--protect` (Claude Code): the sandbox on, and the Edit and Write tools denied vigil's
    /// state, binaries and settings (what `protect::Guarded` lists).
    pub protect: Option<crate::protect::Guarded>,
}

/// One hook group vigil adds to one event.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub event: &'static str,
    pub group: Value,
}

/// The entries of a plan (SPEC §8's default set), the Stop handler's stop-gate with `gate`.
pub fn entries(plan: &Plan, gate: &crate::gateflags::GateFlags) -> Vec<Entry> {
    let stop_args: String = gate
        .words()
        .iter()
        .map(|word| format!(" {}", shell_quote(word)))
        .collect();
    // The handler's timeout stays above the gate's deadline (SPEC §9): 600 s, the engines'
    // default, written out once the gate has a check to run; more for a later deadline.
    let handler_timeout = gate
        .deadline()
        .map(|d| (d + 30).max(HOOK_TIMEOUT_SECS))
        .or(gate.has_run().then_some(HOOK_TIMEOUT_SECS));
    let handler = |binary: &str, args: &str| {
        let mut handler =
            json!({"type": "command", "command": command(&plan.binaries, binary, args)});
        if binary == "stop-gate"
            && !args.is_empty()
            && let Some(timeout) = handler_timeout
        {
            handler["timeout"] = json!(timeout);
        }
        handler
    };
    let group = |handlers: Vec<Value>| json!({ "hooks": handlers });
    match plan.engine {
        Engine::Claude => vec![
            Entry {
                event: "Stop",
                group: group(vec![handler("stop-gate", &stop_args)]),
            },
            Entry {
                event: "SessionStart",
                group: group(vec![handler("session-start-loader", "")]),
            },
            Entry {
                event: "SessionEnd",
                group: group(vec![handler("session-end-handoff", "")]),
            },
            Entry {
                event: "PreCompact",
                group: group(vec![handler("session-end-handoff", " --checkpoint")]),
            },
            // The human's /vigil-loop and /vigil-cancel, read from the prompt as typed.
            Entry {
                event: "UserPromptSubmit",
                group: group(vec![handler("stop-gate", "")]),
            },
        ],
        Engine::Codex => vec![
            Entry {
                event: "Stop",
                group: group(vec![
                    handler("stop-gate", &stop_args),
                    handler("session-end-handoff", " --checkpoint"),
                ]),
            },
            Entry {
                event: "SessionStart",
                group: group(vec![handler("session-start-loader", "")]),
            },
            // Codex sends SessionEnd at the end of `codex exec` too (0.171.0), and PreCompact.
            Entry {
                event: "SessionEnd",
                group: group(vec![handler("session-end-handoff", "")]),
            },
            Entry {
                event: "PreCompact",
                group: group(vec![handler("session-end-handoff", " --checkpoint")]),
            },
            Entry {
                event: "UserPromptSubmit",
                group: group(vec![handler("stop-gate", "")]),
            },
        ],
    }
}

/// The command string of a handler.
fn command(binaries: &Binaries, binary: &str, args: &str) -> String {
    match binaries {
        Binaries::Dir(dir) => format!(
            "{}{args}",
            shell_quote(&dir.join(binary).display().to_string())
        ),
        Binaries::Search => format!(
            "for b in \"$(command -v {binary})\" \"$HOME/.local/bin/{binary}\" /usr/local/bin/{binary} /opt/homebrew/bin/{binary}; do \
             [ -x \"$b\" ] && exec \"$b\"{args}; done; \
             echo '{{\"systemMessage\":\"vigil: {binary} is not installed on this machine; run ./install.sh from a vigil clone\"}}'"
        ),
    }
}

/// The settings file as it is on disk, resolved through a symlink to the file it names.
#[derive(Clone, Debug)]
pub struct Target {
    /// The path the user gave.
    pub given: PathBuf,
    /// The file actually read and written.
    pub file: PathBuf,
}

impl Target {
    pub fn resolve(given: &Path) -> Result<Target> {
        let file = match std::fs::symlink_metadata(given) {
            Ok(meta) if meta.file_type().is_symlink() => std::fs::canonicalize(given)
                .map_err(|e| Error::io("follow the symlink", given, &e))?,
            _ => std::path::absolute(given).map_err(|e| Error::io("resolve", given, &e))?,
        };
        Ok(Target {
            given: given.to_path_buf(),
            file,
        })
    }

    fn sidecar(&self, suffix: &str) -> PathBuf {
        let mut name = self.file.file_name().unwrap_or_default().to_os_string();
        name.push(suffix);
        self.file.with_file_name(name)
    }

    pub fn backup(&self) -> PathBuf {
        self.sidecar(".vigil-backup")
    }

    fn lock(&self) -> Result<FileLock> {
        // Gone again once released: nothing is left beside the settings file.
        FileLock::transient_at(&self.sidecar(".vigil-lock"), Duration::from_secs(30))
    }

    /// The project that holds the file: the parent of its `.claude/` or `.codex/`, else its
    /// own directory. `~/.claude/settings.json` gives `~`, so the record is `~/.vigil/`.
    pub fn project(&self) -> PathBuf {
        let dir = self.given_dir();
        match dir.file_name().and_then(|n| n.to_str()) {
            Some(".claude" | ".codex") => dir.parent().map(Path::to_path_buf).unwrap_or(dir),
            _ => dir,
        }
    }

    fn given_dir(&self) -> PathBuf {
        let absolute = std::path::absolute(&self.given).unwrap_or_else(|_| self.given.clone());
        absolute.parent().map(Path::to_path_buf).unwrap_or_default()
    }

    fn record_path(&self) -> PathBuf {
        self.project().join(".vigil").join("installed.json")
    }

    /// The file's bytes, `None` when it does not exist. Only a regular file is read: a FIFO
    /// or device in its place is refused rather than waited on.
    fn read(&self) -> Result<Option<Vec<u8>>> {
        use std::io::Read;
        let mut file = match crate::input::open_regular(&self.file) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("read", &self.file, &e)),
        };
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| Error::io("read", &self.file, &e))?;
        Ok(Some(bytes))
    }

    /// Refuses a file its owner made read-only: rewriting it (by rename, which the directory
    /// allows) would undo a choice the user made. Nothing is changed.
    fn writable(&self) -> Result<()> {
        use std::os::unix::fs::PermissionsExt;
        match std::fs::metadata(&self.file) {
            Ok(meta) if meta.permissions().mode() & 0o222 == 0 => Err(Error::input(format!(
                "{} is read-only; make it writable (chmod u+w) and run again; nothing was changed",
                self.given.display()
            ))),
            _ => Ok(()),
        }
    }

    /// The lock on the install record, which settings files of one project share.
    fn record_lock(&self) -> Result<FileLock> {
        // The last uninstall may remove `.vigil/` meanwhile: `transient_at` makes it again.
        let path = self.project().join(".vigil").join("installed.json.lock");
        FileLock::transient_at(&path, Duration::from_secs(30))
    }
}

/// Parses a settings file, refusing (with line and column) anything vigil could not rewrite
/// without loss: not JSON, a byte order mark, a root that is not an object, `hooks` that is
/// not an object, an event whose value is not a list.
pub fn parse(bytes: &[u8], path: &Path) -> Result<Map<String, Value>> {
    let shown = path.display();
    if bytes.starts_with(&[0xef, 0xbb, 0xbf]) {
        return Err(Error::input(format!(
            "{shown}: the file starts with a byte order mark, which Claude Code and Codex do not read as JSON; remove it and run again; nothing was changed"
        )));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        Error::input(format!(
            "{shown}: not UTF-8 (bad byte at offset {}); nothing was changed",
            e.valid_up_to()
        ))
    })?;
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    let value: Value = serde_json::from_str(text).map_err(|e| {
        // A comment is the usual reason, and serde's words for it ("key must be a string")
        // do not say so.
        let at = text
            .lines()
            .nth(e.line().saturating_sub(1))
            .and_then(|line| line.get(e.column().saturating_sub(1)..))
            .unwrap_or("");
        let why = if at.starts_with("//") || at.starts_with("/*") {
            "a comment: JSON has none, and Claude Code and Codex read this file as JSON; remove it"
                .to_string()
        } else {
            strip_position(&e.to_string())
        };
        Error::input(format!(
            "{shown}:{}:{}: not valid JSON ({why}); fix it and run again; nothing was changed",
            e.line(),
            e.column(),
        ))
    })?;
    let Value::Object(root) = value else {
        return Err(Error::input(format!(
            "{shown}: the top level is {}, not an object; nothing was changed",
            crate::hook::json_type(&value)
        )));
    };
    if let Some(hooks) = root.get("hooks") {
        let Value::Object(events) = hooks else {
            return Err(Error::input(format!(
                "{shown}:{}: `hooks` is {}, not an object; nothing was changed",
                line_of(text, "\"hooks\""),
                crate::hook::json_type(hooks)
            )));
        };
        for (event, groups) in events {
            if !groups.is_array() {
                return Err(Error::input(format!(
                    "{shown}:{}: `hooks.{event}` is {}, not a list; nothing was changed",
                    line_of(text, &format!("\"{event}\"")),
                    crate::hook::json_type(groups)
                )));
            }
        }
    }
    Ok(root)
}

fn strip_position(message: &str) -> String {
    match message.find(" at line ") {
        Some(cut) => message[..cut].to_string(),
        None => message.to_string(),
    }
}

/// The 1-based line on which `needle` first appears.
fn line_of(text: &str, needle: &str) -> usize {
    text.find(needle)
        .map_or(1, |at| text[..at].matches('\n').count() + 1)
}

/// A settings file as vigil writes it: 2-space indentation and a final newline.
pub fn render(root: &Map<String, Value>) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(root).expect("settings serialize");
    bytes.push(b'\n');
    bytes
}

/// What `installed.json` keeps about one settings file.
#[derive(Clone, Debug, Default, PartialEq)]
struct Installed {
    entries: Vec<(String, Value)>,
    created_file: bool,
    created_hooks: bool,
    created_events: Vec<String>,
    /// sha256 of the file as vigil left it: if it still reads so, uninstall restores the backup.
    written_sha256: String,
    /// sha256 of the file before vigil's first change: the backup is restored only if it is this.
    original_sha256: Option<String>,
    /// Codex: the config.toml that trusts vigil's hooks, and the keys it wrote there.
    codex_config: Option<String>,
    trusted_keys: Vec<String>,
    /// `--protect`: what it changed, for uninstall to take back.
    protect: Option<crate::protect::Protection>,
}

fn load_record(path: &Path) -> Result<Map<String, Value>> {
    match std::fs::read(path) {
        Ok(bytes) => match serde_json::from_slice::<Value>(&bytes) {
            Ok(Value::Object(map)) if map.get("schema") == Some(&json!(INSTALLED_SCHEMA)) => {
                Ok(map)
            }
            _ => Err(Error::input(format!(
                "{} is not a vigil install record; move it away and run again",
                path.display()
            ))),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Map::from_iter([
            ("schema".to_string(), json!(INSTALLED_SCHEMA)),
            ("files".to_string(), json!({})),
        ])),
        Err(e) => Err(Error::io("read", path, &e)),
    }
}

fn installed_of(record: &Map<String, Value>, key: &str) -> Option<Installed> {
    let file = record.get("files")?.get(key)?;
    Some(Installed {
        entries: file
            .get("entries")?
            .as_array()?
            .iter()
            .filter_map(|e| {
                Some((
                    e.get("event")?.as_str()?.to_string(),
                    e.get("group")?.clone(),
                ))
            })
            .collect(),
        created_file: file.get("created_file")?.as_bool()?,
        created_hooks: file.get("created_hooks")?.as_bool()?,
        created_events: file
            .get("created_events")?
            .as_array()?
            .iter()
            .filter_map(|e| e.as_str().map(str::to_string))
            .collect(),
        written_sha256: file.get("written_sha256")?.as_str()?.to_string(),
        original_sha256: file
            .get("original_sha256")
            .and_then(Value::as_str)
            .map(str::to_string),
        codex_config: file
            .get("codex_config")
            .and_then(Value::as_str)
            .map(str::to_string),
        trusted_keys: file
            .get("trusted_keys")
            .and_then(Value::as_array)
            .map(|keys| {
                keys.iter()
                    .filter_map(|k| k.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
        protect: file.get("protect").and_then(crate::protect::from_value),
    })
}

fn store_installed(record: &mut Map<String, Value>, key: &str, installed: Option<&Installed>) {
    let files = record.entry("files").or_insert_with(|| json!({}));
    let Some(files) = files.as_object_mut() else {
        return;
    };
    match installed {
        None => {
            files.remove(key);
        }
        Some(i) => {
            files.insert(
                key.to_string(),
                json!({
                    "entries": i.entries.iter().map(|(event, group)| json!({"event": event, "group": group})).collect::<Vec<_>>(),
                    "created_file": i.created_file,
                    "created_hooks": i.created_hooks,
                    "created_events": i.created_events,
                    "written_sha256": i.written_sha256,
                    "original_sha256": i.original_sha256,
                    "codex_config": i.codex_config,
                    "trusted_keys": i.trusted_keys,
                    "protect": i.protect.as_ref().map(crate::protect::to_value),
                }),
            );
        }
    }
}

fn save_record(path: &Path, record: &Map<String, Value>) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| Error::io("create", dir, &e))?;
    write_atomic(path, &render(record), 0o644).map_err(|e| Error::io("write", path, &e))
}

/// What an install or uninstall did, or would do.
#[derive(Clone, Debug)]
pub struct Change {
    pub before: Option<Vec<u8>>,
    pub after: Option<Vec<u8>>,
    pub summary: String,
}

impl Change {
    pub fn changed(&self) -> bool {
        self.before != self.after
    }
}

fn remove_group(root: &mut Map<String, Value>, event: &str, group: &Value) -> bool {
    let Some(list) = root
        .get_mut("hooks")
        .and_then(|h| h.get_mut(event))
        .and_then(Value::as_array_mut)
    else {
        return false;
    };
    match list.iter().position(|g| g == group) {
        Some(at) => {
            list.remove(at);
            true
        }
        None => false,
    }
}

/// The commands of a group's handlers, if every one of them runs vigil.
fn vigil_group(group: &Value) -> Option<Vec<&str>> {
    let handlers = group.get("hooks")?.as_array()?;
    let commands: Option<Vec<_>> = handlers
        .iter()
        .map(|h| {
            h.get("command")
                .and_then(Value::as_str)
                .filter(|c| vigil_binary(c).is_some())
        })
        .collect();
    commands.filter(|c| !c.is_empty())
}

/// Removes the group in `event` that runs exactly the commands of `group` (its other fields,
/// a timeout say, may have been edited) and nothing else. When there is no such group, or more
/// than one (so one may be the user's own), nothing is removed and the entry is named in
/// `missing`.
fn remove_like(
    root: &mut Map<String, Value>,
    event: &str,
    group: &Value,
    missing: &mut Vec<String>,
) {
    let wanted = vigil_group(group);
    let list = root
        .get_mut("hooks")
        .and_then(|h| h.get_mut(event))
        .and_then(Value::as_array_mut);
    let at = list.as_ref().and_then(|list| {
        let found: Vec<usize> = list
            .iter()
            .enumerate()
            .filter(|(_, g)| wanted.is_some() && vigil_group(g) == wanted)
            .map(|(at, _)| at)
            .collect();
        (found.len() == 1).then(|| found[0])
    });
    match (list, at) {
        (Some(list), Some(at)) => {
            list.remove(at);
        }
        _ => {
            let binaries: Vec<&str> = wanted
                .iter()
                .flatten()
                .filter_map(|c| vigil_binary(c))
                .collect();
            missing.push(format!("{event} {}", binaries.join("+")));
        }
    }
}

/// Codex's trust entries for vigil's handlers as they stand in `root`: (key, hash).
pub fn codex_trust_entries(target: &Target, root: &Map<String, Value>) -> Vec<(String, String)> {
    let key_path = std::path::absolute(&target.given).unwrap_or_else(|_| target.given.clone());
    vigil_handlers(root)
        .into_iter()
        .filter_map(|(event, g, h, _)| {
            let group = root.get("hooks")?.get(&event)?.get(g)?;
            let handler = group.get("hooks")?.get(h)?;
            let matcher = group.get("matcher").and_then(Value::as_str);
            Some((
                crate::codex::trust_key(&key_path, &event, g, h),
                crate::codex::trust_hash(&event, matcher, handler),
            ))
        })
        .collect()
}

/// Installs vigil's entries; with `trust` (Codex), also records Codex's trust for them in that
/// config.toml. With `dry_run`, computes the change and writes nothing.
pub fn install(
    target: &Target,
    plan: &Plan,
    dry_run: bool,
    trust: Option<&Path>,
) -> Result<Change> {
    let _lock = if dry_run { None } else { Some(target.lock()?) };
    let before = target.read()?;
    let mut root = match &before {
        Some(bytes) => parse(bytes, &target.given)?,
        None => Map::new(),
    };
    if !dry_run {
        target.writable()?;
    }
    // Settings files of one project share the record: it is read, changed and saved under its
    // own lock (taken after the file's, always in that order).
    let _record_lock = if dry_run {
        None
    } else {
        Some(target.record_lock()?)
    };
    let record_path = target.record_path();
    let mut record = load_record(&record_path)?;
    let key = target.file.display().to_string();
    let previous = installed_of(&record, &key);
    // The backup holds the file as it was before vigil: taken on the first install only, and
    // only from a file with no vigil handlers in it (else it is not the user's original).
    let backup_holds =
        |sha: &str| std::fs::read(target.backup()).is_ok_and(|bytes| sha256_hex(&bytes) == sha);
    let take_backup = before.is_some()
        && match &previous {
            None => vigil_handlers(&root).is_empty(),
            // The file is the original again (an interrupted run) but its backup is gone:
            // take it again, so that uninstall can still give these bytes back.
            Some(p) => {
                let now = before.as_deref().map(sha256_hex);
                now.is_some()
                    && now == p.original_sha256
                    && !backup_holds(p.original_sha256.as_deref().unwrap_or(""))
            }
        };
    let mut installed = match previous.clone() {
        // Edited since vigil wrote it: restoring the old backup on uninstall would lose those
        // edits, so from now on uninstall takes out vigil's entries instead.
        Some(mut p) if before.is_some() => {
            let now = before.as_deref().map(sha256_hex);
            if now.as_deref() != Some(p.written_sha256.as_str()) {
                // Unless it is the original itself (vigil's write never happened), in which
                // case the backup still holds it.
                if now != p.original_sha256 {
                    p.original_sha256 = None;
                }
                // A file vigil created and the user has since written to is theirs now.
                p.created_file = false;
            }
            p
        }
        // Deleted since: what vigil writes now is a new file, with nothing of vigil's in it yet.
        Some(p) => Installed {
            created_file: true,
            codex_config: p.codex_config,
            trusted_keys: p.trusted_keys,
            ..Installed::default()
        },
        None => Installed {
            created_file: before.is_none(),
            original_sha256: take_backup
                .then(|| before.as_deref().map(sha256_hex))
                .flatten(),
            ..Installed::default()
        },
    };
    // The gate's flags as the file has them now, changed only where this install says.
    let (gate_before, gate_group) = stop_gate_flags(&root, &plan.binaries)?;
    let gate_after = gate_before.apply(&plan.gate)?;
    let gate_changes = gate_after.changes_from(&gate_before);
    // Entries vigil put here before and no longer wants (another --run, say) go first.
    let wanted = entries(plan, &gate_after);
    // The group the flags were read from is replaced by the new one, which carries them, even
    // when the record of installing it is gone: else a second gate would run beside it.
    let dropped_source = match &gate_group {
        Some(group)
            if vigil_group(group).is_some()
                && !wanted
                    .iter()
                    .any(|w| w.event == "Stop" && &w.group == group) =>
        {
            installed
                .entries
                .retain(|(event, g)| !(event == "Stop" && g == group));
            remove_group(&mut root, "Stop", group)
        }
        _ => false,
    };
    let mut missing = Vec::new();
    let recorded = installed.entries.len();
    installed.entries.retain(|(event, group)| {
        let keep = wanted.iter().any(|w| w.event == event && &w.group == group);
        if !keep && !remove_group(&mut root, event, group) {
            remove_like(&mut root, event, group, &mut missing);
        }
        keep
    });
    let dropped = recorded - installed.entries.len() + usize::from(dropped_source);
    let mut added = 0;
    for entry in &wanted {
        if !root.contains_key("hooks") {
            root.insert("hooks".to_string(), json!({}));
            installed.created_hooks = true;
        }
        let hooks = root
            .get_mut("hooks")
            .and_then(Value::as_object_mut)
            .expect("hooks is an object");
        if !hooks.contains_key(entry.event) {
            hooks.insert(entry.event.to_string(), json!([]));
            if !installed.created_events.iter().any(|e| e == entry.event) {
                installed.created_events.push(entry.event.to_string());
            }
        }
        let list = hooks
            .get_mut(entry.event)
            .and_then(Value::as_array_mut)
            .expect("an event is a list");
        // Only what vigil itself adds is recorded: an identical group the user put there is
        // theirs, and uninstall leaves it.
        if !list.contains(&entry.group) {
            list.push(entry.group.clone());
            added += 1;
            if !installed
                .entries
                .iter()
                .any(|(e, g)| e == entry.event && g == &entry.group)
            {
                installed
                    .entries
                    .push((entry.event.to_string(), entry.group.clone()));
            }
        }
    }
    // The protection, once asked for, stays through later installs without --protect: only
    // uninstall takes it back.
    let protected = match &plan.protect {
        Some(guarded) => {
            let done = crate::protect::apply(&mut root, guarded);
            let changed = !done.is_empty();
            match &mut installed.protect {
                Some(earlier) => earlier.merge(done),
                None => installed.protect = Some(done),
            }
            changed
        }
        None => false,
    };
    let after =
        if added == 0 && dropped == 0 && !protected && previous.is_some() && before.is_some() {
            before.clone()
        } else {
            Some(render(&root))
        };
    let change = Change {
        before: before.clone(),
        after: after.clone(),
        summary: {
            let mut summary = if added == 0 {
                "vigil's hooks are already installed".to_string()
            } else {
                let groups = if added == 1 { "group" } else { "groups" };
                format!("added {added} vigil hook {groups}")
            };
            if protected {
                summary.push_str(
                    "; the sandbox on and vigil's state denied to the Edit and Write tools (--protect)",
                );
            } else if plan.protect.is_some() {
                summary.push_str("; already protected");
            }
            if !missing.is_empty() {
                summary.push_str(&format!(
                    "; an earlier vigil entry was not found, so it is left as it is: {}",
                    missing.join(", ")
                ));
            }
            if previous.is_some() && !gate_changes.is_empty() {
                summary.push_str("; the Stop hook's stop-gate flags:");
                for line in &gate_changes {
                    summary.push_str(&format!("\n  {line}"));
                }
            }
            summary
        },
    };
    if dry_run {
        return Ok(change);
    }
    if let Some(config) = trust {
        // The trust follows the file as written: hashes of vigil's handlers where they stand.
        let entries = codex_trust_entries(target, &root);
        if let Some(old) = installed
            .codex_config
            .as_deref()
            .filter(|old| Path::new(old) != config)
        {
            crate::codex::untrust(Path::new(old), &installed.trusted_keys)?;
        }
        crate::codex::trust(config, &entries)?;
        let stale: Vec<String> = installed
            .trusted_keys
            .iter()
            .filter(|k| !entries.iter().any(|(e, _)| e == *k))
            .cloned()
            .collect();
        crate::codex::untrust(config, &stale)?;
        installed.codex_config = Some(config.display().to_string());
        installed.trusted_keys = entries.into_iter().map(|(key, _)| key).collect();
    }
    if !change.changed() {
        if trust.is_some() {
            store_installed(&mut record, &key, Some(&installed));
            save_record(&record_path, &record)?;
        }
        return Ok(change);
    }
    let after = after.expect("an install has content");
    // The backup is the file before vigil's first change (replacing any backup left from an
    // earlier cycle), kept after that.
    if let Some(original) = &before
        && take_backup
    {
        write_atomic(&target.backup(), original, 0o600)
            .map_err(|e| Error::io("back up to", &target.backup(), &e))?;
    }
    if let Some(dir) = target.file.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::io("create", dir, &e))?;
    }
    // The record goes first: a crash between the two leaves a record whose hash the file does
    // not match, which uninstall handles by taking entries out, never by restoring blindly.
    installed.written_sha256 = sha256_hex(&after);
    store_installed(&mut record, &key, Some(&installed));
    save_record(&record_path, &record)?;
    write_atomic(&target.file, &after, 0o644).map_err(|e| Error::io("write", &target.file, &e))?;
    Ok(change)
}

/// The flags of the stop-gate in the file's vigil Stop handler (the first, when a hand-made
/// copy stands beside it), as the file has them; none when there is none.
/// Also the group it is in. Only a stop-gate this install would write (the same binary, by
/// the same path or the same PATH search) counts: a gate of the user's own, at another path,
/// is theirs, and stays as it is.
fn stop_gate_flags(
    root: &Map<String, Value>,
    binaries: &Binaries,
) -> Result<(crate::gateflags::GateFlags, Option<Value>)> {
    let ours = command(binaries, "stop-gate", "");
    let written_here = |text: &str| match binaries {
        Binaries::Dir(_) => {
            text == ours
                || text
                    .strip_prefix(&ours)
                    .is_some_and(|rest| rest.starts_with(' '))
        }
        Binaries::Search => text.starts_with("for b in \"$(command -v stop-gate)\""),
    };
    let handler = vigil_handlers(root)
        .into_iter()
        .find(|(event, _, _, command)| {
            event == "Stop"
                && vigil_binary(command) == Some("stop-gate")
                && written_here(command.trim_start())
        });
    let Some((_, g, _, command)) = handler else {
        return Ok((crate::gateflags::GateFlags::default(), None));
    };
    let words = handler_args(&command).ok_or_else(|| {
        Error::input(format!(
            "cannot read the flags of the Stop hook `{command}`; write them as plain or single-quoted words, or remove it"
        ))
    })?;
    let group = root
        .get("hooks")
        .and_then(|h| h.get("Stop"))
        .and_then(|list| list.get(g))
        .cloned();
    Ok((crate::gateflags::GateFlags::read(&words)?, group))
}

/// Removes exactly what install added: when the file is as install left it, the original
/// comes back byte for byte (or the file goes, if install created it); otherwise vigil's
/// entries, and the events and `hooks` it created and left empty, are taken out.
pub fn uninstall(target: &Target, dry_run: bool) -> Result<Change> {
    // Nothing there, nothing to lock: the lock beside the file would make its directory.
    if target.file.parent().is_some_and(|dir| !dir.is_dir()) {
        return Ok(Change {
            before: None,
            after: None,
            summary: "vigil is not installed in this file".into(),
        });
    }
    let _lock = if dry_run { None } else { Some(target.lock()?) };
    let before = target.read()?;
    if !dry_run && before.is_some() {
        target.writable()?;
    }
    let record_path = target.record_path();
    // No record, nothing to lock: uninstall where vigil never was leaves no `.vigil/` behind.
    let _record_lock = if dry_run || !record_path.exists() {
        None
    } else {
        Some(target.record_lock()?)
    };
    let mut record = load_record(&record_path)?;
    let key = target.file.display().to_string();
    let Some(installed) = installed_of(&record, &key) else {
        return Ok(Change {
            before: before.clone(),
            after: before,
            summary: "vigil is not installed in this file".into(),
        });
    };
    let untouched =
        before.as_deref().map(sha256_hex).as_deref() == Some(installed.written_sha256.as_str());
    let mut missing = Vec::new();
    let backup = target.backup();
    let original = std::fs::read(&backup)
        .ok()
        .filter(|bytes| installed.original_sha256.as_deref() == Some(sha256_hex(bytes).as_str()));
    let after = if untouched && installed.created_file {
        None
    } else if untouched && original.is_some() {
        original
    } else {
        let Some(bytes) = &before else {
            return Ok(Change {
                before: None,
                after: None,
                summary: "the settings file is gone; nothing to remove".into(),
            });
        };
        let mut root = parse(bytes, &target.given)?;
        let unchanged = root.clone();
        if let Some(done) = &installed.protect {
            crate::protect::revert(&mut root, done);
        }
        for (event, group) in &installed.entries {
            if !remove_group(&mut root, event, group) {
                // Reformatted or edited since: a group in that event that runs nothing but
                // the same vigil binaries is taken as vigil's.
                remove_like(&mut root, event, group, &mut missing);
            }
        }
        if let Some(hooks) = root.get_mut("hooks").and_then(Value::as_object_mut) {
            for event in &installed.created_events {
                if hooks
                    .get(event)
                    .and_then(Value::as_array)
                    .is_some_and(Vec::is_empty)
                {
                    hooks.remove(event);
                }
            }
        }
        if installed.created_hooks
            && root
                .get("hooks")
                .and_then(Value::as_object)
                .is_some_and(Map::is_empty)
        {
            root.remove("hooks");
        }
        // Nothing of vigil's was there (an install interrupted before its write, say): the
        // file stays byte for byte, never re-rendered.
        if root == unchanged {
            Some(bytes.clone())
        } else {
            Some(render(&root))
        }
    };
    let change = Change {
        before,
        after: after.clone(),
        summary: if missing.is_empty() {
            "removed vigil's hooks".into()
        } else {
            format!(
                "removed vigil's hooks; not found, so left as they are: {}",
                missing.join(", ")
            )
        },
    };
    if dry_run {
        return Ok(change);
    }
    match &after {
        None => {
            match std::fs::remove_file(&target.file) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io("remove", &target.file, &e)),
            }
            // A `.claude/` or `.codex/` left empty goes too (one with anything in it stays).
            if let Some(dir) = target.file.parent()
                && matches!(
                    dir.file_name().and_then(|n| n.to_str()),
                    Some(".claude" | ".codex")
                )
            {
                drop(_lock);
                let _ = std::fs::remove_dir(dir);
            }
        }
        Some(bytes) => write_atomic(&target.file, bytes, 0o644)
            .map_err(|e| Error::io("write", &target.file, &e))?,
    }
    if let Some(config) = &installed.codex_config {
        crate::codex::untrust(Path::new(config), &installed.trusted_keys)?;
    }
    store_installed(&mut record, &key, None);
    if record
        .get("files")
        .and_then(Value::as_object)
        .is_some_and(Map::is_empty)
    {
        // The last file vigil was installed in: no record, and no `.vigil/` if it holds nothing
        // else (loops, markers and handoffs stay where they are).
        std::fs::remove_file(&record_path).map_err(|e| Error::io("remove", &record_path, &e))?;
        drop(_record_lock);
        if let Some(dir) = record_path.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    } else {
        save_record(&record_path, &record)?;
    }
    // Only once the record no longer points at it: an uninstall killed before this point
    // leaves a record whose backup still exists.
    if untouched {
        let _ = std::fs::remove_file(&backup);
    }
    Ok(change)
}

/// vigil wired in two places Claude Code merges (this file and another settings file of the
/// project or the user, or the vigil plugin enabled): both run, so a loop would advance twice
/// per Stop and a check would run twice.
fn twice_across_files(
    target: &Target,
    own: &Map<String, Value>,
    handlers: &[(String, usize, usize, String)],
) -> Vec<Finding> {
    let project = target.project();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut others: Vec<PathBuf> = home
        .iter()
        .map(|h| h.join(".claude/settings.json"))
        .collect();
    others.push(project.join(".claude/settings.json"));
    others.push(project.join(".claude/settings.local.json"));
    others.push(PathBuf::from("/etc/claude-code/managed-settings.json"));
    let here = crate::subject::canonical(&target.file);
    let mut findings = Vec::new();
    let ours: std::collections::BTreeSet<(String, &str)> = handlers
        .iter()
        .filter_map(|(e, _, _, c)| Some((e.clone(), vigil_binary(c)?)))
        .collect();
    let mut seen = vec![];
    for path in std::iter::once(target.file.clone()).chain(others) {
        let canonical = crate::subject::canonical(&path);
        if seen.contains(&canonical) {
            continue;
        }
        seen.push(canonical.clone());
        let root = if canonical == here {
            Some(own.clone())
        } else {
            crate::input::open_regular(&path)
                .ok()
                .and_then(|f| crate::input::read_capped(f, 8 << 20, "settings", &path).ok())
                .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
                .and_then(|v| v.as_object().cloned())
        };
        let Some(root) = root else {
            continue;
        };
        let mut both: Vec<String> = if canonical == here {
            Vec::new()
        } else {
            vigil_handlers(&root)
                .iter()
                .filter_map(|(e, _, _, c)| {
                    let binary = vigil_binary(c)?;
                    ours.contains(&(e.clone(), binary))
                        .then(|| format!("{e} ({binary})"))
                })
                .collect()
        };
        both.dedup();
        if !both.is_empty() {
            findings.push(Finding::Warn(format!(
                "{} wires vigil too, and Claude Code runs both: {} run twice, so a loop advances twice per stop; keep vigil in one file (./install.sh --uninstall for the other)",
                path.display(),
                both.join(", ")
            )));
        }
        let plugin = root
            .get("enabledPlugins")
            .and_then(Value::as_object)
            .is_some_and(|plugins| {
                plugins
                    .iter()
                    .any(|(name, on)| name.starts_with("vigil@") && on == &Value::Bool(true))
            });
        if plugin && !ours.is_empty() {
            findings.push(Finding::Warn(format!(
                "the vigil plugin is enabled in {} and this file wires vigil's hooks as well: both run, so a loop advances twice per stop; use the plugin or the install, not both",
                path.display()
            )));
        }
    }
    findings
}

/// Whether Claude Code, with every settings file it reads for this project, keeps the agent off
/// vigil's protected state (SPEC §9).
fn protection(
    target: &Target,
    root: &Map<String, Value>,
    handlers: &[(String, usize, usize, String)],
) -> Vec<Finding> {
    let bin_dir = handlers
        .iter()
        .filter_map(|(_, _, _, command)| first_word(command))
        .map(PathBuf::from)
        .find(|path| path.is_absolute())
        .and_then(|path| path.parent().map(Path::to_path_buf));
    let on_path = handlers.iter().any(|(_, _, _, command)| {
        first_word(command).is_none_or(|word| !Path::new(&word).is_absolute())
    });
    let Some(mut guarded) = crate::protect::Guarded::here(bin_dir) else {
        return vec![Finding::Fail(
            "no state home: set $VIGIL_STATE_HOME (or $HOME) to an absolute path".into(),
        )];
    };
    guarded.on_path = on_path;
    let project = target.project();
    let mut layers = crate::protect::layers(&project, guarded.home.as_deref());
    // A settings file of another name (given with --settings, as `claude --settings` reads
    // it) is the strongest layer short of the managed one.
    let standard = [".claude/settings.json", ".claude/settings.local.json"]
        .iter()
        .map(|name| project.join(name))
        .chain(
            guarded
                .home
                .as_ref()
                .map(|h| h.join(".claude/settings.json")),
        )
        .any(|path| crate::subject::canonical(&path) == crate::subject::canonical(&target.file));
    if !standard {
        layers.push(root.clone());
    }
    let effective = crate::protect::Effective::of(&layers);
    crate::protect::check(&effective, &project, &guarded)
}

/// One line of `check`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finding {
    Ok(String),
    Warn(String),
    Fail(String),
}

impl Finding {
    pub fn line(&self) -> String {
        match self {
            Finding::Ok(text) => format!("[ok] {text}"),
            Finding::Warn(text) => format!("[warn] {text}"),
            Finding::Fail(text) => format!("[fail] {text}"),
        }
    }
}

/// The vigil binary a hook command runs, if it runs one: its first shell word is a path (or
/// name) whose file name is a vigil binary, or it is the PATH search `install` writes for
/// shared settings. A command that only mentions a binary (`echo stop-gate`) is not vigil's.
pub fn vigil_binary(command: &str) -> Option<&'static str> {
    let command = command.trim_start();
    let first = first_word(command)?;
    let name = first.rsplit('/').next()?;
    if let Some(binary) = BINARIES.iter().find(|b| **b == name) {
        return Some(binary);
    }
    BINARIES
        .iter()
        .copied()
        .find(|binary| command.starts_with(&format!("for b in \"$(command -v {binary})\"")))
}

/// The first word of a shell command with its quoting undone (`'…'`, `"…"`, backslashes), as
/// `shell_quote` writes it; `None` when it uses expansions vigil does not write (`$`, a backtick).
fn first_word(command: &str) -> Option<String> {
    let mut word = String::new();
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => loop {
                match chars.next()? {
                    '\'' => break,
                    c => word.push(c),
                }
            },
            '"' => loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => word.push(chars.next()?),
                    '$' | '`' => return None,
                    c => word.push(c),
                }
            },
            '\\' => word.push(chars.next()?),
            '$' | '`' => return None,
            c if c.is_whitespace() || ";|&<>()".contains(c) => break,
            c => word.push(c),
        }
    }
    (!word.is_empty()).then_some(word)
}

/// The handlers in a settings file that run vigil: (event, group index, handler index, command).
fn vigil_handlers(root: &Map<String, Value>) -> Vec<(String, usize, usize, String)> {
    let mut found = Vec::new();
    let Some(hooks) = root.get("hooks").and_then(Value::as_object) else {
        return found;
    };
    for (event, groups) in hooks {
        for (g, group) in groups.as_array().into_iter().flatten().enumerate() {
            for (h, handler) in group
                .get("hooks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                if let Some(command) = handler.get("command").and_then(Value::as_str)
                    && vigil_binary(command).is_some()
                {
                    found.push((event.clone(), g, h, command.to_string()));
                }
            }
        }
    }
    found
}

/// The doctor: does the file parse, is each vigil entry there, does each command run from a
/// bare environment, are there duplicates or stale binaries, will Codex run the hooks.
pub fn check(target: &Target, engine: Engine, codex_config: Option<&Path>) -> Vec<Finding> {
    let mut findings = Vec::new();
    let shown = target.given.display();
    let root = match target.read() {
        Ok(Some(bytes)) => match parse(&bytes, &target.given) {
            Ok(root) => {
                findings.push(Finding::Ok(format!("{shown} parses")));
                root
            }
            Err(e) => return vec![Finding::Fail(e.to_string())],
        },
        Ok(None) => {
            return vec![Finding::Fail(format!(
                "{shown} does not exist; run ./install.sh"
            ))];
        }
        Err(e) => return vec![Finding::Fail(e.to_string())],
    };
    let handlers = vigil_handlers(&root);
    let expected: &[(&str, &str)] = match engine {
        Engine::Claude => &[
            ("Stop", "stop-gate"),
            ("SessionStart", "session-start-loader"),
            ("SessionEnd", "session-end-handoff"),
            ("PreCompact", "session-end-handoff"),
            ("UserPromptSubmit", "stop-gate"),
        ],
        Engine::Codex => &[
            ("Stop", "stop-gate"),
            ("Stop", "session-end-handoff"),
            ("SessionStart", "session-start-loader"),
            ("SessionEnd", "session-end-handoff"),
            ("PreCompact", "session-end-handoff"),
            ("UserPromptSubmit", "stop-gate"),
        ],
    };
    for (event, binary) in expected {
        let count = handlers
            .iter()
            .filter(|(e, _, _, c)| e == event && vigil_binary(c) == Some(binary))
            .count();
        match count {
            0 => findings.push(Finding::Fail(format!(
                "{event} does not run {binary}; run ./install.sh"
            ))),
            1 => findings.push(Finding::Ok(format!("{event} runs {binary}"))),
            n => findings.push(Finding::Warn(format!(
                "{event} runs {binary} {n} times; remove the extra entries"
            ))),
        }
    }
    if root.get("disableAllHooks") == Some(&Value::Bool(true)) {
        findings.push(Finding::Fail(format!(
            "{shown} sets disableAllHooks: no hook runs, vigil's included; remove it to use vigil"
        )));
    }
    if engine == Engine::Claude {
        findings.extend(twice_across_files(target, &root, &handlers));
        findings.extend(protection(target, &root, &handlers));
    }
    let events: std::collections::BTreeSet<&str> = expected.iter().map(|(e, _)| *e).collect();
    for (event, g, h, command) in &handlers {
        if !events.contains(event.as_str()) {
            findings.push(Finding::Warn(format!(
                "{event} runs `{command}`, but vigil's hooks belong to {}",
                events.iter().copied().collect::<Vec<_>>().join(", ")
            )));
        }
        let kind = root["hooks"][event][g]["hooks"][h].get("type");
        if kind != Some(&json!("command")) {
            findings.push(Finding::Fail(format!(
                "{event}: `{command}` has type {}, not \"command\", so it never runs",
                kind.map(Value::to_string)
                    .unwrap_or_else(|| "missing".into())
            )));
        }
    }
    for (event, g, h, command) in &handlers {
        if vigil_binary(command) == Some("stop-gate") {
            let timeout = root["hooks"][event][g]["hooks"][h].get("timeout");
            findings.push(gate_deadline(event, command, timeout));
        }
    }
    let home = std::env::var_os("HOME").unwrap_or_default();
    for (event, _, _, command) in &handlers {
        findings.push(run_bare(event, command, &home));
        if let Some(stale) = stale_binary(command) {
            findings.push(stale);
        }
    }
    if engine == Engine::Codex {
        findings.extend(codex_trust(target, &root, codex_config));
    }
    findings
}

/// What a handler's timeout is when it names none: both engines give a hook 600 s.
const ENGINE_HOOK_TIMEOUT_SECS: u64 = 600;
/// How far under the handler's timeout the gate's deadline must be (SPEC §9).
const HANDLER_MARGIN_SECS: u64 = 5;

/// The deadline rule of SPEC §9 for one stop-gate handler, its flags read by stop-gate's own
/// parser: check timeout + reserve <= deadline <= the handler's timeout - 5 s. A flag the gate
/// would refuse (a typo blocks every stop with a config error) fails here first.
fn gate_deadline(event: &str, command: &str, timeout: Option<&Value>) -> Finding {
    if let Some(c) = handler_args_text(command).and_then(active_shell_syntax) {
        return Finding::Fail(format!(
            "{event}: the stop-gate command has `{c}` outside single quotes, so the shell runs or expands something before or around the gate that the doctor cannot check; write its arguments as plain or single-quoted words (settings-merge install does)"
        ));
    }
    let Some(args) = handler_args(command) else {
        return Finding::Warn(format!(
            "{event}: cannot read the flags of `{command}`; its deadline is not checked"
        ));
    };
    let config = match crate::gate::GateConfig::parse(args.into_iter().map(Into::into).collect()) {
        Ok(Some(config)) => config,
        Ok(None) => {
            return Finding::Fail(format!(
                "{event}: `{command}` asks stop-gate for its help text, so it never gates"
            ));
        }
        Err(e) => {
            return Finding::Fail(format!(
                "{event}: stop-gate would refuse its flags and block every stop: {e}"
            ));
        }
    };
    let handler = match timeout {
        None => ENGINE_HOOK_TIMEOUT_SECS,
        Some(value) => match value.as_u64() {
            Some(secs) => secs,
            None => {
                return Finding::Fail(format!(
                    "{event}: the handler's timeout {value} is not a whole number of seconds"
                ));
            }
        },
    };
    let deadline = config.deadline.as_secs();
    if deadline + HANDLER_MARGIN_SECS > handler {
        return Finding::Fail(format!(
            "{event}: stop-gate's --deadline {deadline} s is not {HANDLER_MARGIN_SECS} s under the handler's timeout of {handler} s, so the engine can kill it first and let the stop through unchecked; set \"timeout\": {} or lower --deadline to {}",
            deadline + HANDLER_MARGIN_SECS,
            handler.saturating_sub(HANDLER_MARGIN_SECS)
        ));
    }
    Finding::Ok(format!(
        "{event}: stop-gate's check gets {} s and the gate answers within {deadline} s, under the handler's timeout of {handler} s",
        config.timeout.as_secs()
    ))
}

/// The arguments a vigil handler passes its binary: the words after it, as a shell would
/// split them (in the PATH search `install` writes, the words after `exec "$b"`).
fn handler_args(command: &str) -> Option<Vec<String>> {
    let command = command.trim_start();
    if command.starts_with("for b in") {
        return shlex::split(handler_args_text(command)?);
    }
    let mut words = shlex::split(command)?;
    if words.is_empty() {
        return None;
    }
    words.remove(0);
    Some(words)
}

/// The text a shell reads for a handler's binary and arguments: all of a plain command, or
/// the arguments of the PATH search `install` writes (whose own `$`s are vigil's).
fn handler_args_text(command: &str) -> Option<&str> {
    let command = command.trim_start();
    if command.starts_with("for b in") {
        let (_, rest) = command.split_once("exec \"$b\"")?;
        let (args, _) = rest.split_once("; done;")?;
        return Some(args);
    }
    Some(command)
}

/// The first character a POSIX shell would act on rather than pass on as part of a word:
/// expansions (`$`, a backtick, also inside double quotes), operators and globs outside
/// quotes. `None` for text that is plain and quoted words only, as `shell_quote` writes them.
fn active_shell_syntax(text: &str) -> Option<char> {
    let mut chars = text.chars();
    let mut quote = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some('\''), '\'') | (Some('"'), '"') => quote = None,
            (Some('\''), _) => {}
            (Some('"'), '\\') | (None, '\\') => {
                chars.next();
            }
            (Some('"'), '$' | '`') => return Some(c),
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (
                None,
                '$' | '`' | ';' | '|' | '&' | '<' | '>' | '(' | ')' | '\n' | '*' | '?' | '[' | '~'
                | '#',
            ) => return Some(c),
            (None, _) => {}
        }
    }
    None
}

/// Finds and starts a hook's binary the way the hook would, but from a bare environment: a
/// command that works only with the user's shell PATH is reported.
fn run_bare(event: &str, command: &str, home: &std::ffi::OsStr) -> Finding {
    // Never the handler's own text (a committed file could append anything to it): the binary
    // it names, found the way the handler finds it, asked for its version.
    let Some(binary) = vigil_binary(command) else {
        return Finding::Fail(format!("{event}: `{command}` is not a vigil command"));
    };
    // Its flags, each quoted as a word of its own, go to the binary's own parser
    // (`--check-config` parses and exits, reading nothing): what would refuse them at every
    // event fails here first.
    let flags: String = handler_args(command)
        .unwrap_or_default()
        .iter()
        .map(|word| format!(" {}", shell_quote(word)))
        .collect();
    let asked = format!("{flags} --check-config");
    let script = if command.trim_start().starts_with("for b in") {
        self::command(&Binaries::Search, binary, &asked)
    } else {
        match first_word(command.trim_start()) {
            Some(path) => format!("{}{asked}", shell_quote(&path)),
            None => return Finding::Fail(format!("{event}: `{command}` cannot be read")),
        }
    };
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c")
        .arg(script)
        .env_clear()
        .env("HOME", home)
        .env("PATH", "/usr/bin:/bin")
        .env("VIGIL_DISABLE", "1");
    match crate::process::run(cmd, Duration::from_secs(10), true, 4096) {
        Ok(done)
            if done.outcome.success()
                && !String::from_utf8_lossy(&done.output).contains("not installed") =>
        {
            Finding::Ok(format!("{event}: `{command}` runs from a bare environment"))
        }
        Ok(done) => {
            let said = String::from_utf8_lossy(&done.output);
            let first = said
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no output");
            if let Some(why) = first.strip_prefix(&format!("{binary}: ")) {
                // The gate's flags were read with its parser already (`gate_deadline`), and
                // one line is enough for one typo.
                let told = binary == "stop-gate"
                    && handler_args(command).is_some_and(|args| {
                        crate::gate::GateConfig::parse(args.into_iter().map(Into::into).collect())
                            .is_err()
                    });
                if told {
                    return Finding::Ok(format!(
                        "{event}: `{command}` runs from a bare environment"
                    ));
                }
                return Finding::Fail(format!(
                    "{event}: {binary} refuses the flags of `{command}`, so it fails at every event: {why}"
                ));
            }
            Finding::Fail(format!(
                "{event}: `{command}` does not run from a bare environment (PATH=/usr/bin:/bin): {first}; run ./install.sh, which writes absolute paths"
            ))
        }
        Err(e) => Finding::Fail(format!("{event}: cannot run sh: {e}")),
    }
}

/// A binary named by absolute path that reports another version than this settings-merge:
/// installed from an older (or newer) build.
fn stale_binary(command: &str) -> Option<Finding> {
    let path = if let Some(rest) = command.strip_prefix('\'') {
        rest.split('\'').next()?.to_string()
    } else {
        command.split_whitespace().next()?.to_string()
    };
    if !path.starts_with('/') {
        return None;
    }
    let mut cmd = std::process::Command::new(&path);
    cmd.arg("--version");
    let done = crate::process::run(cmd, Duration::from_secs(5), true, 1024).ok()?;
    let said = String::from_utf8_lossy(&done.output);
    let version = said.split_whitespace().nth(1)?;
    (version != env!("CARGO_PKG_VERSION")).then(|| {
        Finding::Warn(format!(
            "{path} is version {version}, this settings-merge is {}: a stale binary; run ./install.sh again",
            env!("CARGO_PKG_VERSION")
        ))
    })
}

/// Codex runs a hook from hooks.json only once the user trusts it: a `[hooks.state."<key>"]`
/// entry in its config.toml whose `trusted_hash` is the hash of the hook as it is now.
fn codex_trust(target: &Target, root: &Map<String, Value>, config: Option<&Path>) -> Vec<Finding> {
    let trusted = config.map(crate::codex::trusted_hashes).unwrap_or_default();
    let mut findings = Vec::new();
    // A project's .codex/ (not ~/.codex/) is read only for a project the user trusts.
    let project = target.project();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    if target.given_dir().file_name().and_then(|n| n.to_str()) == Some(".codex")
        && home.as_deref() != Some(project.as_path())
    {
        let canonical = std::fs::canonicalize(&project).unwrap_or(project);
        if config.is_some_and(|c| crate::codex::project_trusted(c, &canonical)) {
            findings.push(Finding::Ok(format!(
                "Codex trusts the project {}",
                canonical.display()
            )));
        } else {
            findings.push(Finding::Warn(format!(
                "Codex reads {}/.codex/ only for a trusted project: trust it when codex asks, or set [projects.\"{}\"] trust_level = \"trusted\" in config.toml",
                canonical.display(),
                canonical.display()
            )));
        }
    }
    findings.extend(codex_trust_entries(target, root)
        .into_iter()
        .map(|(key, hash)| match trusted.get(&key) {
            Some(stored) if *stored == hash => Finding::Ok(format!("Codex trusts {key}")),
            Some(_) => Finding::Warn(format!(
                "Codex will skip {key}: it changed since it was trusted; run ./install.sh --codex --trust, or approve it in codex's /hooks"
            )),
            None => Finding::Warn(format!(
                "Codex will skip {key} until you trust it: run ./install.sh --codex --trust, or approve it in codex's /hooks"
            )),
        }));
    findings
}

/// A unified diff of two texts, line by line (for `--dry-run`).
pub fn diff(label: &str, before: &str, after: &str) -> String {
    let a: Vec<&str> = before.lines().collect();
    let b: Vec<&str> = after.lines().collect();
    // Longest common subsequence table, from the end.
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut out = format!("--- {label}\n+++ {label} (after)\n");
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out.push_str(&format!(" {}\n", a[i]));
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push_str(&format!("-{}\n", a[i]));
            i += 1;
        } else {
            out.push_str(&format!("+{}\n", b[j]));
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_diff_marks_added_and_removed_lines() {
        assert_eq!(
            diff("f", "a\nb\nc\n", "a\nx\nc\n"),
            "--- f\n+++ f (after)\n a\n-b\n+x\n c\n"
        );
    }

    #[test]
    fn a_handler_is_vigils_by_what_its_first_word_runs() {
        for dir in [
            "/opt/vigil/bin",
            "/home/o'neil/a b/bin",
            "/x/$HOME/`id`",
            "/tmp/é\"q",
        ] {
            let command = format!(
                "{} --run 'make test'",
                shell_quote(&format!("{dir}/stop-gate"))
            );
            assert_eq!(vigil_binary(&command), Some("stop-gate"), "{command}");
        }
        for not_vigil in [
            "echo stop-gate",
            "/usr/bin/env stop-gate",
            "stop-gate-wrapper --x",
            "\"$CLAUDE_PROJECT_DIR\"/bin/stop-gate",
            "",
        ] {
            assert_eq!(vigil_binary(not_vigil), None, "{not_vigil}");
        }
        let shared = command(&Binaries::Search, "session-end-handoff", " --checkpoint");
        assert_eq!(vigil_binary(&shared), Some("session-end-handoff"));
    }

    #[test]
    fn refusals_name_line_and_column() {
        let err = parse(b"{\n  \"a\": 1,\n}\n", Path::new("s.json"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("s.json:3:1: not valid JSON"), "{err}");
        let err = parse(b"{\"hooks\": {\"Stop\": {}}}", Path::new("s.json"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`hooks.Stop` is an object, not a list"),
            "{err}"
        );
    }
}
