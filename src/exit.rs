//! Every exit code vigil uses, named once (SPEC §2).

use std::process::ExitCode;

/// How a vigil command ends. CLI commands use all three; hooks use `Success` and,
/// only to block on purpose, `Block`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Yes: declared, found, verified, written.
    Success = 0,
    /// A negative verdict: not declared, not found, not verified.
    Negative = 1,
    /// A usage or input error. In a hook this same code blocks, so fail-open hooks never use it.
    Usage = 2,
    /// `loop run`: the agent asks a human to decide (the loop ended `blocked`).
    Decide = 3,
    /// `loop run`: the loop never ran (the command did not start, or no session claimed it).
    NotRun = 4,
}

impl Exit {
    /// Exit 2 blocks the stop in both Claude Code and Codex.
    pub const BLOCK: Exit = Exit::Usage;

    pub fn code(self) -> u8 {
        self as u8
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code())
    }
}

/// A process's exit status as a binary's main function returns it: std's `ExitCode` cannot be
/// read back, and the entry (`vigil::entry!`) hands the number to the C runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Code(pub u8);

impl Code {
    pub(crate) const SUCCESS: Code = Code(0);
}

impl From<Exit> for Code {
    fn from(exit: Exit) -> Code {
        Code(exit.code())
    }
}

impl From<u8> for Code {
    fn from(code: u8) -> Code {
        Code(code)
    }
}
