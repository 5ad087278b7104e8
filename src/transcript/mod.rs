//! The last assistant message (SPEC §2): `last_assistant_message` when the engine sends it,
//! else the transcript read backwards from its end. A transcript can be gigabytes; only its
//! tail is read, so a 1 GB transcript costs what a 1 MB one does.

pub(crate) mod usage;

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde::Deserialize;

use crate::cli::hook::HookInput;
use crate::error::{Error, Result};
use crate::sys::files;
use crate::sys::time;

/// The most a backwards read will cover before giving up (the answer is then "no message").
pub(crate) const TAIL_BUDGET: u64 = 32 * 1024 * 1024;
const CHUNK: usize = 64 * 1024;

/// Where the message came from, for diagnostics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MessageSource {
    Hook,
    Transcript,
}

/// The message a Stop hook should judge: `last_assistant_message` when present (the
/// transcript can lag behind the current turn), else the transcript's last assistant text.
/// `Ok(None)` when there is neither; an error when a named transcript cannot be read.
pub(crate) fn last_message(input: &HookInput) -> Result<Option<(String, MessageSource)>> {
    if let Some(message) = &input.last_assistant_message {
        return Ok(Some((message.clone(), MessageSource::Hook)));
    }
    let Some(path) = &input.transcript_path else {
        return Ok(None);
    };
    Ok(last_assistant_text(path)?.map(|text| (text, MessageSource::Transcript)))
}

/// The text of the last main-chain assistant message, read from the end: every text block of
/// it (a message's blocks are separate lines sharing its `message.id`), joined in order.
///
/// Skipped: sidechain lines, lines with only thinking or tool_use blocks, system lines and
/// malformed lines. A real user prompt before any assistant text ends the search with `None`:
/// the assistant said nothing since, and an older turn's text must never stand in for this one.
pub fn last_assistant_text(path: &Path) -> Result<Option<String>> {
    last_assistant_text_of(path, false)
}

/// `last_assistant_text`, with `sidechain` for a subagent's own transcript, every line of
/// which is its side chain.
pub(crate) fn last_assistant_text_of(path: &Path, sidechain: bool) -> Result<Option<String>> {
    let io = |e: std::io::Error| Error::io("read transcript", path, &e);
    let file = files::open_regular(path).map_err(io)?;
    let mut lines = BackwardLines::new(file, TAIL_BUDGET).map_err(io)?;
    // The message found so far: its id and its text blocks, last first.
    let mut found: Option<(Option<String>, Vec<String>)> = None;
    while let Some(line) = lines.next_line().map_err(io)? {
        match (classify(&line, sidechain), &mut found) {
            (
                Entry::Assistant {
                    text: Some(text),
                    id,
                },
                None,
            ) => found = Some((id, vec![text])),
            (Entry::Assistant { text, id }, Some((found_id, texts))) => {
                if id.is_none() || id != *found_id {
                    break;
                }
                texts.extend(text);
            }
            (Entry::UserPrompt, None) => return Ok(None),
            (Entry::UserPrompt | Entry::ToolResult, Some(_)) => break,
            _ => {}
        }
    }
    Ok(found.map(|(_, mut texts)| {
        texts.reverse();
        texts.join("\n\n")
    }))
}

enum Entry {
    /// A main-chain assistant line, with its text blocks joined (`None` when it has none).
    Assistant {
        id: Option<String>,
        text: Option<String>,
    },
    UserPrompt,
    ToolResult,
    Skip,
}

#[derive(Deserialize)]
struct Line {
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(rename = "isSidechain")]
    is_sidechain: Option<bool>,
    message: Option<Message>,
}

#[derive(Deserialize)]
struct Message {
    id: Option<String>,
    role: Option<String>,
    content: Option<Content>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Blocks(Vec<Block>),
}

#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type")]
    kind: Option<String>,
    text: Option<String>,
}

fn classify(line: &[u8], sidechain: bool) -> Entry {
    let Ok(line) = serde_json::from_slice::<Line>(line) else {
        return Entry::Skip;
    };
    if line.is_sidechain == Some(true) && !sidechain {
        return Entry::Skip;
    }
    let Some(message) = line.message else {
        return Entry::Skip;
    };
    let role = line.kind.as_deref().or(message.role.as_deref());
    let texts: Vec<String> = match message.content {
        Some(Content::Text(text)) => vec![text],
        Some(Content::Blocks(blocks)) => blocks
            .into_iter()
            .filter(|b| b.kind.as_deref() == Some("text"))
            .filter_map(|b| b.text)
            .collect(),
        None => Vec::new(),
    };
    match role {
        Some("assistant") => Entry::Assistant {
            id: message.id,
            text: (!texts.is_empty()).then(|| texts.join("\n\n")),
        },
        Some("user") if !texts.is_empty() => Entry::UserPrompt,
        Some("user") => Entry::ToolResult,
        _ => Entry::Skip,
    }
}

