//! promise-matcher: does this text declare completion, or only mention it? (SPEC §3)

use std::ffi::OsString;
use std::path::PathBuf;

use crate::cli::defs::{self, Given, Scope};
use crate::cli::flags;
use crate::cli::flags::{help, print};
use crate::cli::hook::HookInput;
use crate::cli::input::Source;
use crate::cli::output::{diagnostic, stdout};
use crate::exit::Code as ExitCode;
use crate::verdict::defang::defang_bytes;
use crate::verdict::promise::{Promise, Verdict, assess};
use crate::verdict::terminal::{self, DEFAULT_COLS, DEFAULT_TAIL};
use crate::verdict::token::{self, Prefix, Token};
use crate::{Error, Exit, Result, transcript};

const NAME: &str = "promise-matcher";
/// Text to judge or defang larger than this is refused.
const MAX_TEXT: u64 = 16 * 1024 * 1024;

const HELP: &str = "\
promise-matcher: does this text declare completion, or only mention it?

Usage:
  promise-matcher [--promise P] [--json] [--hook] [FILE|-]
  promise-matcher token new
  promise-matcher token instruction --token T [--prefix VIGIL]
  promise-matcher scan --token T [--prefix VIGIL] [--tail BYTES] [--cols N] [--json] [FILE|-]
  promise-matcher defang [--prefix P]... [FILE|-]

Judging text (the default command) reads FILE or standard input and prints the verdict:
  declared   the last line is <promise>P</promise>, alone, outside code and quotes
  mentioned  <promise>P</promise> appears, but not as a declaration
  absent     it does not appear (a bare P without tags is absent too)
  blocked    an unmasked line `needs-decision: QUESTION` escalates to a human
Exit 0 for declared, 1 for any other verdict, 2 for a usage or input error.

Options:
";

const HELP_TAIL: &str = "
Subcommands:
  token new          print a fresh task token (128 random bits, 32 hex characters)
  token instruction  print the instruction asking for <<<PREFIX_DONE_T>>>, in two pieces
  scan               exit 0 when the marker is in the tail of terminal output, 1 when not
  defang             copy text, splicing a hyphen into every marker prefix and promise tag
Run `promise-matcher SUBCOMMAND --help` for each one's options.
";

const HELP_TOKEN: &str = "\
Usage:
  promise-matcher token new
  promise-matcher token instruction --token T [--prefix VIGIL]

`token new` prints a fresh token: 128 bits from the OS random source as 32 lowercase hex
characters. Generate one per task and keep it with the task.

`token instruction` prints the sentence to append to the task's prompt. It asks the model to
end with one line holding <<<PREFIX_DONE_T>>>, given as the two pieces `<<<PREFIX_` and
`DONE_T>>>`, so the printed text (and its echo in a terminal) never holds the marker itself.

Options:
";

const HELP_SCAN: &str = "\
Usage: promise-matcher scan --token T [--prefix VIGIL] [--tail BYTES] [--cols N] [--json] [FILE|-]

Exits 0 when <<<PREFIX_DONE_T>>> is in the last BYTES of the output, 1 when not. Three views
are scanned, any of which may find it: the text as is; the flattened text (escape sequences,
control characters, box drawing U+2500 to U+259F and all whitespace removed); and the screen
(the bytes replayed on a virtual terminal N columns wide, with scrollback, rows joined and
flattened). A regular file is read from its end; a pipe is read through, keeping the tail.

Options:
";

const HELP_DEFANG: &str = "\
Usage: promise-matcher defang [--prefix P]... [FILE|-]

Copies text to standard output with a hyphen spliced into every marker prefix (<<<VIGIL_
becomes <<<VIG-IL_, also when escapes or whitespace split it) and every promise tag
(<promise> becomes <pro-mise>, </promise> becomes </pro-mise>), so none can match again.
Nothing else changes, and running it twice changes nothing more.

Options:
";

/// A subcommand's help: its head, then its options from the table.
fn help_of(head: &str, scope: &'static str) -> String {
    format!("{head}{}", defs::options(Scope::of(NAME, scope), false))
}

/// The binary's work, from its command line to its exit code.
pub fn main() -> ExitCode {
    if flags::start(NAME) {
        return ExitCode::SUCCESS;
    }
    match run() {
        Ok(exit) => exit.into(),
        Err(err) => {
            diagnostic(NAME, &err.to_string());
            err.exit().into()
        }
    }
}

fn run() -> Result<Exit> {
    let mut args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let subcommand = args.first().and_then(|a| a.to_str()).map(str::to_owned);
    match subcommand.as_deref() {
        Some("token") => {
            args.remove(0);
            token_command(args)
        }
        Some("scan") => {
            args.remove(0);
            scan_command(args)
        }
        Some("defang") => {
            args.remove(0);
            defang_command(args)
        }
        _ => judge_command(args),
    }
}

