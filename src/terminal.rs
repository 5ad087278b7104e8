//! Terminal output as evidence (SPEC §3, `scan`): a bounded tail, seen three ways.
//!
//! A PTY stream is a rendering protocol, not a document: a marker can arrive split by escape
//! sequences, framed by box-drawing gutters, soft-wrapped, or painted in pieces with cursor
//! moves while something else repaints between them. So the tail is scanned as text, as
//! flattened text, and as the screen a user would see.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::num::NonZeroU16;
use std::os::fd::AsFd;
use std::path::Path;

use crate::error::{Error, Result};
use crate::input::Source;

pub const DEFAULT_TAIL: u64 = 64 * 1024;
pub const DEFAULT_COLS: u16 = 200;
/// Rows of the virtual screen: taller than any terminal a TUI paints on absolutely.
const SCREEN_ROWS: u16 = 100;
/// Lines of scrollback kept above the screen.
const SCROLLBACK: usize = 2000;

/// Reads the last `tail` bytes of a source: seeking when it is a regular file (so a 1 GB log
/// costs what a 1 MB one does, also when it is redirected to standard input), streaming and
/// keeping the tail otherwise. The cut is moved forward to a UTF-8 boundary.
pub fn read_tail(source: &Source, tail: u64) -> Result<Vec<u8>> {
    let (file, path) = match source {
        Source::File(path) => (
            File::open(path).map_err(|e| Error::io("read", path, &e))?,
            path.as_path(),
        ),
        Source::Stdin => {
            let path = Path::new("standard input");
            let fd = std::io::stdin()
                .as_fd()
                .try_clone_to_owned()
                .map_err(|e| Error::io("read", path, &e))?;
            (File::from(fd), path)
        }
    };
    let bytes = tail_of(file, tail).map_err(|e| Error::io("read", path, &e))?;
    Ok(cut_to_char_boundary(&bytes).to_vec())
}

/// The last `tail` bytes of an open file (the whole of a pipe is read, keeping its tail).
pub fn tail_of_file(file: File, tail: u64) -> std::io::Result<Vec<u8>> {
    tail_of(file, tail)
}

fn tail_of(mut file: File, tail: u64) -> std::io::Result<Vec<u8>> {
    let meta = file.metadata()?;
    if meta.is_file() {
        let start = meta.len().saturating_sub(tail);
        file.seek(SeekFrom::Start(start))?;
        let mut bytes = Vec::with_capacity((meta.len() - start) as usize);
        file.take(tail).read_to_end(&mut bytes)?;
        return Ok(bytes);
    }
    // A pipe: read it all, keeping no more than the tail (and a slack to drain in bulk).
    let cap = usize::try_from(tail).unwrap_or(usize::MAX);
    let slack = cap.max(1 << 20);
    let mut kept = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        kept.extend_from_slice(&chunk[..n]);
        if kept.len() > cap.saturating_add(slack) {
            kept.drain(..kept.len() - cap);
        }
    }
    if kept.len() > cap {
        kept.drain(..kept.len() - cap);
    }
    Ok(kept)
}

/// Drops leading UTF-8 continuation bytes (at most three) left by a cut inside a character.
pub fn cut_to_char_boundary(bytes: &[u8]) -> &[u8] {
    let skip = bytes
        .iter()
        .take(3)
        .take_while(|b| (0x80..0xC0).contains(*b))
        .count();
    &bytes[skip..]
}

/// Calls `keep(offset, ch)` for every character the flattened view keeps, with its byte offset
/// in `bytes`: escape sequences (CSI, OSC, DCS, SOS, PM, APC and the short forms), C0 and C1
/// controls, U+2500 to U+259F (box drawing, block elements) and all whitespace are dropped.
/// Invalid UTF-8 is kept as U+FFFD, so it breaks a marker as it does on a screen.
pub fn for_each_kept(bytes: &[u8], mut keep: impl FnMut(usize, char)) {
    let mut escape = Escape::None;
    let mut at = 0;
    while at < bytes.len() {
        let (c, len) = char_at(bytes, at);
        match escape.step(c) {
            Step::Text if is_kept(c) => keep(at, c),
            Step::Again => continue,
            Step::Text | Step::Swallowed => {}
        }
        at += len;
    }
}

fn is_kept(c: char) -> bool {
    !(c.is_control() || c.is_whitespace() || ('\u{2500}'..='\u{259f}').contains(&c))
}

/// The character at `at` and its length; an invalid sequence is one U+FFFD.
fn char_at(bytes: &[u8], at: usize) -> (char, usize) {
    let first = bytes[at];
    if first.is_ascii() {
        return (char::from(first), 1);
    }
    let end = (at + 4).min(bytes.len());
    let valid = match std::str::from_utf8(&bytes[at..end]) {
        Ok(text) => text,
        Err(e) if e.valid_up_to() > 0 => {
            std::str::from_utf8(&bytes[at..at + e.valid_up_to()]).unwrap_or("")
        }
        Err(e) => return ('\u{fffd}', e.error_len().map_or(end - at, usize::from)),
    };
    valid
        .chars()
        .next()
        .map_or(('\u{fffd}', 1), |c| (c, c.len_utf8()))
}

