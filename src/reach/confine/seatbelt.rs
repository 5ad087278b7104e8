//! macOS's Seatbelt: the reach of a confined check written as a profile in its own language
//! (SBPL), and the command that runs under it. Untested on a real Mac: the profile's text is
//! what the tests hold.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::reach::confine::{Confined, Plan, Unavailable, confined_env, link_bound};
use crate::reach::{self, Entry};

/// `program args…` under macOS's Seatbelt with `seatbelt_profile`: the same reach as the
/// bubblewrap view, in SBPL (untested on a real Mac: the profile's text is what the tests hold).
pub(super) fn seatbelt_command(
    seatbelt: &Path,
    plan: &Plan,
    program: &std::ffi::OsStr,
    args: &[OsString],
) -> Result<(Command, Confined), Unavailable> {
    let tmp = tempfile::Builder::new()
        .prefix("vigil-check-")
        .tempdir()
        .map_err(|e| {
            Unavailable::Machine(format!("cannot make a private temporary directory: {e}"))
        })?;
    let mut writable = plan.writable.clone();
    writable.push(tmp.path().to_path_buf());
    let mut profile = seatbelt_profile(
        &std::fs::canonicalize(&plan.work).unwrap_or_else(|_| plan.work.clone()),
        &writable,
        &reach::hidden(&plan.project_state, &plan.hide)
            .into_iter()
            .map(|(path, _)| path)
            .collect::<Vec<_>>(),
        plan.network,
    );
    // No bind mounts here: the declared environment is linked in (its writes are outside the
    // work, so denied).
    link_bound(plan);
    // In place, what git runs from the project (and what `.git` files name) is read-only too,
    // and what the run makes is looked for after it.
    let mut nested = Vec::new();
    let watch = if plan.in_place {
        let work = std::fs::canonicalize(&plan.work).unwrap_or_else(|_| plan.work.clone());
        let hidden = reach::hidden(&plan.project_state, &plan.hide);
        Some(super::nested_entries(
            &work,
            &hidden,
            &mut nested,
            plan.ledger.as_deref(),
        )?)
    } else {
        None
    };
    // Later rules win: the hold's read-only paths after the work's allow.
    for path in plan
        .read_only
        .iter()
        .map(PathBuf::as_path)
        .chain(nested.iter().map(|m| m.path()))
    {
        let text = path.to_string_lossy();
        let quoted = format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""));
        profile.push_str(&format!(
            "(deny file-write* (literal {quoted}) (subpath {quoted}))\n"
        ));
    }
    let mut cmd = Command::new(seatbelt);
    cmd.arg("-p").arg(profile).arg(program).args(args);
    cmd.current_dir(&plan.cwd);
    confined_env(&mut cmd, plan);
    cmd.env("TMPDIR", tmp.path());
    Ok((
        cmd,
        Confined {
            status: None,
            made: Vec::new(),
            ledger: None,
            watch,
            _stand_ins: None,
            _tmp: Some(tmp),
        },
    ))
}

/// The Seatbelt profile (SBPL) of the reach: everything readable, writes only in `work` and
/// `writable` (less the read-only entries, which need no stand-in here: a rule names a path
/// whether it exists or not), nothing of `hidden` readable or writable, signals only to its own
/// processes, and no network unless `network` (a Unix socket is network to Seatbelt, so the
/// user's sockets go with it). Later rules win.
pub(crate) fn seatbelt_profile(
    work: &Path,
    writable: &[PathBuf],
    hidden: &[PathBuf],
    network: bool,
) -> String {
    let quoted = |path: &Path| {
        let text = path.to_string_lossy();
        format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
    };
    let mut profile = String::from("(version 1)\n(allow default)\n(deny file-write*)\n");
    profile.push_str("(allow file-write* (literal \"/dev/null\") (literal \"/dev/tty\") (regex #\"^/dev/fd/\"))\n");
    profile.push_str(&format!("(allow file-write* (subpath {})", quoted(work)));
    for dir in writable {
        profile.push_str(&format!(" (subpath {})", quoted(dir)));
    }
    profile.push_str(")\n(deny file-write*");
    for (entry, kind) in reach::read_only_in(work) {
        match kind {
            Entry::Dir => {
                profile.push_str(&format!(" (literal {0}) (subpath {0})", quoted(&entry)))
            }
            Entry::File => profile.push_str(&format!(" (literal {})", quoted(&entry))),
        }
    }
    profile.push_str(")\n");
    // The same names at any depth below the top: a rule is a pattern here, so it holds for a
    // name that does not exist yet (a nested `.claude/`, a `git init`'s `.git`).
    profile.push_str(&format!(
        "(deny file-write* (regex #\"^{}/(.*/)?({})(/.*)?$\"))\n",
        sbpl_regex(&regex_escape(&work.to_string_lossy())),
        reach::READ_ONLY
            .iter()
            .map(|(name, _)| sbpl_regex(&any_case(&regex_escape(name))))
            .collect::<Vec<_>>()
            .join("|")
    ));
    if !hidden.is_empty() {
        profile.push_str("(deny file-read* file-write*");
        for path in hidden {
            profile.push_str(&format!(" (subpath {})", quoted(path)));
        }
        profile.push_str(")\n");
    }
    profile.push_str("(deny signal (target others))\n");
    if !network {
        profile.push_str("(deny network*)\n");
    }
    profile
}

