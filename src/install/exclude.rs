//! The lines vigil keeps in a repository's `.git/info/exclude`: files the installer writes that
//! are personal or machine-specific (a `settings.local.json` with absolute paths, the install
//! record), so that git, and the worktree subject that reads the same rules, never count them.
//! Claude Code itself ignores `settings.local.json` when it makes one; a file vigil made must
//! not be the one that changes every marker's subject. The lines live in one marked block, so
//! uninstall takes back exactly them and nothing of the user's.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::sys::atomic;
use crate::sys::git::Repository;
use crate::sys::paths;

const BEGIN: &str =
    "# vigil: personal files (settings-merge install adds these lines, uninstall takes them back)";
const END: &str = "# end of vigil's lines";

/// The `info/exclude` git reads for the repository holding `dir` (a linked worktree's is its
/// common directory's), and the top it is relative to. `None` outside git.
pub(crate) fn file_for(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let repository = Repository::locate(dir).ok()?;
    let common = match std::fs::read_to_string(repository.git_dir.join("commondir")) {
        Ok(text) => repository.git_dir.join(text.trim_end()),
        Err(_) => repository.git_dir.clone(),
    };
    Some((common.join("info/exclude"), repository.top))
}

/// The pattern that matches exactly `path` (inside `top`), from the top: `/a/b.json`.
pub(crate) fn pattern(top: &Path, path: &Path) -> Option<String> {
    let top = paths::canonical(top);
    let path = paths::canonical(path);
    let relative = path.strip_prefix(&top).ok()?;
    // Git's separator, whatever the system's.
    let names: Option<Vec<&str>> = relative.iter().map(|name| name.to_str()).collect();
    let text = names?.join("/");
    // Only plain names: a pattern character would match more than the file.
    if text.is_empty() || text.contains(['*', '?', '[', '\\', '!', '#', '\n']) {
        return None;
    }
    Some(format!("/{text}"))
}

/// What an install into the settings file `file` of `project` keeps out of git: the fallback
/// state and the file's backup always (they are this machine's), and for a personal target
/// (not `--shared`) the settings file itself and the slash commands `install.sh` copies beside
/// it, which name this machine's paths. `None` for a file outside a repository, or one in the
/// user's home rather than a project.
pub(crate) fn for_install(
    file: &Path,
    project: &Path,
    personal: bool,
) -> Option<(PathBuf, Vec<String>)> {
    let home = crate::sys::user::home();
    if home.is_some_and(|h| paths::canonical(&h) == paths::canonical(project)) {
        return None;
    }
    let (exclude, top) = file_for(project)?;
    // The fallback protected state (`.vigil/state/`, used when the state home cannot be
    // written): this machine's, never to be committed.
    let mut paths = Vec::new();
    let mut lines_extra = Vec::new();
    if let Some(state) = pattern(&top, &project.join(".vigil/state")) {
        lines_extra.push(format!("{state}/"));
    }
    let mut backup = file.as_os_str().to_os_string();
    backup.push(".vigil-backup");
    paths.push(PathBuf::from(backup));
    if personal {
        paths.push(file.to_path_buf());
        if file.parent().and_then(Path::file_name) == Some(std::ffi::OsStr::new(".claude")) {
            for name in ["vigil-loop.md", "vigil-cancel.md", "vigil-hold.md"] {
                paths.push(project.join(".claude/commands").join(name));
            }
        }
    }
    let mut lines: Vec<String> = paths.iter().filter_map(|p| pattern(&top, p)).collect();
    lines.extend(lines_extra);
    Some((exclude, lines))
}

/// The line an older vigil added for its install record in the project (`.vigil/installed.json`),
/// now in the protected state: taken out of the block by every install and uninstall.
pub(crate) fn legacy_record_line(project: &Path) -> Option<String> {
    let (_, top) = file_for(project)?;
    pattern(&top, &project.join(".vigil/installed.json"))
}

/// Adds `add` to vigil's block and takes `remove` out of it; the block goes when it is empty.
/// Everything outside the block stays byte for byte. Returns whether the file changed.
pub(crate) fn update(file: &Path, add: &[String], remove: &[String]) -> Result<bool> {
    let text = match fs_err::read(file) {
        Ok(bytes) => String::from_utf8(bytes).map_err(|_| {
            Error::input(format!(
                "{} is not UTF-8; vigil adds no lines to it",
                file.display()
            ))
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(Error::fs(e)),
    };
    let (outside, mut ours) = split(&text);
    let before = ours.clone();
    ours.retain(|line| !remove.contains(line));
    for line in add {
        if !ours.contains(line) {
            ours.push(line.clone());
        }
    }
    if ours == before {
        return Ok(false);
    }
    let mut new = outside;
    if !ours.is_empty() {
        if !new.is_empty() && !new.ends_with('\n') {
            new.push('\n');
        }
        new.push_str(BEGIN);
        new.push('\n');
        for line in &ours {
            new.push_str(line);
            new.push('\n');
        }
        new.push_str(END);
        new.push('\n');
    }
    if let Some(dir) = file.parent() {
        fs_err::create_dir_all(dir).map_err(Error::fs)?;
    }
    atomic::write_atomic(file, new.as_bytes(), 0o644).map_err(|e| Error::io("write", file, &e))?;
    Ok(true)
}

/// The text outside vigil's block, and the lines inside it.
fn split(text: &str) -> (String, Vec<String>) {
    let Some(start) = text.find(&format!("{BEGIN}\n")) else {
        return (text.to_string(), Vec::new());
    };
    let body = &text[start + BEGIN.len() + 1..];
    let Some(end) = body.find(&format!("{END}\n")) else {
        return (text.to_string(), Vec::new());
    };
    let ours = body[..end].lines().map(str::to_string).collect();
    let mut outside = text[..start].to_string();
    outside.push_str(&body[end + END.len() + 1..]);
    (outside, ours)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// vigil's lines in `file`: those between its markers.
    fn lines(file: &Path) -> Vec<String> {
        split(&std::fs::read_to_string(file).unwrap()).1
    }

    #[test]
    fn the_block_is_added_merged_and_taken_back_leaving_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("info/exclude");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        let mine = "# git ls-files --others --exclude-from=.git/info/exclude\n*.swp";
        std::fs::write(&file, mine).unwrap();
        assert!(update(&file, &["/a".into(), "/b".into()], &[]).unwrap());
        assert!(!update(&file, &["/a".into()], &[]).unwrap(), "idempotent");
        assert_eq!(lines(&file), ["/a", "/b"]);
        assert!(update(&file, &[], &["/a".into()]).unwrap());
        assert_eq!(lines(&file), ["/b"]);
        assert!(update(&file, &[], &["/b".into()]).unwrap());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), format!("{mine}\n"));
    }

    #[test]
    fn patterns_are_plain_paths_from_the_top() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".claude/settings.local.json");
        assert_eq!(
            pattern(dir.path(), &file).as_deref(),
            Some("/.claude/settings.local.json")
        );
        assert_eq!(pattern(dir.path(), &dir.path().join("a*b")), None);
        assert_eq!(pattern(dir.path(), Path::new("/elsewhere/x")), None);
    }
}
