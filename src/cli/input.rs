//! Reading what a command is given: standard input or a file named on the command line,
//! always with a size cap so a runaway producer cannot exhaust memory.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::sys::files::{read_capped, stdin_is_terminal};

/// Where input comes from: `-` (or nothing) is standard input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    Stdin,
    File(PathBuf),
}

impl Source {
    pub(crate) fn from_arg(arg: Option<PathBuf>) -> Source {
        match arg {
            Some(path) if path.as_os_str() != "-" => Source::File(path),
            _ => Source::Stdin,
        }
    }

    /// Reads the whole source, refusing anything larger than `cap` bytes. Standard input that
    /// is a terminal is refused at once (a binary run by hand would wait on it without a word).
    pub(crate) fn read_capped(&self, cap: u64, what: &str) -> Result<Vec<u8>> {
        match self {
            Source::Stdin if stdin_is_terminal() => Err(Error::usage(format!(
                "reads {what} on standard input, which is a terminal; pipe it in (e.g. < payload.json) or see --help"
            ))),
            Source::Stdin => read_capped(std::io::stdin().lock(), cap, what, Path::new("-")),
            Source::File(path) => {
                let file = std::fs::File::open(path).map_err(|e| Error::io("read", path, &e))?;
                read_capped(file, cap, what, path)
            }
        }
    }
}
