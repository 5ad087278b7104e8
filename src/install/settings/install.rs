//! `settings-merge install`: vigil's hooks added to a settings file, everything else kept.

use std::path::Path;

use serde_json::{Map, Value, json};

use super::*;
use crate::error::{Error, Result};
use crate::install::codex;
use crate::install::gateflags::GateFlags;
use crate::install::planted;
use crate::install::protect;
use crate::sys::atomic::write_atomic;
use crate::sys::digest::sha256_hex;

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
    let record_place = target.record();
    let _record_lock = if dry_run {
        None
    } else {
        Some(record_place.lock()?)
    };
    let mut record = record_place.load()?;
    // Claude Code merges the project's settings files and the user's: vigil wired in two of
    // them runs every hook twice, and a loop advances twice per stop. Refused, not found later
    // (under the project's record lock, so two installers cannot both pass it).
    if plan.engine == Engine::Claude
        && let Some(other) = super::doctor::wired_elsewhere(target, &root)
    {
        return Err(Error::usage(format!(
            "vigil is wired in {other} already, and Claude Code would run both; uninstall it there first, or keep that one; {} was not changed",
            target.given.display()
        )));
    }
    let key = target.file.display().to_string();
    let previous = installed_of(&record, &key);
    // The file runs vigil, and no record says vigil put it there: the record was lost (the
    // state home deleted), or vigil was wired by hand.
    let unrecorded = previous.is_none() && !vigil_handlers(&root).is_empty();
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
    // Flags kept from the file that vigil did not write as they are (the file was changed
    // since, or there is no record of writing it: by hand, or by the agent): told, and never
    // trusted for Codex on the installer's word.
    let vouched = previous.as_ref().is_some_and(|p| {
        before.as_deref().map(sha256_hex).as_deref() == Some(p.written_sha256.as_str())
    });
    let carried = if vouched {
        Vec::new()
    } else {
        gate_after.kept_from(&gate_before, &plan.gate)
    };
    if trust.is_some() && !carried.is_empty() {
        return Err(Error::usage(format!(
            "the Stop hook's stop-gate flags in {} are not as vigil wrote them ({}); give them again with this install (or --no-run, --no-require-marker CHECK), so that --trust vouches only for flags you chose; nothing was changed",
            target.given.display(),
            carried.join(" ")
        )));
    }
    // Entries vigil put here before and no longer wants (another --run, say) go first.
    let sync_notes = match &plan.sync_notes {
        Some(chosen) => chosen.clone(),
        None => super::loader_sync_notes(&root),
    };
    // The file tools' guard comes with --protect, and stays with it through later installs.
    let protect = plan.protect.is_some() || installed.protect.is_some();
    let wanted = entries(plan, &gate_after, sync_notes.as_deref(), protect);
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
    let mut adopted = 0;
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
        // theirs, and uninstall leaves it. Unless the file ran vigil with no record of it:
        // those groups are adopted, or an uninstall after this install would leave them.
        if unrecorded
            && list.contains(&entry.group)
            && !installed
                .entries
                .iter()
                .any(|(e, g)| e == entry.event && g == &entry.group)
        {
            installed
                .entries
                .push((entry.event.to_string(), entry.group.clone()));
            adopted += 1;
        }
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
        // Windows: Claude Code's sandbox is for Linux and macOS, and its permission rules are
        // not tested there; the file tools' guard is the protection, recorded as one that
        // changed no setting.
        Some(_) if cfg!(windows) => {
            installed.protect.get_or_insert_with(Default::default);
            false
        }
        Some(guarded) => {
            let done = protect::apply(&mut root, guarded);
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
    let held = match &mut installed.protect {
        Some(done) if !cfg!(windows) && plan.engine == Engine::Claude => {
            let project = target.project();
            let wanted = held_rules_of(&project);
            protect::sync_held(&mut root, done, &wanted)
        }
        _ => false,
    };
    let protected = protected || held;
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
            // A group whose flags changed goes and comes back: changed, not added.
            let replaced = added.min(dropped);
            let groups = |n: usize| if n == 1 { "group" } else { "groups" };
            let flags_changed = !gate_changes.is_empty() && !gate_before.flags.is_empty();
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
                for line in &gate_changes {
                    summary.push_str(&format!("\n  {line}"));
                }
            }
            if !carried.is_empty() {
                summary.push_str(&format!(
                    "\n  kept from the file, which is not as vigil wrote it: {}",
                    carried.join(" ")
                ));
            }
            summary
        },
    };
    if dry_run {
        return Ok(change);
    }
    // The human vouches for the project's planted files (agents, commands and skills with
    // hooks, plugin hooks, MCP servers) by protecting it: what is there now is recorded in
    // the protected state, and the doctor fails on what appears later (SPEC §9). First, so
    // that a state home that cannot be written changes nothing.
    if plan.engine == super::Engine::Claude && plan.protect.is_some() {
        let project = target.project();
        planted::record_baseline(&project, &planted::scan_here(&project).found)?;
    }
    if let Some(config) = trust {
        // The trust follows the file as written: hashes of vigil's handlers where they stand.
        let entries = codex_trust_entries(target, &root);
        if let Some(old) = installed
            .codex_config
            .as_deref()
            .filter(|old| Path::new(old) != config)
        {
            codex::untrust(Path::new(old), &installed.trusted_keys)?;
        }
        codex::trust(config, &entries)?;
        let stale: Vec<String> = installed
            .trusted_keys
            .iter()
            .filter(|k| !entries.iter().any(|(e, _)| e == *k))
            .cloned()
            .collect();
        codex::untrust(config, &stale)?;
        installed.codex_config = Some(config.display().to_string());
        installed.trusted_keys = entries.into_iter().map(|(key, _)| key).collect();
    }
    if !change.changed() {
        if trust.is_some() {
            store_installed(&mut record, &key, Some(&installed));
            record_place.save(&record)?;
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
    record_place.save(&record)?;
    write_atomic(&target.file, &after, 0o644).map_err(|e| Error::io("write", &target.file, &e))?;
    Ok(change)
}

/// The flags of the stop-gate in the file's vigil Stop handler (the first, when a hand-made
/// copy stands beside it), as the file has them; none when there is none.
/// Also the group it is in. Only a stop-gate this install would write (the same binary, by
/// the same path or the same PATH search) counts: a gate of the user's own, at another path,
/// is theirs, and stays as it is.
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

fn stop_gate_flags(
    root: &Map<String, Value>,
    binaries: &Binaries,
) -> Result<(GateFlags, Option<Value>)> {
    let ours = super::own_lines(binaries, "stop-gate");
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
                && !super::is_waiter(command)
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
