//! What an install would change, worked out with nothing written: the settings file as it will
//! be, the record's entry for it, whether to take a backup, and what to tell the user.

use std::path::Path;

use serde_json::{Map, Value, json};

use crate::error::{Error, Result};
use crate::install::gateflags::GateFlags;
use crate::install::protect;
use crate::install::settings::doctor::wired_elsewhere;
use crate::install::settings::{
    Binaries, Change, Engine, Entry, Installed, Plan, Target, entries, handler_args, installed_of,
    is_waiter, loader_sync_notes, own_lines, remove_group, remove_like, render, vigil_binary,
    vigil_group, vigil_handlers,
};
use crate::sys::digest::sha256_hex;

/// An install worked out and not yet written.
pub(super) struct Merge {
    /// The change, as a dry run shows it.
    pub(super) change: Change,
    /// The settings as they will be (Codex's trust is for the handlers where they stand).
    pub(super) root: Map<String, Value>,
    /// The record's entry for the file, but for the hash of what is written.
    pub(super) installed: Installed,
    /// Whether the file as it is now is the user's original, to keep as the backup.
    pub(super) take_backup: bool,
    /// The file's key in the record.
    pub(super) key: String,
}

/// The gate's flags as the file has them, and as this install leaves them.
struct Gate {
    before: GateFlags,
    /// The Stop group the flags were read from.
    group: Option<Value>,
    after: GateFlags,
    /// What changed, a line each.
    changes: Vec<String>,
    /// Flags kept from a file vigil did not write as it is.
    carried: Vec<String>,
}

/// How the file's hook groups changed.
#[derive(Default)]
struct Tally {
    added: usize,
    dropped: usize,
    adopted: usize,
    /// Earlier entries of vigil's that were not found.
    missing: Vec<String>,
}

/// Works out what installing `plan` in `target` would change, from the file's bytes `before`
/// (parsed as `root`) and the project's install record; `trusting`: `--trust` was given.
pub(super) fn merge(
    target: &Target,
    plan: &Plan,
    before: Option<Vec<u8>>,
    mut root: Map<String, Value>,
    record: &Map<String, Value>,
    trusting: bool,
) -> Result<Merge> {
    // Claude Code merges the project's settings files and the user's: vigil wired in two of
    // them runs every hook twice, and a loop advances twice per stop. Refused, not found later
    // (under the project's record lock, so two installers cannot both pass it).
    if plan.engine == Engine::Claude
        && let Some(other) = wired_elsewhere(target, &root)
    {
        return Err(Error::usage(format!(
            "vigil is wired in {other} already, and Claude Code would run both; uninstall it there first, or keep that one; {} was not changed",
            target.given.display()
        )));
    }
    let key = target.file.display().to_string();
    let previous = installed_of(record, &key);
    // The file runs vigil, and no record says vigil put it there: the record was lost (the
    // state home deleted), or vigil was wired by hand.
    let unrecorded = previous.is_none() && !vigil_handlers(&root).is_empty();
    let (mut installed, take_backup) =
        installed_now(target, before.as_deref(), previous.as_ref(), &root);
    let gate = gate(
        target,
        plan,
        &root,
        before.as_deref(),
        previous.as_ref(),
        trusting,
    )?;
    // Entries vigil put here before and no longer wants (another --run, say) go first.
    let sync_notes = match &plan.sync_notes {
        Some(chosen) => chosen.clone(),
        None => loader_sync_notes(&root),
    };
    // The file tools' guard comes with --protect, and stays with it through later installs.
    let protect = plan.protect.is_some() || installed.protect.is_some();
    let wanted = entries(plan, &gate.after, sync_notes.as_deref(), protect);
    let tally = merge_entries(
        &mut root,
        &mut installed,
        &wanted,
        gate.group.as_ref(),
        unrecorded,
    );
    let (protected, left_out) = protection(target, plan, &mut root, &mut installed);
    let after = if tally.added == 0
        && tally.dropped == 0
        && !protected
        && previous.is_some()
        && before.is_some()
    {
        before.clone()
    } else {
        Some(render(&root))
    };
    let mut summary = summary(plan, &tally, &gate, protected);
    if left_out > 0 {
        summary.push_str(&format!(
            "\n  {left_out} places below the top that the engine or git runs are past the {} literal rules --protect lists for Claude Code's sandboxed shell (the editors' folders first, what git runs last); the file tools' guard, the Stop and the doctor still hold them all",
            crate::install::protect::MAX_LISTED
        ));
    }
    Ok(Merge {
        change: Change {
            before,
            after,
            summary,
        },
        root,
        installed,
        take_backup,
        key,
    })
}

