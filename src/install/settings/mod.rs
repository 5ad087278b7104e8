//! Merging vigil's hooks into Claude Code settings and Codex `hooks.json` (SPEC §8) without
//! ever losing what the user has: every other key, hook and entry is kept, in order; a file
//! that does not parse is refused and left as it is; the original is backed up before the
//! first change; what was added is recorded, so uninstall removes exactly that, or restores
//! the original byte for byte when nothing else changed.
//!
//! One module per verb, each read top to bottom on its own: `install`, `uninstall`, and
//! `doctor` (`check`); what they share is beside them: the file (`target`), the install record
//! (`record`), and here the entries vigil writes, parsing and rendering, and telling vigil's
//! handlers from others.

mod doctor;
mod install;
pub(crate) mod live;
mod record;
mod target;
mod uninstall;
pub mod wiring;

pub(crate) use crate::cli::flags::shell_quote;
pub(crate) use doctor::{check, gate_wired, other_stop_hooks_of};
pub(crate) use install::install;
use record::{Installed, Record, any_protected, installed_of, store_installed};
pub(crate) use target::Target;
pub(crate) use uninstall::uninstall;

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::cli::flags::BINARIES;
use crate::cli::hook;
use crate::error::{Error, Result};
use crate::install::codex;
use crate::install::gateflags::Changes;
use crate::install::gateflags::GateFlags;
use crate::install::protect::Guarded;
use crate::sys::files;
use wiring::{Args, When, Wiring};

pub(crate) const INSTALLED_SCHEMA: &str = "vigil.installed/v1";

/// A check command gets this long; the Stop hook's own timeout is set above it.
const HOOK_TIMEOUT_SECS: u64 = 600;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Claude,
    Codex,
}

/// Where the commands find vigil's binaries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Binaries {
    /// Absolute paths in this directory: for files only this machine reads.
    Dir(PathBuf),
    /// Found through PATH and the usual install places when the hook runs: for settings that
    /// are committed and shared, where every machine installs vigil somewhere else.
    Search,
}

/// What to install.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub engine: Engine,
    pub binaries: Binaries,
    /// What to change in the Stop handler's stop-gate flags (`--run`, `--require-marker`…);
    /// what it does not name stays as the settings file has it.
    pub gate: Changes,
    /// `--protect` (Claude Code): the sandbox on, and the Edit and Write tools denied vigil's
    /// state, binaries and settings (what `protect::Guarded` lists).
    pub protect: Option<Guarded>,
    /// The remote the loader syncs notes from in the background: set, taken out, or (`None`)
    /// kept as the file has it.
    pub sync_notes: Option<Option<String>>,
}

/// One hook group vigil adds to one event.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Entry {
    pub event: &'static str,
    pub group: Value,
}

/// The entries of a plan (SPEC §8's set, from `wiring`), the Stop handler's stop-gate with
/// `gate`, the loader syncing notes from `sync_notes` when it names a remote, and with
/// `protect` the guard and the settings hook of `--protect`.
pub(crate) fn entries(
    plan: &Plan,
    gate: &GateFlags,
    sync_notes: Option<&str>,
    protect: bool,
) -> Vec<Entry> {
    let gate_args: String = gate
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
    let handler = |wiring: &Wiring| {
        let args = match wiring.args {
            Args::None => String::new(),
            Args::Checkpoint => " --checkpoint".to_string(),
            Args::Gate => gate_args.clone(),
            Args::Wait => return waiter_handler(&plan.binaries),
            Args::SyncNotes => sync_notes
                .map(|remote| format!(" --sync-notes {}", shell_quote(remote)))
                .unwrap_or_default(),
        };
        let mut handler = if plan.engine == Engine::Claude {
            runs(&plan.binaries, wiring.binary, &args)
        } else {
            // Codex has no exec form (`args`): a command line, whatever the system.
            json!({"type": "command", "command": command(&plan.binaries, wiring.binary, &args)})
        };
        if wiring.args == Args::Gate
            && !args.is_empty()
            && let Some(timeout) = handler_timeout
        {
            handler["timeout"] = json!(timeout);
        }
        handler
    };
    let mut entries: Vec<Entry> = Vec::new();
    for wiring in wiring::of(plan.engine) {
        let wanted = match wiring.when {
            When::Always | When::Recommended(_) => true,
            When::Subagents => gate.gates_subagents(),
            When::Protect { unix } => protect && !(unix && cfg!(windows)),
        };
        if !wanted {
            continue;
        }
        let handler = handler(wiring);
        match entries.last_mut() {
            Some(last) if wiring.joins => {
                if let Some(hooks) = last.group["hooks"].as_array_mut() {
                    hooks.push(handler);
                }
            }
            _ => {
                let group = match wiring.matcher {
                    Some(matcher) => json!({"matcher": matcher, "hooks": [handler]}),
                    None => json!({ "hooks": [handler] }),
                };
                entries.push(Entry {
                    event: wiring.event.name(),
                    group,
                });
            }
        }
    }
    entries
}

/// The waiter's timeout: the seed's hour, above its own 55 minutes (`stop-gate wait --give-up`).
pub(crate) const WAITER_TIMEOUT_SECS: u64 = 3600;

/// The waiter's handler: `stop-gate wait`, in the background (`asyncRewake`), for an hour.
pub(crate) fn waiter_handler(binaries: &Binaries) -> Value {
    let mut handler = runs(binaries, "stop-gate", " wait");
    handler["asyncRewake"] = json!(true);
    handler["timeout"] = json!(WAITER_TIMEOUT_SECS);
    handler
}

