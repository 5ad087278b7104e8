//! Writing to stdout and stderr the way every vigil binary does.

use std::io::Write;

use crate::exit::Exit;

/// Writes to stdout; a closed pipe (`| head`) is a clean end, not an error.
pub fn stdout(bytes: &[u8]) -> Result<(), Exit> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(Exit::Success),
        Err(e) => {
            diagnostic("vigil", &format!("cannot write to standard output: {e}"));
            Err(Exit::Usage)
        }
    }
}

/// One line on stderr, starting with the binary's name (SPEC §2).
pub fn diagnostic(binary: &str, message: &str) {
    let line = message.replace('\n', " ");
    let _ = writeln!(std::io::stderr().lock(), "{binary}: {line}");
}