/// The record's entry for the file before this install's changes, from the entry of an
/// earlier install (`previous`) and the file as it is (`before`); and whether the file is the
/// user's original, to back up.
fn installed_now(
    target: &Target,
    before: Option<&[u8]>,
    previous: Option<&Installed>,
    root: &Map<String, Value>,
) -> (Installed, bool) {
    // The backup holds the file as it was before vigil: taken on the first install only, and
    // only from a file with no vigil handlers in it (else it is not the user's original).
    let backup_holds =
        |sha: &str| std::fs::read(target.backup()).is_ok_and(|bytes| sha256_hex(&bytes) == sha);
    let take_backup = before.is_some()
        && match previous {
            None => vigil_handlers(root).is_empty(),
            // The file is the original again (an interrupted run) but its backup is gone:
            // take it again, so that uninstall can still give these bytes back.
            Some(p) => {
                let now = before.map(sha256_hex);
                now.is_some()
                    && now == p.original_sha256
                    && !backup_holds(p.original_sha256.as_deref().unwrap_or(""))
            }
        };
    let installed = match previous.cloned() {
        // Edited since vigil wrote it: restoring the old backup on uninstall would lose those
        // edits, so from now on uninstall takes out vigil's entries instead.
        Some(mut p) if before.is_some() => {
            let now = before.map(sha256_hex);
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
            original_sha256: take_backup.then(|| before.map(sha256_hex)).flatten(),
            ..Installed::default()
        },
    };
    (installed, take_backup)
}

/// The gate's flags as the file has them now, changed only where this install says. With
/// `--trust` (`trusting`), refuses flags kept from a file vigil did not write as it is.
fn gate(
    target: &Target,
    plan: &Plan,
    root: &Map<String, Value>,
    before: Option<&[u8]>,
    previous: Option<&Installed>,
    trusting: bool,
) -> Result<Gate> {
    let (gate_before, gate_group) = stop_gate_flags(root, &plan.binaries)?;
    let gate_after = gate_before.apply(&plan.gate)?;
    let gate_changes = gate_after.changes_from(&gate_before);
    // Flags kept from the file that vigil did not write as they are (the file was changed
    // since, or there is no record of writing it: by hand, or by the agent): told, and never
    // trusted for Codex on the installer's word.
    let vouched = previous
        .is_some_and(|p| before.map(sha256_hex).as_deref() == Some(p.written_sha256.as_str()));
    let carried = if vouched {
        Vec::new()
    } else {
        gate_after.kept_from(&gate_before, &plan.gate)
    };
    if trusting && !carried.is_empty() {
        return Err(Error::usage(format!(
            "the Stop hook's stop-gate flags in {} are not as vigil wrote them ({}); give them again with this install (or --no-run, --no-require-marker CHECK), so that --trust vouches only for flags you chose; nothing was changed",
            target.given.display(),
            carried.join(" ")
        )));
    }
    Ok(Gate {
        before: gate_before,
        group: gate_group,
        after: gate_after,
        changes: gate_changes,
        carried,
    })
}