/// Where the flattener is inside an escape sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Escape {
    None,
    /// After ESC.
    Start,
    /// After ESC and intermediate bytes (`ESC ( B`).
    Intermediate,
    /// Control sequence: parameters and intermediates until a final byte.
    Csi,
    /// OSC, DCS, SOS, PM, APC: until BEL or ST.
    ControlString,
    /// ESC inside a control string: `\\` completes ST.
    ControlStringEsc,
}

enum Step {
    /// Ordinary text.
    Text,
    /// Part of an escape sequence.
    Swallowed,
    /// The sequence ended without this character: read it again as text.
    Again,
}

impl Escape {
    fn step(&mut self, c: char) -> Step {
        use Escape::*;
        let (next, step) = match (*self, c) {
            (None, '\u{1b}') => (Start, Step::Swallowed),
            (None, '\u{9b}') => (Csi, Step::Swallowed),
            (None, '\u{90}' | '\u{98}' | '\u{9d}' | '\u{9e}' | '\u{9f}') => {
                (ControlString, Step::Swallowed)
            }
            (None, _) => (None, Step::Text),
            (Start, '[') => (Csi, Step::Swallowed),
            (Start, ']' | 'P' | 'X' | '^' | '_') => (ControlString, Step::Swallowed),
            (Start | Intermediate, ' '..='/') => (Intermediate, Step::Swallowed),
            (Start | Intermediate, '0'..='~') => (None, Step::Swallowed),
            (Csi, ' '..='?') => (Csi, Step::Swallowed),
            (Csi, '@'..='~') => (None, Step::Swallowed),
            (ControlString, '\u{7}' | '\u{9c}') => (None, Step::Swallowed),
            (ControlString, '\u{1b}') => (ControlStringEsc, Step::Swallowed),
            (ControlString, _) => (ControlString, Step::Swallowed),
            (ControlStringEsc, '\\') => (None, Step::Swallowed),
            (Start | Intermediate | Csi | ControlStringEsc, _) => (None, Step::Again),
        };
        *self = next;
        step
    }
}

/// Output made readable as plain text: escape sequences and control characters removed, but
/// line breaks and tabs kept; a carriage return starts the line over, as on a terminal (so a
/// progress bar leaves only its last state).
pub fn plain_text(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len());
    let mut escape = Escape::None;
    let mut line_start = 0;
    let mut at = 0;
    while at < bytes.len() {
        let (c, len) = char_at(bytes, at);
        match escape.step(c) {
            Step::Again => continue,
            Step::Swallowed => {}
            Step::Text => match c {
                '\n' => {
                    text.push('\n');
                    line_start = text.len();
                }
                '\r' => {
                    if bytes.get(at + 1) != Some(&b'\n') {
                        text.truncate(line_start);
                    }
                }
                '\t' => text.push('\t'),
                c if c.is_control() => {}
                c => text.push(c),
            },
        }
        at += len;
    }
    text
}

/// The flattened view: what `for_each_kept` keeps, in order.
pub fn flatten(bytes: &[u8]) -> String {
    let mut flat = String::with_capacity(bytes.len());
    for_each_kept(bytes, |_, c| flat.push(c));
    flat
}

/// The screen view: the bytes replayed on a virtual terminal `cols` wide, scrollback and
/// screen rows joined top to bottom, then flattened (so gutters and whitespace are gone).
pub fn screen(bytes: &[u8], cols: u16) -> String {
    let cols = NonZeroU16::new(cols).unwrap_or(NonZeroU16::MIN);
    let rows = NonZeroU16::new(SCREEN_ROWS).unwrap_or(NonZeroU16::MIN);
    let mut parser = vt100::Parser::new(rows, cols, SCROLLBACK);
    let limit = u32::from(cols.get().max(SCREEN_ROWS));
    parser.process(&clamp_csi_parameters(bytes, limit));
    let screen = parser.screen_mut();
    let history = screen.scrollback_len();
    let mut text = String::new();
    // View the scrollback a screenful at a time, from the oldest line down to the live screen.
    let mut next_line = 0;
    loop {
        let offset = history.saturating_sub(next_line);
        screen.set_scrollback(offset);
        let top = history - offset;
        for (i, row) in screen.rows(0, cols.get()).enumerate() {
            if top + i >= next_line {
                text.push_str(&row);
                text.push('\n');
            }
        }
        next_line = top + usize::from(SCREEN_ROWS);
        if offset == 0 {
            break;
        }
    }
    screen.set_scrollback(0);
    flatten(text.as_bytes())
}