fn judge_command(args: Vec<OsString>) -> Result<Exit> {
    let mut promise = Promise::default();
    let mut json = false;
    let mut hook = false;
    let mut file = None;
    let mut args = defs::Args::new(args, Scope::of(NAME, "judge"));
    while let Some(given) = args.next()? {
        let (flag, value) = match given {
            Given::Help => {
                let scope = Scope::of(NAME, "judge");
                return help(&defs::help_with_options(HELP, scope, HELP_TAIL));
            }
            Given::Value(value) => {
                set_file(&mut file, value)?;
                continue;
            }
            Given::Flag(flag, value) => (flag, value.unwrap_or_default()),
        };
        match flag.name {
            "--promise" => promise = Promise::new(&flag.text(value)?)?,
            "--json" => json = true,
            "--hook" => hook = true,
            _ => return Err(flag.unread()),
        }
    }
    let source = Source::from_arg(file);
    let text = if hook {
        let input = HookInput::read(&source)?;
        transcript::last_message(&input)?
            .map(|(text, _)| text)
            .unwrap_or_default()
    } else {
        let bytes = source.read_capped(MAX_TEXT, "the text")?;
        String::from_utf8_lossy(&bytes).into_owned()
    };
    let assessment = assess(&text, &promise);
    let line = if json {
        serde_json::to_string(&assessment).expect("an assessment always serializes")
    } else {
        assessment.verdict.as_str().to_string()
    };
    stdout(format!("{line}\n").as_bytes())?;
    Ok(match assessment.verdict {
        Verdict::Declared => Exit::Success,
        _ => Exit::Negative,
    })
}

fn token_command(args: Vec<OsString>) -> Result<Exit> {
    let mut args = defs::Args::new(args, Scope::of(NAME, "token"));
    let mut action = None;
    let mut token = None;
    let mut prefix = Prefix::default();
    while let Some(given) = args.next()? {
        let (flag, value) = match given {
            Given::Help => return help(&help_of(HELP_TOKEN, "token")),
            Given::Value(value) if action.is_none() => {
                action = Some(
                    value
                        .into_string()
                        .map_err(lexopt::Error::NonUnicodeValue)?,
                );
                continue;
            }
            Given::Value(value) => return Err(defs::unexpected(value)),
            Given::Flag(flag, value) => (flag, value.unwrap_or_default()),
        };
        match flag.name {
            "--token" => token = Some(Token::parse(&flag.text(value)?)?),
            "--prefix" => prefix = Prefix::parse(&flag.text(value)?)?,
            _ => return Err(flag.unread()),
        }
    }
    let text = match action.as_deref() {
        Some("new") => {
            if token.is_some() {
                return Err(Error::usage("`token new` takes no --token; it makes one"));
            }
            Token::generate()?.as_str().to_string()
        }
        Some("instruction") => {
            let token = token.ok_or_else(|| {
                Error::usage("`token instruction` needs --token T; make one with `promise-matcher token new`")
            })?;
            token::instruction(&prefix, &token)
        }
        Some(other) => {
            return Err(Error::usage(format!(
                "unknown token command {other:?}; use `token new` or `token instruction`"
            )));
        }
        None => {
            return Err(Error::usage(
                "`token` needs a command: `token new` or `token instruction --token T`",
            ));
        }
    };
    print(format!("{text}\n").as_bytes())
}

fn scan_command(args: Vec<OsString>) -> Result<Exit> {
    let mut args = defs::Args::new(args, Scope::of(NAME, "scan"));
    let mut token = None;
    let mut prefix = Prefix::default();
    let mut tail = DEFAULT_TAIL;
    let mut cols = DEFAULT_COLS;
    let mut json = false;
    let mut file = None;
    while let Some(given) = args.next()? {
        let (flag, value) = match given {
            Given::Help => return help(&help_of(HELP_SCAN, "scan")),
            Given::Value(value) => {
                set_file(&mut file, value)?;
                continue;
            }
            Given::Flag(flag, value) => (flag, value.unwrap_or_default()),
        };
        match flag.name {
            "--token" => token = Some(Token::parse(&flag.text(value)?)?),
            "--prefix" => prefix = Prefix::parse(&flag.text(value)?)?,
            "--tail" => tail = flag.number(&flag.text(value)?)?,
            "--cols" => cols = flag.number(&flag.text(value)?)? as u16,
            "--json" => json = true,
            _ => return Err(flag.unread()),
        }
    }
    let token = token.ok_or_else(|| Error::usage("scan needs --token T, the task's token"))?;
    let bytes = terminal::read_tail(&Source::from_arg(file), tail)?;
    let views = terminal::scan(&bytes, &token::marker(&prefix, &token), cols, json);
    if json {
        let report = serde_json::json!({ "found": views.any(), "views": views.names() });
        stdout(format!("{report}\n").as_bytes())?;
    }
    Ok(if views.any() {
        Exit::Success
    } else {
        Exit::Negative
    })
}

fn defang_command(args: Vec<OsString>) -> Result<Exit> {
    let mut args = defs::Args::new(args, Scope::of(NAME, "defang"));
    let mut prefixes = vec![Prefix::default()];
    let mut file = None;
    while let Some(given) = args.next()? {
        let (flag, value) = match given {
            Given::Help => return help(&help_of(HELP_DEFANG, "defang")),
            Given::Value(value) => {
                set_file(&mut file, value)?;
                continue;
            }
            Given::Flag(flag, value) => (flag, value.unwrap_or_default()),
        };
        match flag.name {
            "--prefix" => prefixes.push(Prefix::parse(&flag.text(value)?)?),
            _ => return Err(flag.unread()),
        }
    }
    let bytes = Source::from_arg(file).read_capped(MAX_TEXT, "the text")?;
    print(&defang_bytes(&bytes, &prefixes))
}

fn set_file(file: &mut Option<PathBuf>, value: OsString) -> Result<()> {
    if file.is_some() {
        return Err(Error::usage(format!(
            "unexpected argument {:?}: give at most one FILE (or - for standard input)",
            value.to_string_lossy()
        )));
    }
    *file = Some(PathBuf::from(value));
    Ok(())
}
