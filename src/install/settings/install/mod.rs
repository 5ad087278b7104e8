//! `settings-merge install`: vigil's hooks added to a settings file, everything else kept. In
//! two steps: `plan` works out what would change, reading and writing nothing of its own, and
//! `apply` makes those writes.

mod plan;

use std::path::Path;

use serde_json::Map;

use super::*;
use crate::error::{Error, Result};
use crate::install::codex;
use crate::install::planted;
use crate::sys::atomic::write_atomic;
use crate::sys::digest::sha256_hex;
use plan::Merge;

/// Installs vigil's entries; with `trust` (Codex), also records Codex's trust for them in that
/// config.toml. With `dry_run`, computes the change and writes nothing.
pub(crate) fn install(
    target: &Target,
    plan: &Plan,
    dry_run: bool,
    trust: Option<&Path>,
) -> Result<Change> {
    let _lock = if dry_run { None } else { Some(target.lock()?) };
    let before = target.read()?;
    let root = match &before {
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
    let merge = plan::merge(target, plan, before, root, &record, trust.is_some())?;
    if dry_run {
        return Ok(merge.change);
    }
    apply(target, plan, trust, merge, &mut record, &record_place)
}

/// Makes the writes of a worked-out install: the planted-code baseline, Codex's trust, the
/// backup, the record, and last the settings file itself.
fn apply(
    target: &Target,
    plan: &Plan,
    trust: Option<&Path>,
    merge: Merge,
    record: &mut Map<String, serde_json::Value>,
    record_place: &Record,
) -> Result<Change> {
    let Merge {
        change,
        root,
        mut installed,
        take_backup,
        key,
    } = merge;
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
            store_installed(record, &key, Some(&installed));
            record_place.save(record)?;
        }
        return Ok(change);
    }
    let after = change.after.clone().expect("an install has content");
    // The backup is the file before vigil's first change (replacing any backup left from an
    // earlier cycle), kept after that.
    if let Some(original) = &change.before
        && take_backup
    {
        write_atomic(&target.backup(), original, 0o600)
            .map_err(|e| Error::io("back up to", &target.backup(), &e))?;
    }
    if let Some(dir) = target.file.parent() {
        fs_err::create_dir_all(dir).map_err(Error::fs)?;
    }
    // The record goes first: a crash between the two leaves a record whose hash the file does
    // not match, which uninstall handles by taking entries out, never by restoring blindly.
    installed.written_sha256 = sha256_hex(&after);
    store_installed(record, &key, Some(&installed));
    record_place.save(record)?;
    write_atomic(&target.file, &after, 0o644).map_err(|e| Error::io("write", &target.file, &e))?;
    Ok(change)
}