/// Takes out the groups vigil put in `root` before and no longer wants, and adds the `wanted`
/// ones it lacks, keeping `installed`'s list of them; `gate_group` is the Stop group the
/// gate's flags were read from; `unrecorded`: the file runs vigil with no record of it.
fn merge_entries(
    root: &mut Map<String, Value>,
    installed: &mut Installed,
    wanted: &[Entry],
    gate_group: Option<&Value>,
    unrecorded: bool,
) -> Tally {
    let mut tally = Tally::default();
    // The group the flags were read from is replaced by the new one, which carries them, even
    // when the record of installing it is gone: else a second gate would run beside it.
    let dropped_source = match gate_group {
        Some(group)
            if vigil_group(group).is_some()
                && !wanted
                    .iter()
                    .any(|w| w.event == "Stop" && &w.group == group) =>
        {
            installed
                .entries
                .retain(|(event, g)| !(event == "Stop" && g == group));
            remove_group(root, "Stop", group)
        }
        _ => false,
    };
    let recorded = installed.entries.len();
    installed.entries.retain(|(event, group)| {
        let keep = wanted.iter().any(|w| w.event == event && &w.group == group);
        if !keep && !remove_group(root, event, group) {
            remove_like(root, event, group, &mut tally.missing);
        }
        keep
    });
    tally.dropped = recorded - installed.entries.len() + usize::from(dropped_source);
    for entry in wanted {
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
        // theirs, and uninstall leaves it. Unless the file ran vigil with no record of it:
        // those groups are adopted, or an uninstall after this install would leave them.
        if unrecorded && list.contains(&entry.group) && installed.record(entry.event, &entry.group)
        {
            tally.adopted += 1;
        }
        if !list.contains(&entry.group) {
            list.push(entry.group.clone());
            tally.added += 1;
            installed.record(entry.event, &entry.group);
        }
    }
    tally
}

/// `--protect`'s settings in `root`, and the held files in the sandbox's rules: whether either
/// changed the file, and how many places below the top were past the rules' limit.
fn protection(
    target: &Target,
    plan: &Plan,
    root: &mut Map<String, Value>,
    installed: &mut Installed,
) -> (bool, usize) {
    // The protection, once asked for, stays through later installs without --protect: only
    // uninstall takes it back.
    let protected = match &plan.protect {
        // Windows: Claude Code's sandbox is for Linux and macOS, and its permission rules are
        // not tested there; the file tools' guard is the protection, recorded as one that
        // changed no setting.
        Some(_) if cfg!(windows) => {
            installed.protect.get_or_insert_with(Default::default);
            false
        }
        Some(guarded) => {
            let done = protect::apply(root, guarded);
            let changed = !done.is_empty();
            match &mut installed.protect {
                Some(earlier) => earlier.merge(done),
                None => installed.protect = Some(done),
            }
            changed
        }
        None => false,
    };
    // The files the human holds, listed in the sandbox's rules of a protected install, as the
    // hold is now (SPEC §11): an install after `stop-gate hold` brings them in step.
    // And what the engine or git runs there, found now (issue 43): Claude Code's sandbox holds
    // only literal paths on Linux.
    let (listed, left_out) = match &mut installed.protect {
        Some(done) if !cfg!(windows) && plan.engine == Engine::Claude => {
            let project = target.project();
            let held = protect::sync_rules(root, &mut done.held_added, &held_rules_of(&project));
            let below_top = protect::below_rules(&project);
            let below = protect::sync_rules(root, &mut done.below_added, &below_top.rules);
            (held || below, below_top.left_out)
        }
        _ => (false, 0),
    };
    (protected || listed, left_out)
}

