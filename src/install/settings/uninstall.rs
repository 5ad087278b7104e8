//! `settings-merge uninstall`: exactly what install added taken out again.

use std::path::Path;

use serde_json::{Map, Value};

use super::*;
use crate::error::{Error, Result};
use crate::install::codex;
use crate::install::planted;
use crate::install::protect;
use crate::sys::atomic::write_atomic;
use crate::sys::digest::sha256_hex;
use crate::verdict::defang;

/// Removes exactly what install added: when the file is as install left it, the original
/// comes back byte for byte (or the file goes, if install created it); otherwise vigil's
/// entries, and the events and `hooks` it created and left empty, are taken out.
pub(crate) fn uninstall(target: &Target, dry_run: bool) -> Result<Change> {
    // The file's directory gone: no lock beside it (that would make the directory again),
    // and nothing to do unless the record still holds the file (its Codex trust, say).
    let dir_gone = target.file.parent().is_some_and(|dir| !dir.is_dir());
    if dir_gone
        && installed_of(&target.record().load()?, &target.file.display().to_string()).is_none()
    {
        return Ok(Change {
            before: None,
            after: None,
            summary: "vigil is not installed in this file".into(),
        });
    }
    let _lock = if dry_run || dir_gone {
        None
    } else {
        Some(target.lock()?)
    };
    let before = target.read()?;
    if !dry_run && before.is_some() {
        target.writable()?;
    }
    let record_place = target.record();
    // No record, nothing to lock: uninstall where vigil never was leaves nothing behind.
    let _record_lock = if dry_run || !record_place.exists() {
        None
    } else {
        Some(record_place.lock()?)
    };
    let mut record = record_place.load()?;
    let key = target.file.display().to_string();
    let Some(installed) = installed_of(&record, &key) else {
        return without_record(target, before, dry_run);
    };
    let untouched =
        before.as_deref().map(sha256_hex).as_deref() == Some(installed.written_sha256.as_str());
    let mut missing = Vec::new();
    let backup = target.backup();
    let original = target
        .read_backup()?
        .filter(|bytes| installed.original_sha256.as_deref() == Some(sha256_hex(bytes).as_str()));
    // Gone: what else install did (the record, Codex's trust) is still taken back.
    let gone = before.is_none();
    let after = if gone || (untouched && installed.created_file) {
        None
    } else if untouched && original.is_some() {
        original
    } else {
        let Some(bytes) = &before else {
            unreachable!("a file that is gone is handled above")
        };
        Some(without_entries(target, bytes, &installed, &mut missing)?)
    };
    let change = Change {
        before,
        after: after.clone(),
        summary: summary(gone, &missing),
    };
    if dry_run {
        return Ok(change);
    }
    match &after {
        None => {
            match fs_err::remove_file(&target.file) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::fs(e)),
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
        codex::untrust(Path::new(config), &installed.trusted_keys)?;
    }
    store_installed(&mut record, &key, None);
    if record
        .get("files")
        .and_then(Value::as_object)
        .is_some_and(Map::is_empty)
    {
        // The last file vigil was installed in: no record (and no `.vigil/` of an older vigil's
        // if it holds nothing else).
        record_place.remove()?;
    } else {
        record_place.save(&record)?;
    }
    // The planted-code baseline belongs to the protection: once no settings file of the
    // project is protected, it goes, and the doctor's lines about planted code are warnings.
    if installed.protect.is_some()
        && !any_protected(&record)
        && let Some(baseline) = planted::baseline_path(&target.project())
    {
        let _ = std::fs::remove_file(baseline);
    }
    // Only once the record no longer points at it: an uninstall killed before this point
    // leaves a record whose backup still exists.
    if untouched {
        let _ = std::fs::remove_file(&backup);
    }
    Ok(change)
}