/// Whether a vigil handler's command is the waiter (`stop-gate wait`), not a gate.
pub(crate) fn is_waiter(command: &str) -> bool {
    vigil_binary(command) == Some("stop-gate")
        && handler_args(command).is_some_and(|args| args.first().is_some_and(|a| a == "wait"))
}

/// The handler line of `binary` with no flags, in every form an install on this system writes
/// it (a command line; on Windows also exec form): a handler whose line is one of these, or
/// one of these and flags, was written by such an install.
pub(crate) fn own_lines(binaries: &Binaries, binary: &str) -> Vec<String> {
    let mut lines = vec![command(binaries, binary, "")];
    if let Some(exec) = handler_line(&runs(binaries, binary, "")) {
        lines.push(exec);
    }
    lines.dedup();
    lines
}

/// A Claude Code command handler that runs `binary` with `args` (shell words, as `shell_quote`
/// writes them). On Windows, with the binaries in a directory, in exec form: the `.exe`'s absolute
/// path as `command` and the words as `args`, so no shell (Git Bash or PowerShell) reads them
/// and no PATH is searched; elsewhere a shell command line.
fn runs(binaries: &Binaries, binary: &str, args: &str) -> Value {
    if let (true, Binaries::Dir(dir)) = (cfg!(windows), binaries) {
        let program = dir.join(format!("{binary}.exe"));
        let program = std::path::absolute(&program).unwrap_or(program);
        // `args` always, empty or not: it is what makes the handler exec form.
        let words = shlex::split(args).unwrap_or_default();
        return json!({"type": "command", "command": program.display().to_string(), "args": words});
    }
    json!({"type": "command", "command": command(binaries, binary, args)})
}

/// What a handler runs, as one shell line: its `command`; in exec form (`args`, which Claude
/// Code runs with no shell) the program and its arguments quoted as a shell would need them.
/// `None` for a handler with no command, or with `args` that are not all strings.
pub(crate) fn handler_line(handler: &Value) -> Option<String> {
    let command = handler.get("command")?.as_str()?;
    match handler.get("args") {
        None | Some(Value::Null) => Some(command.to_string()),
        Some(Value::Array(args)) => {
            let mut line = shell_quote(command);
            for arg in args {
                line.push(' ');
                line.push_str(&shell_quote(arg.as_str()?));
            }
            Some(line)
        }
        Some(_) => None,
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
            hook::json_type(&value)
        )));
    };
    if let Some(hooks) = root.get("hooks") {
        let Value::Object(events) = hooks else {
            return Err(Error::input(format!(
                "{shown}:{}: `hooks` is {}, not an object; nothing was changed",
                line_of(text, "\"hooks\""),
                hook::json_type(hooks)
            )));
        };
        for (event, groups) in events {
            if !groups.is_array() {
                return Err(Error::input(format!(
                    "{shown}:{}: `hooks.{event}` is {}, not a list; nothing was changed",
                    line_of(text, &format!("\"{event}\"")),
                    hook::json_type(groups)
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

/// What an install or uninstall did, or would do.
#[derive(Clone, Debug)]
pub(crate) struct Change {
    pub before: Option<Vec<u8>>,
    pub after: Option<Vec<u8>>,
    pub summary: String,
}

impl Change {
    pub(crate) fn changed(&self) -> bool {
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
fn vigil_group(group: &Value) -> Option<Vec<String>> {
    let handlers = group.get("hooks")?.as_array()?;
    let commands: Option<Vec<_>> = handlers
        .iter()
        .map(|h| handler_line(h).filter(|c| vigil_binary(c).is_some()))
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
pub(crate) fn codex_trust_entries(
    target: &Target,
    root: &Map<String, Value>,
) -> Vec<(String, String)> {
    let key_path = std::path::absolute(&target.given).unwrap_or_else(|_| target.given.clone());
    vigil_handlers(root)
        .into_iter()
        .filter_map(|(event, g, h, _)| {
            let group = root.get("hooks")?.get(&event)?.get(g)?;
            let handler = group.get("hooks")?.get(h)?;
            let matcher = group.get("matcher").and_then(Value::as_str);
            Some((
                codex::trust_key(&key_path, &event, g, h),
                codex::trust_hash(&event, matcher, handler),
            ))
        })
        .collect()
}

/// The vigil binary a hook command runs, if it runs one: its first shell word is a path (or
/// name) whose file name is a vigil binary, or it is the PATH search `install` writes for
/// shared settings. A command that only mentions a binary (`echo stop-gate`) is not vigil's.
pub(crate) fn vigil_binary(command: &str) -> Option<&'static str> {
    let command = command.trim_start();
    let first = first_word(command)?;
    // As the system names programs: on Windows `STOP-GATE.EXE` too.
    let name = files::program_name(&first);
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

/// The remote the file's vigil loader syncs notes from (`--sync-notes`), if it does.
pub(crate) fn loader_sync_notes(root: &Map<String, Value>) -> Option<String> {
    vigil_handlers(root)
        .into_iter()
        .filter(|(event, _, _, command)| {
            event == "SessionStart" && vigil_binary(command) == Some("session-start-loader")
        })
        .find_map(|(_, _, _, command)| {
            let words = handler_args(&command)?;
            let at = words.iter().position(|w| w == "--sync-notes")?;
            words.get(at + 1).cloned()
        })
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
                if let Some(command) = handler_line(handler)
                    && vigil_binary(&command).is_some()
                {
                    found.push((event.clone(), g, h, command));
                }
            }
        }
    }
    found
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

/// A unified diff of two texts, line by line (for `--dry-run`).
pub(crate) fn diff(label: &str, before: &str, after: &str) -> String {
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
