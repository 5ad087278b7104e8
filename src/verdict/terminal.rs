//! Terminal output as evidence (SPEC §3, `scan`): a bounded tail, seen three ways.
//!
//! A PTY stream is a rendering protocol, not a document: a marker can arrive split by escape
//! sequences, framed by box-drawing gutters, soft-wrapped, or painted in pieces with cursor
//! moves while something else repaints between them. So the tail is scanned as text, as
//! flattened text, and as the screen a user would see.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::num::NonZeroU16;
use std::path::Path;

use crate::cli::input::Source;
use crate::error::{Error, Result};
use crate::sys::files;

pub(crate) const DEFAULT_TAIL: u64 = 64 * 1024;
pub(crate) const DEFAULT_COLS: u16 = 200;
/// Rows of the virtual screen: taller than any terminal a TUI paints on absolutely.
const SCREEN_ROWS: u16 = 100;
/// Lines of scrollback kept above the screen.
const SCROLLBACK: usize = 2000;

/// Reads the last `tail` bytes of a source: seeking when it is a regular file (so a 1 GB log
/// costs what a 1 MB one does, also when it is redirected to standard input), streaming and
/// keeping the tail otherwise. The cut is moved forward to a UTF-8 boundary.
pub(crate) fn read_tail(source: &Source, tail: u64) -> Result<Vec<u8>> {
    let (file, path) = match source {
        Source::File(path) => (
            File::open(path).map_err(|e| Error::io("read", path, &e))?,
            path.as_path(),
        ),
        Source::Stdin => {
            let path = Path::new("standard input");
            let file = files::stdin_file().map_err(|e| Error::io("read", path, &e))?;
            (file, path)
        }
    };
    let bytes = tail_of(file, tail).map_err(|e| Error::io("read", path, &e))?;
    Ok(cut_to_char_boundary(&bytes).to_vec())
}