/// What an install tells: the groups added, changed, removed and adopted, the gate's flags
/// changed (a line each), the protection, and what was kept or not found.
fn summary(plan: &Plan, tally: &Tally, gate: &Gate, protected: bool) -> String {
    let Tally {
        added,
        dropped,
        adopted,
        missing,
    } = tally;
    let (added, dropped, adopted) = (*added, *dropped, *adopted);
    // A group whose flags changed goes and comes back: changed, not added.
    let replaced = added.min(dropped);
    let groups = |n: usize| if n == 1 { "group" } else { "groups" };
    let flags_changed = !gate.changes.is_empty() && !gate.before.flags.is_empty();
    let mut said = Vec::new();
    if added > replaced {
        let n = added - replaced;
        said.push(format!("added {n} vigil hook {}", groups(n)));
    }
    // The Stop group's change is told by its flags, below.
    let other = replaced.saturating_sub(usize::from(flags_changed));
    if other > 0 {
        said.push(format!("changed {other} vigil hook {}", groups(other)));
    }
    if dropped > replaced {
        let n = dropped - replaced;
        said.push(format!("removed {n} vigil hook {}", groups(n)));
    }
    if adopted > 0 {
        said.push(format!(
            "adopted {adopted} vigil hook {} already in the file, with no record of installing {} (uninstall takes {} out)",
            groups(adopted),
            if adopted == 1 { "it" } else { "them" },
            if adopted == 1 { "it" } else { "them" },
        ));
    }
    if flags_changed {
        said.push("changed the Stop hook's stop-gate flags".to_string());
    }
    let mut summary = if said.is_empty() {
        "vigil's hooks are already installed".to_string()
    } else {
        said.join("; ")
    };
    if protected {
        summary.push_str(
            "; the sandbox on and vigil's state denied to the Edit and Write tools (--protect)",
        );
    } else if plan.protect.is_some() && cfg!(windows) {
        summary.push_str(
            "; the Edit and Write tools kept off vigil's state (--protect); Windows has no sandbox, so the agent's shell still reaches it",
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
    if flags_changed {
        summary.push_str(" (below)");
        for line in &gate.changes {
            summary.push_str(&format!("\n  {line}"));
        }
    }
    if !gate.carried.is_empty() {
        summary.push_str(&format!(
            "\n  kept from the file, which is not as vigil wrote it: {}",
            gate.carried.join(" ")
        ));
    }
    summary
}

/// The deny rules for the files held in `project`'s repository (none without a hold, or one
/// that cannot be read: the Stop blocks on that, and says so).
fn held_rules_of(project: &Path) -> Vec<String> {
    let project = crate::state::project::Project::at(project).for_reading();
    let Ok(Some(hold)) = crate::state::hold::load(&project) else {
        return Vec::new();
    };
    let Ok(top) = crate::sys::git::Repository::locate(&project.dir).map(|r| r.top) else {
        return Vec::new();
    };
    let held: Vec<String> = hold.files.iter().map(|f| f.path.clone()).collect();
    protect::held_rules(&top, &project.dir, &held)
}

/// The flags of the stop-gate in the file's vigil Stop handler (the first, when a hand-made
/// copy stands beside it), as the file has them; none when there is none.
/// Also the group it is in. Only a stop-gate this install would write (the same binary, by
/// the same path or the same PATH search) counts: a gate of the user's own, at another path,
/// is theirs, and stays as it is.
fn stop_gate_flags(
    root: &Map<String, Value>,
    binaries: &Binaries,
) -> Result<(GateFlags, Option<Value>)> {
    let ours = own_lines(binaries, "stop-gate");
    let written_here = |text: &str| match binaries {
        Binaries::Dir(_) => ours.iter().any(|ours| {
            text == ours
                || text
                    .strip_prefix(ours.as_str())
                    .is_some_and(|rest| rest.starts_with(' '))
        }),
        Binaries::Search => text.starts_with("for b in \"$(command -v stop-gate)\""),
    };
    let handler = vigil_handlers(root)
        .into_iter()
        .find(|(event, _, _, command)| {
            event == "Stop"
                && vigil_binary(command) == Some("stop-gate")
                && !is_waiter(command)
                && written_here(command.trim_start())
        });
    let Some((_, g, _, command)) = handler else {
        return Ok((GateFlags::default(), None));
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
    Ok((GateFlags::read(&words)?, group))
}