/// What Claude Code 2.1.332 writes, as an informational system line of the transcript, when it
/// overrides a Stop hook that blocked too many times in a row and ends the turn ("A hook
/// blocked the turn from ending 9 consecutive times—overriding and ending turn…"). No hook
/// payload carries it.
const ENGINE_CUT: &str = "overriding and ending turn";
/// How much of a transcript's end is read for that line, and for vigil's blocks: the turn
/// since the last Stop, which is where they are. On a Stop with no loop record it is read
/// every time, so it is kept small.
const CUT_TAIL: u64 = 256 * 1024;

/// The lines of the file's last `budget` bytes that hold `needle`, newest first: one read
/// and one search of the tail, so a transcript without it costs no more than that.
fn tail_lines_with(path: &Path, budget: u64, needle: &str) -> Vec<Vec<u8>> {
    let Ok(mut file) = files::open_regular(path) else {
        return Vec::new();
    };
    let Ok(end) = file.seek(SeekFrom::End(0)) else {
        return Vec::new();
    };
    let start = end.saturating_sub(budget);
    let mut tail = Vec::with_capacity(usize::try_from(end - start).unwrap_or(0));
    if file.seek(SeekFrom::Start(start)).is_err()
        || file.take(end - start).read_to_end(&mut tail).is_err()
    {
        return Vec::new();
    }
    let mut lines: Vec<Vec<u8>> = Vec::new();
    let mut before = tail.len();
    for at in memchr::memmem::rfind_iter(&tail, needle.as_bytes()) {
        if at >= before {
            continue; // in the line already taken
        }
        let from = memchr::memrchr(b'\n', &tail[..at]).map_or(0, |n| n + 1);
        let to = memchr::memchr(b'\n', &tail[at..]).map_or(tail.len(), |n| at + n);
        // A line cut by the start of the tail is not a whole line.
        if from == 0 && start > 0 {
            break;
        }
        lines.push(tail[from..to].to_vec());
        before = from;
    }
    lines
}

/// The newest line in which Claude Code says it ended a turn over a Stop hook's block, when it
/// was written after `after` (seconds since the epoch): its time (RFC 3339) and its text. Only
/// the transcript's last 256 KiB are read, and only lines of type `system`, subtype `informational`
/// count (a model that writes the words in its own message writes an `assistant` line).
pub(crate) fn engine_cut_after(path: &Path, after: f64) -> Option<(String, String)> {
    for line in tail_lines_with(path, CUT_TAIL, ENGINE_CUT) {
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(&line) else {
            continue;
        };
        let (Some(content), Some(at)) = (value["content"].as_str(), value["timestamp"].as_str())
        else {
            continue;
        };
        if value["type"] != "system"
            || value["subtype"] != "informational"
            || !content.contains(ENGINE_CUT)
        {
            continue;
        }
        // The newest cut decides: one from before `after` was seen already.
        return (time::parse_rfc3339(at)? > after).then(|| (at.to_string(), content.to_string()));
    }
    None
}

/// Whether the transcript's last 256 KiB hold a block of a vigil loop, as Claude Code 2.1.332
/// writes one: an `attachment` line of type `hook_blocking_error` on `Stop` whose blocking
/// error is vigil's loop line (`vigil loop N/M: …`). A witness that the session ran a loop,
/// for when its record is gone; it can only make a verdict worse.
pub(crate) fn vigil_loop_blocked(path: &Path) -> bool {
    tail_lines_with(path, CUT_TAIL, "hook_blocking_error")
        .iter()
        .filter_map(|line| serde_json::from_slice::<serde_json::Value>(line).ok())
        .any(|value| {
            let attachment = &value["attachment"];
            let error = attachment["blockingError"]["blockingError"]
                .as_str()
                .unwrap_or("");
            value["type"] == "attachment"
                && attachment["type"] == "hook_blocking_error"
                && attachment["hookEvent"] == "Stop"
                && error.contains("vigil loop ")
        })
}

/// Lines of a file from the last to the first, reading chunks from the end, never more than
/// `budget` bytes in all. A line longer than a chunk grows the chunk, so copying stays linear.
pub(crate) struct BackwardLines {
    file: File,
    /// Start of the part of the file not yet read.
    pos: u64,
    /// Bytes read but not yet returned: the file's bytes from `pos` up to the last line given.
    pending: Vec<u8>,
    budget: u64,
    start_budget: u64,
    done: bool,
}