/// The last `tail` bytes of an open file (the whole of a pipe is read, keeping its tail).
pub(crate) fn tail_of_file(file: File, tail: u64) -> std::io::Result<Vec<u8>> {
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

/// Calls `keep(offset, ch)` for every character the flattened view keeps, with the byte offset
/// it starts at in `bytes`. The bytes are read by the screen model's own parser (vte), so what
/// the screen swallows is swallowed here too: escape sequences of every kind, C0 and C1 controls
/// (which vte executes, and the screen ignores), sequences cut short by CAN or SUB, bytes after
/// a lone ESC. Then, as the screen does, a character of no width is dropped where the cursor
/// may stand in the first column, U+FFFD (invalid UTF-8) is never drawn, and `CSI b` repeats
/// the last character. Of what is printed, whitespace and U+2500 to U+259F (box drawing, block
/// elements) are dropped too.
pub fn for_each_kept(bytes: &[u8], keep: impl FnMut(usize, char)) {
    let mut parser = vte::Parser::new();
    let mut printer = Printer {
        keep,
        offset: 0,
        run: false,
        printed: false,
        may_be_first_column: true,
        last: None,
    };
    // One character's bytes at a time, so that everything printed is known by its offset (a
    // replacement character for bytes held back from an earlier call is never part of a
    // marker). After a print the parser is at ground, where each printable ASCII byte prints
    // itself: a run of them goes in one call, its offsets counted as they print.
    let mut at = 0;
    while at < bytes.len() {
        if printer.printed {
            let run = bytes[at..]
                .iter()
                .take_while(|b| (0x20..0x7f).contains(*b))
                .count();
            if run > 1 {
                printer.offset = at;
                printer.run = true;
                parser.advance(&mut printer, &bytes[at..at + run]);
                printer.run = false;
                at += run;
                continue;
            }
        }
        let len = char_len(bytes, at);
        printer.offset = at;
        printer.printed = false;
        parser.advance(&mut printer, &bytes[at..at + len]);
        at += len;
    }
}

/// The width the screen gives a printed character: `None` for one it never draws.
fn screen_width(c: char) -> Option<usize> {
    use unicode_width::UnicodeWidthChar;
    c.width()
}

/// What the terminal model prints, handed to `keep` when the flattened view keeps it.
struct Printer<F: FnMut(usize, char)> {
    keep: F,
    /// Where the character being printed starts.
    offset: usize,
    /// A run of printable ASCII is being parsed: each such character is one byte on.
    run: bool,
    /// The last thing parsed was printed, so the parser is at ground.
    printed: bool,
    /// The cursor may be in the first column (at the start, after a CR, a backspace or any
    /// sequence but SGR): where the screen drops a character of no width.
    may_be_first_column: bool,
    /// The last character printed with a width, which `CSI b` repeats.
    last: Option<char>,
}

impl<F: FnMut(usize, char)> Printer<F> {
    fn put(&mut self, c: char) {
        // The screen never draws U+FFFD (what the parser makes of invalid UTF-8) or a C1
        // control, so a marker split by either is whole on the screen.
        if c == '\u{fffd}' || ('\u{80}'..'\u{a0}').contains(&c) {
            return;
        }
        let Some(width) = screen_width(c) else {
            return;
        };
        if width == 0 && self.may_be_first_column {
            return;
        }
        if width > 0 {
            self.may_be_first_column = false;
            self.last = Some(c);
        }
        if is_kept(c) {
            (self.keep)(self.offset, c);
        }
    }
}

/// The most `CSI b` repeats: past any run of one character a marker holds (a marker is at most
/// 172 characters), more change nothing.
const MAX_REPEAT: u16 = 200;

impl<F: FnMut(usize, char)> vte::Perform for Printer<F> {
    fn print(&mut self, c: char) {
        self.put(c);
        // A replacement for bytes held back from an earlier call is printed before this call's
        // own bytes are read, which may leave ground (an ESC): it says nothing of the state.
        self.printed = c != '\u{fffd}';
        if self.run && c.is_ascii() {
            self.offset += 1;
        }
    }

    fn execute(&mut self, byte: u8) {
        self.printed = false;
        match byte {
            b'\r' | 0x08 => self.may_be_first_column = true,
            b'\t' => self.may_be_first_column = false,
            _ => {}
        }
    }

    fn csi_dispatch(&mut self, params: &vte::Params, intermediates: &[u8], _: bool, action: char) {
        self.printed = false;
        match (intermediates, action) {
            ([], 'm') => {}
            ([], 'b') => {
                let count = params.iter().next().and_then(|p| p.first().copied());
                let count = count.filter(|n| *n > 0).unwrap_or(1).min(MAX_REPEAT);
                if let Some(c) = self.last {
                    for _ in 0..count {
                        self.put(c);
                    }
                }
            }
            _ => self.may_be_first_column = true,
        }
    }

    fn esc_dispatch(&mut self, intermediates: &[u8], _: bool, byte: u8) {
        self.printed = false;
        // A character set (`ESC ( B`) and the keypad modes leave the cursor where it is.
        if intermediates.is_empty() && !matches!(byte, b'=' | b'>') {
            self.may_be_first_column = true;
        }
    }
}

fn is_kept(c: char) -> bool {
    !(c.is_control() || c.is_whitespace() || ('\u{2500}'..='\u{259f}').contains(&c))
}

/// The length of the character at `at`; an invalid sequence counts as its bytes up to where it
/// breaks (at least one).
fn char_len(bytes: &[u8], at: usize) -> usize {
    let first = bytes[at];
    if first.is_ascii() {
        return 1;
    }
    let end = (at + 4).min(bytes.len());
    match std::str::from_utf8(&bytes[at..end]) {
        Ok(text) => text.chars().next().map_or(1, char::len_utf8),
        Err(e) if e.valid_up_to() > 0 => std::str::from_utf8(&bytes[at..at + e.valid_up_to()])
            .ok()
            .and_then(|text| text.chars().next())
            .map_or(1, char::len_utf8),
        Err(e) => e.error_len().map_or(end - at, usize::from),
    }
}

/// Output made readable as plain text, read as the terminal model reads it: escape sequences
/// and control characters removed, but line breaks and tabs kept; a carriage return starts the
/// line over, as on a terminal (so a progress bar leaves only its last state).
pub(crate) fn plain_text(bytes: &[u8]) -> String {
    let mut plain = Plain {
        text: String::with_capacity(bytes.len()),
        line_start: 0,
        carriage_return: false,
    };
    vte::Parser::new().advance(&mut plain, bytes);
    plain.settle(false);
    plain.text
}

struct Plain {
    text: String,
    line_start: usize,
    /// A CR was the last thing read: it starts the line over unless an LF follows.
    carriage_return: bool,
}

impl Plain {
    fn settle(&mut self, line_feed: bool) {
        if std::mem::take(&mut self.carriage_return) && !line_feed {
            self.text.truncate(self.line_start);
        }
    }
}

impl vte::Perform for Plain {
    fn print(&mut self, c: char) {
        self.settle(false);
        if !c.is_control() {
            self.text.push(c);
        }
    }

    fn execute(&mut self, byte: u8) {
        self.settle(byte == b'\n');
        match byte {
            b'\n' => {
                self.text.push('\n');
                self.line_start = self.text.len();
            }
            b'\r' => self.carriage_return = true,
            b'\t' => self.text.push('\t'),
            _ => {}
        }
    }

    fn csi_dispatch(&mut self, _: &vte::Params, _: &[u8], _: bool, _: char) {
        self.settle(false);
    }

    fn esc_dispatch(&mut self, _: &[u8], _: bool, _: u8) {
        self.settle(false);
    }

    fn osc_dispatch(&mut self, _: &[&[u8]], _: bool) {
        self.settle(false);
    }

    fn hook(&mut self, _: &vte::Params, _: &[u8], _: bool, _: char) {
        self.settle(false);
    }
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
    text.retain(is_kept);
    text
}

/// Caps every number in a control sequence at `limit`. Past the screen's size a count or a
/// position means the same on the screen, but `ESC[65535b` (repeat a character 65535 times)
/// would make the replay's work unbounded by the tail it reads. A number is read as the
/// screen's parser reads it: leading zeros count for nothing (`ESC[0001b` repeats once), and a
/// C0 control inside the sequence is executed without ending it (`ESC[6\x005535b` is 65535), so
/// such controls are moved before the sequence, where they take effect all the same. Private
/// sequences (`ESC[?1049h`) hold mode numbers, and are left alone.
pub(crate) fn clamp_csi_parameters(bytes: &[u8], limit: u32) -> std::borrow::Cow<'_, [u8]> {
    let limit_text = limit.to_string();
    let exceeds = |n: &[u8]| {
        let n = &n[n.iter().take_while(|b| **b == b'0').count()..];
        n.len() > limit_text.len() || (n.len() == limit_text.len() && n > limit_text.as_bytes())
    };
    let mut out: Option<Vec<u8>> = None;
    let mut i = 0;
    while i < bytes.len() {
        // Only `ESC [` opens a control sequence: the screen's parser executes a C1 CSI (U+009B)
        // as a control of its own, which the screen ignores, so digits after it are text.
        if !(bytes[i] == 0x1b && bytes.get(i + 1) == Some(&b'[')) {
            if let Some(out) = &mut out {
                out.push(bytes[i]);
            }
            i += 1;
            continue;
        }
        let mut params = Vec::new();
        let mut controls = Vec::new();
        let mut j = i + 2;
        while let Some(&b) = bytes.get(j) {
            match b {
                0x30..=0x3f => params.push(b),
                // Executed where they stand (CAN, SUB and ESC end the sequence instead).
                0x00..=0x17 | 0x19 | 0x1c..=0x1f | 0x7f => controls.push(b),
                _ => break,
            }
            j += 1;
        }
        // A private sequence (`ESC[?1049h`) names modes, not counts: it is left as it is.
        let private = params.iter().any(|b| (0x3c..=0x3f).contains(b));
        let clamp = !private && params.split(|b| !b.is_ascii_digit()).any(exceeds);
        if clamp || out.is_some() {
            let out = out.get_or_insert_with(|| bytes[..i].to_vec());
            if !clamp {
                out.extend_from_slice(&bytes[i..j]);
            } else {
                out.extend_from_slice(&controls);
                out.extend_from_slice(b"\x1b[");
                let mut rest = params.as_slice();
                while !rest.is_empty() {
                    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
                    if digits == 0 {
                        out.push(rest[0]);
                        rest = &rest[1..];
                        continue;
                    }
                    let number = &rest[..digits];
                    out.extend_from_slice(if exceeds(number) {
                        limit_text.as_bytes()
                    } else {
                        number
                    });
                    rest = &rest[digits..];
                }
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
    pub(crate) fn any(self) -> bool {
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
///
/// The screen is not replayed when the tail never prints the marker's characters, each as
/// often as the marker holds it: every character on the screen was printed there, one print a
/// cell, and the flattened view keeps each print (and each `CSI b` repeat) as the screen does,
/// so a character the flattened view lacks, the screen lacks too. While a task runs, the
/// marker's token is usually not in the output at all, and this spares the replay, by far the
/// costliest view.
pub fn scan(tail: &[u8], marker: &str, cols: u16, all: bool) -> Views {
    let needle = marker.as_bytes();
    let mut views = Views {
        text: contains(tail, needle),
        ..Views::default()
    };
    if all || !views.any() {
        let flat = flatten(tail);
        views.flattened = flat.contains(marker);
        // One column is left out: there the screen drops a wide character without repeating
        // it, where the flattened view would repeat it (the CLI refuses fewer than 2 columns).
        if (all || !views.any()) && (cols < 2 || prints_enough(&flat, marker)) {
            views.screen = screen(tail, cols).contains(marker);
        }
    }
    views
}

/// Whether `printed` holds every character of `marker` at least as often as `marker` does.
fn prints_enough(printed: &str, marker: &str) -> bool {
    let mut needed: Vec<(char, usize)> = Vec::new();
    for c in marker.chars() {
        match needed.iter_mut().find(|(n, _)| *n == c) {
            Some((_, count)) => *count += 1,
            None => needed.push((c, 1)),
        }
    }
    let mut ascii = [0usize; 128];
    let mut other: Vec<(char, usize)> = Vec::new();
    for c in printed.chars() {
        if c.is_ascii() {
            ascii[c as usize] += 1;
        } else if let Some((_, count)) = other.iter_mut().find(|(n, _)| *n == c) {
            *count += 1;
        } else if needed.iter().any(|(n, _)| *n == c) {
            other.push((c, 1));
        }
    }
    needed.iter().all(|(c, count)| {
        let seen = if c.is_ascii() {
            ascii[*c as usize]
        } else {
            other.iter().find(|(n, _)| n == c).map_or(0, |(_, n)| *n)
        };
        seen >= *count
    })
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
    fn flatten_drops_invalid_utf8_as_the_screen_does() {
        assert_eq!(flatten(b"a\xffb\xe2\x94c\xef\xbf\xbdd"), "abcd");
        assert_eq!(screen(b"a\xffb\xe2\x94c\xef\xbf\xbdd", 20), "abcd");
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
    fn csi_numbers_are_read_as_the_screen_reads_them() {
        // Leading zeros count for nothing: one repeat stays one.
        assert!(matches!(
            clamp_csi_parameters(b"<\x1b[0001b\x1b[0000b", 200),
            std::borrow::Cow::Borrowed(_)
        ));
        // A C0 control inside the digits does not split the number; it moves before the
        // sequence, and so do subparameters after `:`.
        assert_eq!(
            &*clamp_csi_parameters(b"x\x1b[6\x005535b\x1b[38:2:99999m", 200),
            b"x\x00\x1b[200b\x1b[38:2:200m"
        );
        let replayed = |bytes: &[u8]| {
            let mut parser =
                vt100::Parser::new(NonZeroU16::new(5).unwrap(), NonZeroU16::new(20).unwrap(), 0);
            parser.process(bytes);
            parser.screen().contents()
        };
        let bytes = b"<\x1b[0001bA\x1b[2\x00b";
        assert_eq!(replayed(&clamp_csi_parameters(bytes, 200)), replayed(bytes));
        assert_eq!(replayed(bytes), "<<AAA");
    }

    #[test]
    fn a_marker_painted_out_of_order_with_a_repeat_is_found_on_the_screen_alone() {
        // The tail painted "VIGIL_A>>>" first, then "<" and a repeat of it twice before it:
        // only the screen shows "<<<VIGIL_A>>>", and its three "<" come from one print and a
        // repeat, which the check before the replay must count.
        let bytes = b"\x1b[1;4HVIGIL_A>>>\x1b[1;1H<\x1b[2b";
        let views = scan(bytes, "<<<VIGIL_A>>>", 40, true);
        assert!(
            !views.text && !views.flattened && views.screen,
            "{:?}",
            views.names()
        );
        // One "<" fewer printed, and the replay is skipped: the screen cannot show it.
        assert!(
            !scan(
                b"\x1b[1;4HVIGIL_A>>>\x1b[1;1H<\x1b[1b",
                "<<<VIGIL_A>>>",
                40,
                true
            )
            .any()
        );
        assert!(!prints_enough("<<VIGIL_A>>>", "<<<VIGIL_A>>>"));
        assert!(prints_enough("VIGIL_A>>><<<", "<<<VIGIL_A>>>"));
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
