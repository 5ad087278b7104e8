//! Writing to stdout and stderr the way every vigil binary does.

use std::io::Write;

use crate::error::{Error, plain_io};

/// Writes to stdout. A closed pipe (`| head`, `| grep -q`) is not an error: the answer still
/// stands in the exit code. Any other failure is an error for the binary to report.
pub(crate) fn stdout(bytes: &[u8]) -> Result<(), Error> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Error::Io(format!(
            "cannot write to standard output: {}",
            plain_io(&e)
        ))),
        _ => Ok(()),
    }
}

/// One line on stderr, starting with the binary's name (SPEC §2).
pub(crate) fn diagnostic(binary: &str, message: &str) {
    let _ = std::io::stderr()
        .lock()
        .write_all(diagnostic_line(binary, message).as_bytes());
}

/// The line [`diagnostic`] writes, with its newline.
pub(crate) fn diagnostic_line(binary: &str, message: &str) -> String {
    format!("{binary}: {}\n", message.replace('\n', " "))
}