impl BackwardLines {
    pub(crate) fn new(mut file: File, budget: u64) -> std::io::Result<BackwardLines> {
        let pos = file.seek(SeekFrom::End(0))?;
        BackwardLines::ending_at(file, pos, budget)
    }

    /// Where the bytes not yet given as lines end: the file's first `unread()` bytes are still
    /// to read (the newline after them, if any, was given with the line after it).
    pub(crate) fn unread(&self) -> u64 {
        self.pos + self.pending.len() as u64
    }

    /// How many bytes have been read so far.
    pub(crate) fn read_so_far(&self) -> u64 {
        self.start_budget - self.budget
    }

    /// Lines of the file's first `end` bytes, from the last to the first.
    pub(crate) fn ending_at(file: File, end: u64, budget: u64) -> std::io::Result<BackwardLines> {
        let pos = end;
        Ok(BackwardLines {
            start_budget: budget,
            file,
            pos,
            pending: Vec::new(),
            budget,
            done: false,
        })
    }

    /// The next line going backwards (without its newline), or `None` at the start of the
    /// file or when the budget is spent.
    pub(crate) fn next_line(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        let mut searched = self.pending.len();
        loop {
            if let Some(newline) = self.pending[..searched].iter().rposition(|&b| b == b'\n') {
                let line = self.pending.split_off(newline + 1);
                self.pending.truncate(newline);
                return Ok(Some(line));
            }
            if self.pos == 0 || self.budget == 0 {
                if self.done || (self.budget == 0 && self.pos > 0) {
                    return Ok(None);
                }
                self.done = true;
                return Ok(Some(std::mem::take(&mut self.pending)));
            }
            let want = CHUNK.max(self.pending.len()) as u64;
            let take = want.min(self.pos).min(self.budget);
            self.pos -= take;
            self.budget -= take;
            self.file.seek(SeekFrom::Start(self.pos))?;
            let mut chunk = vec![0u8; take as usize];
            self.file.read_exact(&mut chunk)?;
            searched = chunk.len();
            chunk.extend_from_slice(&self.pending);
            self.pending = chunk;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_lines_with_gives_whole_lines_newest_first_each_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let text = "cut-off needle line\nno\nneedle one needle\nneither\nneedle two\n";
        std::fs::write(&path, text).unwrap();
        let lines = tail_lines_with(&path, text.len() as u64, "needle");
        assert_eq!(
            lines,
            vec![
                b"needle two".to_vec(),
                b"needle one needle".to_vec(),
                b"cut-off needle line".to_vec()
            ]
        );
        // A budget that starts inside the first line leaves it out: it is not whole.
        let lines = tail_lines_with(&path, text.len() as u64 - 3, "needle");
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(tail_lines_with(&dir.path().join("none"), 100, "needle").is_empty());
    }
    use std::io::Write;

    fn lines_of(content: &[u8], budget: u64) -> Vec<Vec<u8>> {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(content).unwrap();
        let mut lines = BackwardLines::new(file, budget).unwrap();
        let mut out = Vec::new();
        while let Some(line) = lines.next_line().unwrap() {
            out.push(line);
        }
        out
    }

    #[test]
    fn backward_lines_come_last_first() {
        assert_eq!(
            lines_of(b"a\nbb\nccc", 1 << 20),
            vec![b"ccc".to_vec(), b"bb".to_vec(), b"a".to_vec()]
        );
        assert_eq!(lines_of(b"a\n", 1 << 20), vec![b"".to_vec(), b"a".to_vec()]);
        assert!(lines_of(b"", 1 << 20).iter().all(|l| l.is_empty()));
    }

    #[test]
    fn backward_lines_handle_lines_longer_than_a_chunk() {
        let long = vec![b'x'; CHUNK * 3 + 7];
        let mut content = b"first\n".to_vec();
        content.extend_from_slice(&long);
        content.extend_from_slice(b"\nlast");
        let lines = lines_of(&content, 1 << 30);
        assert_eq!(lines, vec![b"last".to_vec(), long, b"first".to_vec()]);
    }

    #[test]
    fn backward_lines_stop_at_the_budget() {
        let mut content = Vec::new();
        for _ in 0..10_000 {
            content.extend_from_slice(b"0123456789\n");
        }
        let lines = lines_of(&content, 1000);
        assert!(
            lines.len() < 100,
            "{} lines read within a 1000-byte budget",
            lines.len()
        );
    }
}