/// The file's bytes with what install recorded taken out: `--protect`'s settings, vigil's
/// groups (those not found named in `missing`), and the events and `hooks` it created and left
/// empty. Nothing of vigil's there: the bytes as they are.
fn without_entries(
    target: &Target,
    bytes: &[u8],
    installed: &Installed,
    missing: &mut Vec<String>,
) -> Result<Vec<u8>> {
    let mut root = parse(bytes, &target.given)?;
    let unchanged = root.clone();
    if let Some(done) = &installed.protect {
        protect::revert(&mut root, done);
    }
    for (event, group) in &installed.entries {
        if !remove_group(&mut root, event, group) {
            // Reformatted or edited since: a group in that event that runs nothing but
            // the same vigil binaries is taken as vigil's.
            remove_like(&mut root, event, group, missing);
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
        Ok(bytes.to_vec())
    } else {
        Ok(render(&root))
    }
}

/// What an uninstall with a record tells: `gone`, the file was; `missing`, vigil's groups not
/// found.
fn summary(gone: bool, missing: &[String]) -> String {
    if gone {
        "the settings file is gone; vigil's record of it (and any Codex trust) is taken back".into()
    } else if missing.is_empty() {
        "removed vigil's hooks".into()
    } else {
        format!(
            "removed vigil's hooks; not found, so left as they are: {}",
            missing.join(", ")
        )
    }
}

/// Uninstall with no record of the install (the state home or the project's `.vigil/` was
/// deleted, or the file was wired by hand): what the file holds decides. Every handler that
/// runs a vigil binary is taken out, with the groups and events left empty by it; the file
/// comes back byte for byte when that leaves it as its `.vigil-backup`. Anything else an
/// install may have added (--protect's sandbox and rules) cannot be told from yours, and stays.
fn without_record(target: &Target, before: Option<Vec<u8>>, dry_run: bool) -> Result<Change> {
    let not_installed = |before: Option<Vec<u8>>| Change {
        before: before.clone(),
        after: before,
        summary: "vigil is not installed in this file".into(),
    };
    let Some(bytes) = before.clone() else {
        return Ok(not_installed(before));
    };
    let mut root = parse(&bytes, &target.given)?;
    if vigil_handlers(&root).is_empty() {
        return Ok(not_installed(before));
    }
    let mut removed: Vec<String> = Vec::new();
    if let Some(hooks) = root.get_mut("hooks").and_then(Value::as_object_mut) {
        for groups in hooks.values_mut() {
            let Some(list) = groups.as_array_mut() else {
                continue;
            };
            list.retain_mut(|group| {
                let Some(handlers) = group.get_mut("hooks").and_then(Value::as_array_mut) else {
                    return true;
                };
                let had = handlers.len();
                handlers.retain(|handler| {
                    let vigils =
                        handler_line(handler).filter(|command| vigil_binary(command).is_some());
                    if let Some(command) = &vigils {
                        removed.push(format!("`{}`", defang::field_max(command, 100)));
                    }
                    vigils.is_none()
                });
                !(handlers.is_empty() && had > 0)
            });
        }
        hooks.retain(|_, groups| groups.as_array().is_none_or(|list| !list.is_empty()));
    }
    if root
        .get("hooks")
        .and_then(Value::as_object)
        .is_some_and(Map::is_empty)
    {
        root.remove("hooks");
    }
    // The user's original, when the backup is exactly what is left.
    let backup = target.backup();
    let original = target
        .read_backup()?
        .filter(|kept| parse(kept, &backup).is_ok_and(|kept| kept == root));
    let after = original.clone().unwrap_or_else(|| render(&root));
    let handlers = if removed.len() == 1 {
        "handler"
    } else {
        "handlers"
    };
    let change = Change {
        before,
        after: Some(after.clone()),
        summary: format!(
            "removed {} vigil hook {handlers} (no record of the install was left, so the file decided{}): {}",
            removed.len(),
            if original.is_some() {
                "; the file is your original again"
            } else if root.contains_key("sandbox") || root.contains_key("permissions") {
                "; its sandbox and permission rules stay as they are, --protect's included"
            } else {
                ""
            },
            removed.join(", ")
        ),
    };
    if dry_run {
        return Ok(change);
    }
    // (The file's lock is held by `uninstall`, which checked it can be written.)
    write_atomic(&target.file, &after, 0o644).map_err(|e| Error::io("write", &target.file, &e))?;
    if original.is_some() {
        let _ = std::fs::remove_file(&backup);
    }
    Ok(change)
}
