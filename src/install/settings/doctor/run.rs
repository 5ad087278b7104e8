//! A handler's command as the shell reads it, and its binary started the way the hook would
//! start it, from a bare environment: whether it runs, takes its flags, and is this version.

use std::path::Path;
use std::time::Duration;

use crate::gate::GateConfig;
use crate::install::finding::Finding;
use crate::install::settings::{
    Binaries, command, first_word, handler_args, shell_quote, vigil_binary,
};
use crate::sys::process;
use crate::sys::programs;

/// The first character a POSIX shell would act on rather than pass on as part of a word:
/// expansions (`$`, a backtick, also inside double quotes), operators and globs outside
/// quotes. `None` for text that is plain and quoted words only, as `shell_quote` writes them.
pub(super) fn active_shell_syntax(text: &str) -> Option<char> {
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
pub(super) fn run_bare(event: &str, command: &str, home: &std::ffi::OsStr) -> Finding {
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
    let mut cmd = if cfg!(windows) {
        // Exec form, as Claude Code runs it there: the program the handler names, with no
        // shell, and only the variables Windows itself needs.
        let Some(program) = first_word(command.trim_start()) else {
            return Finding::Fail(format!("{event}: `{command}` cannot be read"));
        };
        let mut cmd = std::process::Command::new(program);
        cmd.args(handler_args(command).unwrap_or_default())
            .arg("--check-config")
            .env_clear();
        for name in ["SystemRoot", "USERPROFILE", "LOCALAPPDATA", "TEMP", "TMP"] {
            if let Some(value) = std::env::var_os(name) {
                cmd.env(name, value);
            }
        }
        cmd
    } else {
        let mut cmd = std::process::Command::new(programs::SH);
        cmd.arg("-c")
            .arg(script)
            .env_clear()
            .env("HOME", home)
            .env("PATH", "/usr/bin:/bin");
        cmd
    };
    cmd.env("VIGIL_DISABLE", "1");
    match process::run(cmd, Duration::from_secs(10), true, 4096) {
        Ok(done)
            if done.outcome.success()
                && !String::from_utf8_lossy(&done.output).contains("not installed") =>
        {
            Finding::Ok(format!(
                "{event}: {binary} runs from a bare environment\n`{command}`"
            ))
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
                        GateConfig::parse(args.into_iter().map(Into::into).collect()).is_err()
                    });
                if told {
                    return Finding::Ok(format!(
                        "{event}: {binary} runs from a bare environment\n`{command}`"
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
pub(super) fn stale_binary(command: &str) -> Option<Finding> {
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
    let done = process::run(cmd, Duration::from_secs(5), true, 1024).ok()?;
    let said = String::from_utf8_lossy(&done.output);
    let version = said.split_whitespace().nth(1)?;
    (version != env!("CARGO_PKG_VERSION")).then(|| {
        Finding::Warn(format!(
            "a stale binary: {} is version {version}; run ./install.sh again\n{path} is version {version}, this settings-merge is {}",
            Path::new(&path).file_name().unwrap_or_default().to_string_lossy(),
            env!("CARGO_PKG_VERSION")
        ))
    })
}
