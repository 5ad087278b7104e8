//! The doctor's lines (`settings-merge check`): what is well, what to look at, what is wrong.
//!
//! A finding's text is its headline, one short line; what follows its first newline is the
//! detail, printed under it with `--verbose` only.

/// One line of `check`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Finding {
    Ok(String),
    Warn(String),
    Fail(String),
}

impl Finding {
    /// The finding as `check` prints it: its headline, and with `verbose` its detail, each
    /// line of it indented under the headline.
    pub(crate) fn line(&self, verbose: bool) -> String {
        let (tag, text) = match self {
            Finding::Ok(text) => ("[ok]", text),
            Finding::Warn(text) => ("[warn]", text),
            Finding::Fail(text) => ("[fail]", text),
        };
        let (head, detail) = text.split_once('\n').unwrap_or((text, ""));
        let mut out = format!("{tag} {head}");
        if verbose {
            for line in detail.lines().filter(|l| !l.is_empty()) {
                out.push_str("\n       ");
                out.push_str(line);
            }
        }
        out
    }

    /// Whether this finding has a detail that `--verbose` would show.
    pub(crate) fn has_detail(&self) -> bool {
        let (Finding::Ok(text) | Finding::Warn(text) | Finding::Fail(text)) = self;
        text.split_once('\n')
            .is_some_and(|(_, d)| !d.trim().is_empty())
    }
}

/// A rule of Claude Code's permission syntax as the user would type the path it covers:
/// `Edit(/x/**)` (the project's x) as `./x/`, `Edit(//x)` as `/x`, `Edit(~/x)` as `~/x`.
pub(crate) fn typed_path(rule: &str) -> String {
    let inner = rule
        .split_once('(')
        .and_then(|(_, rest)| rest.strip_suffix(')'))
        .unwrap_or(rule);
    let (path, dir) = match inner.strip_suffix("/**") {
        Some(path) => (path, true),
        None => (inner, false),
    };
    let path = if let Some(absolute) = path.strip_prefix("//") {
        format!("/{absolute}")
    } else if path.starts_with("~/") {
        path.to_string()
    } else if let Some(project) = path.strip_prefix('/') {
        format!("./{project}")
    } else {
        path.to_string()
    };
    if dir { format!("{path}/") } else { path }
}

/// A path as the user would type it: `./x` inside the project, `~/x` inside the home
/// directory, else as it is.
pub(crate) fn typed(path: &std::path::Path, project: &std::path::Path) -> String {
    if let Ok(rest) = path.strip_prefix(project) {
        return format!("./{}", rest.display());
    }
    if let Some(home) = crate::sys::user::home()
        && let Ok(rest) = path.strip_prefix(home)
    {
        return format!("~/{}", rest.display());
    }
    path.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_is_shown_as_the_path_a_user_types() {
        assert_eq!(
            typed_path("Edit(/.claude/settings.json)"),
            "./.claude/settings.json"
        );
        assert_eq!(typed_path("Edit(/.git/**)"), "./.git/");
        assert_eq!(typed_path("Edit(//opt/vigil/bin/**)"), "/opt/vigil/bin/");
        assert_eq!(typed_path("Edit(~/.bashrc)"), "~/.bashrc");
        let project = std::path::Path::new("/work/p");
        assert_eq!(
            typed(&project.join(".claude/settings.json"), project),
            "./.claude/settings.json"
        );
        assert_eq!(typed(std::path::Path::new("/etc/x"), project), "/etc/x");
    }

    #[test]
    fn the_detail_shows_only_when_verbose() {
        let finding = Finding::Warn("short\nthe long why".into());
        assert_eq!(finding.line(false), "[warn] short");
        assert_eq!(finding.line(true), "[warn] short\n       the long why");
        assert!(finding.has_detail());
        assert!(!Finding::Ok("plain".into()).has_detail());
    }
}