/// `text` matched literally in a regular expression.
fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.^$|()[]{}*+?".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A pattern's letters matched in either case (a case-insensitive disk takes `.CLAUDE`).
fn any_case(pattern: &str) -> String {
    pattern
        .chars()
        .map(|c| {
            if c.is_ascii_alphabetic() {
                format!("[{}{}]", c.to_ascii_lowercase(), c.to_ascii_uppercase())
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// A regular expression inside SBPL's `#"…"`: a quote cannot end it early.
fn sbpl_regex(pattern: &str) -> String {
    pattern.replace('"', "\\\"")
}

#[cfg(test)]
mod tests {
    #[cfg(unix)]
    use super::*;

    // Seatbelt is macOS's: its profile is written with Unix paths.
    #[cfg(unix)]
    #[test]
    fn the_seatbelt_profile_is_the_reach_in_sbpl() {
        let profile = seatbelt_profile(
            Path::new("/Users/me/proj"),
            &[PathBuf::from("/private/tmp/vigil-check-1")],
            &[
                PathBuf::from("/Users/me/.local/state/vigil"),
                PathBuf::from("/Users/me/.ssh"),
            ],
            false,
        );
        let lines: Vec<&str> = profile.lines().collect();
        assert_eq!(lines[0], "(version 1)");
        assert_eq!(lines[1], "(allow default)");
        assert_eq!(lines[2], "(deny file-write*)");
        assert!(profile.contains(
            "(allow file-write* (subpath \"/Users/me/proj\") (subpath \"/private/tmp/vigil-check-1\"))"
        ));
        // The read-only entries come after the project's allow, so they win.
        let allow = profile.find("(allow file-write* (subpath").unwrap();
        let deny = profile
            .find("(deny file-write* (literal \"/Users/me/proj/.claude\")")
            .unwrap();
        assert!(deny > allow, "{profile}");
        for entry in [".codex", ".git", ".vscode", ".idea"] {
            assert!(
                profile.contains(&format!("(subpath \"/Users/me/proj/{entry}\")")),
                "{entry}"
            );
        }
        assert!(profile.contains("(literal \"/Users/me/proj/.mcp.json\")"));
        assert!(profile.contains(
            "(deny file-read* file-write* (subpath \"/Users/me/.local/state/vigil\") (subpath \"/Users/me/.ssh\"))"
        ));
        assert!(profile.contains("(deny signal (target others))"));
        // Below the top, at any depth, in any case.
        assert!(
            profile.contains(
                "(deny file-write* (regex #\"^/Users/me/proj/(.*/)?(\\.[cC][lL][aA][uU][dD][eE]|"
            ),
            "{profile}"
        );
        assert!(
            profile.contains("|\\.[mM][cC][pP]\\.[jJ][sS][oO][nN]|"),
            "{profile}"
        );
        assert!(profile.ends_with("(deny network*)\n"));
        let open = seatbelt_profile(Path::new("/p"), &[], &[], true);
        assert!(!open.contains("network"));
        // Paths are SBPL strings: a quote or backslash in a name cannot end one early.
        let odd = seatbelt_profile(Path::new("/p/a\"b\\c"), &[], &[], true);
        assert!(odd.contains("(subpath \"/p/a\\\"b\\\\c\")"), "{odd}");
    }
}