/// Caps every number in a control sequence at `limit`. Past the screen's size a count or a
/// position means the same on the screen, but `ESC[65535b` (repeat a character 65535 times)
/// would make the replay's work unbounded by the tail it reads.
pub fn clamp_csi_parameters(bytes: &[u8], limit: u32) -> std::borrow::Cow<'_, [u8]> {
    let limit_text = limit.to_string();
    let mut out: Option<Vec<u8>> = None;
    let mut i = 0;
    while i < bytes.len() {
        let introducer = match (bytes[i], bytes.get(i + 1)) {
            (0x1b, Some(b'[')) | (0xc2, Some(0x9b)) => 2,
            _ => 0,
        };
        if introducer == 0 {
            if let Some(out) = &mut out {
                out.push(bytes[i]);
            }
            i += 1;
            continue;
        }
        let params_start = i + introducer;
        let mut j = params_start;
        while j < bytes.len() && (0x30..=0x3f).contains(&bytes[j]) {
            j += 1;
        }
        let params = &bytes[params_start..j];
        let exceeds = |n: &[u8]| {
            n.len() > limit_text.len() || (n.len() == limit_text.len() && n > limit_text.as_bytes())
        };
        if out.is_some() || params.split(|b| !b.is_ascii_digit()).any(exceeds) {
            let out = out.get_or_insert_with(|| bytes[..i].to_vec());
            out.extend_from_slice(&bytes[i..params_start]);
            let mut first = true;
            for piece in params.split(|b| *b == b';') {
                if !first {
                    out.push(b';');
                }
                first = false;
                let digits = piece.iter().take_while(|b| b.is_ascii_digit()).count();
                let number = &piece[..digits];
                out.extend_from_slice(if exceeds(number) {
                    limit_text.as_bytes()
                } else {
                    number
                });
                out.extend_from_slice(&piece[digits..]);
            }
        }
        i = j;
    }
    match out {
        Some(out) => std::borrow::Cow::Owned(out),
        None => std::borrow::Cow::Borrowed(bytes),
    }
}

/// Which views found the marker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Views {
    pub text: bool,
    pub flattened: bool,
    pub screen: bool,
}

impl Views {
    pub fn any(self) -> bool {
        self.text || self.flattened || self.screen
    }

    pub fn names(self) -> Vec<&'static str> {
        [
            (self.text, "text"),
            (self.flattened, "flattened"),
            (self.screen, "screen"),
        ]
        .into_iter()
        .filter_map(|(found, name)| found.then_some(name))
        .collect()
    }
}

/// Scans a tail for a marker. With `all` false it stops at the first view that finds it,
/// so the screen is replayed only when the cheaper views found nothing.
pub fn scan(tail: &[u8], marker: &str, cols: u16, all: bool) -> Views {
    let needle = marker.as_bytes();
    let mut views = Views {
        text: contains(tail, needle),
        ..Views::default()
    };
    if all || !views.any() {
        views.flattened = flatten(tail).contains(marker);
    }
    if all || !views.any() {
        views.screen = screen(tail, cols).contains(marker);
    }
    views
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(haystack, needle).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flatten_drops_escapes_controls_gutters_and_whitespace() {
        let raw =
            "\x1b[1;31m<<<A\x1b]0;title\x07B\x1bP q\x1b\\C \u{2502}\tD\r\n\x1b(B\x1b7E\u{2588}";
        assert_eq!(flatten(raw.as_bytes()), "<<<ABCDE");
    }

    #[test]
    fn plain_text_keeps_lines_and_drops_escapes_and_overwritten_progress() {
        let raw = b"\x1b[31merror\x1b[0m: bad\r\n 10%\r 50%\r100%\n\tdone\x07\n";
        assert_eq!(plain_text(raw), "error: bad\n100%\n\tdone\n");
    }

    #[test]
    fn flatten_keeps_invalid_utf8_as_a_replacement_character() {
        assert_eq!(flatten(b"a\xffb"), "a\u{fffd}b");
    }

    #[test]
    fn cut_moves_forward_past_continuation_bytes() {
        let text = "é<<<".as_bytes();
        assert_eq!(cut_to_char_boundary(&text[1..]), b"<<<");
    }

    #[test]
    fn csi_numbers_are_capped_and_nothing_else_changes() {
        assert_eq!(
            &*clamp_csi_parameters(b"x\x1b[65535b\x1b[3;99999Hy", 200),
            b"x\x1b[200b\x1b[3;200Hy"
        );
        assert_eq!(
            &*clamp_csi_parameters(b"\x1b[?1049h\x1b[200;1H", 200),
            b"\x1b[?1049h\x1b[200;1H"
        );
        assert!(matches!(
            clamp_csi_parameters(b"plain \x1b[31m", 200),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn screen_joins_scrollback_and_screen_in_order() {
        let mut bytes = Vec::new();
        for i in 0..250 {
            bytes.extend_from_slice(format!("line{i}\r\n").as_bytes());
        }
        let screen = screen(&bytes, 40);
        let expected: String = (0..250).map(|i| format!("line{i}")).collect();
        assert_eq!(screen, expected);
    }
}
