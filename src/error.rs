//! The error type: its `Display` is the one useful line a user reads (SPEC P5).

use std::fmt;
use std::io;
use std::path::Path;

use crate::exit::Exit;

#[derive(Debug)]
pub enum Error {
    /// The command line is wrong: an unknown flag, a missing value, a bad value.
    Usage(String),
    /// The input (hook JSON, a file named on the command line) cannot be used.
    Input(String),
    /// The operating system refused a read or a write.
    Io(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn usage(message: impl Into<String>) -> Error {
        Error::Usage(message.into())
    }

    pub fn input(message: impl Into<String>) -> Error {
        Error::Input(message.into())
    }

    /// An I/O error with the path it concerns and what was being done.
    pub fn io(action: &str, path: &Path, err: &io::Error) -> Error {
        Error::Io(format!(
            "cannot {action} {}: {}",
            path.display(),
            plain_io(err)
        ))
    }

    /// An error of an `fs_err` call, whose message already names what was done and to which
    /// path (``failed to create directory `/x`: Permission denied``).
    pub fn fs(err: io::Error) -> Error {
        Error::Io(plain_io(&err))
    }

    /// Every error of a CLI command exits 2 (SPEC §2).
    pub fn exit(&self) -> Exit {
        Exit::Usage
    }
}

/// `io::Error` without the "(os error N)" suffix, which tells a user nothing.
pub(crate) fn plain_io(err: &io::Error) -> String {
    let text = err.to_string();
    match text.find(" (os error") {
        Some(cut) => text[..cut].to_string(),
        None => text,
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage(message) | Error::Input(message) | Error::Io(message) => {
                f.write_str(message)
            }
        }
    }
}

impl std::error::Error for Error {}

impl From<lexopt::Error> for Error {
    fn from(err: lexopt::Error) -> Error {
        Error::Usage(format!("{err}; see --help"))
    }
}
