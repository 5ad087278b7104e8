//! Token usage for `--max-tokens` (issue 17): counted from the usage records of the session's
//! transcript and of its subagents' transcripts (Claude Code), or of the session's rollout
//! (Codex), since the loop started, read incrementally: each
//! Stop reads only what was appended since the last one, from the offset the loop keeps.
//!
//! Counted: `input_tokens`, `cache_creation_input_tokens` and `output_tokens`: what each request
//! added and what the model wrote. Kept apart and shown, not counted: `cache_read_input_tokens`,
//! the context read again from the cache on every request, which grows with the length of the
//! session rather than with the work (a long session rereads its whole context on each turn, at a
//! tenth of the price). A message's usage is repeated on each of its content-block lines, so each
//! message id is counted once (its largest figures, when the lines differ).
//!
//! Here the transcripts are read, each from where the last Stop left it; what a line counts is
//! `counter`.

mod counter;

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error;
use crate::sys::files;
use crate::transcript::BackwardLines;
use counter::{Counter, timestamp, usage_of};

/// The most one Stop reads of one transcript: the rest is read at the next Stop.
const MAX_READ: u64 = 32 * 1024 * 1024;
/// How far back the first look at a transcript goes for lines written since the loop started
/// (the unit tests reach less, to test what lies beyond without writing 32 MiB).
const MAX_BACK: u64 = if cfg!(test) { 4096 } else { 32 * 1024 * 1024 };
/// The most one Stop reads of all transcripts together.
const MAX_PER_STOP: u64 = 64 * 1024 * 1024;
/// How many subagent transcripts a loop follows (those written since it started).
const MAX_FILES: usize = 128;
/// How many message ids each transcript remembers across Stops (a message's lines are
/// consecutive, so only the last few can continue in the next read).
const RECENT: usize = 2;

/// The tokens counted since a loop started, and how far each transcript was read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Tally {
    pub input: u64,
    pub cache_creation: u64,
    pub output: u64,
    /// Shown, not counted (see the module's documentation).
    pub cache_read: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<Mark>,
    /// Subagent transcripts written since the loop started that could not be followed (past
    /// `MAX_FILES`): the budget can no longer be kept, and the loop ends.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub untracked: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Tally {
    /// What `--max-tokens` is compared with.
    pub(crate) fn counted(&self) -> u64 {
        self.input
            .saturating_add(self.cache_creation)
            .saturating_add(self.output)
    }

    fn add(&mut self, usage: [u64; 4]) {
        self.input = self.input.saturating_add(usage[0]);
        self.cache_creation = self.cache_creation.saturating_add(usage[1]);
        self.output = self.output.saturating_add(usage[2]);
        self.cache_read = self.cache_read.saturating_add(usage[3]);
    }
}

/// The key of the session's own transcript among the marks.
const MAIN: &str = "transcript";

/// How far one transcript was read: the session's own as `transcript`, a subagent's by its
/// file name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Mark {
    pub path: String,
    pub dev: u64,
    pub ino: u64,
    pub offset: u64,
    /// The last messages counted, with what was counted of each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recent: Vec<Seen>,
    /// The newest line counted, in milliseconds since the epoch: a file put in this one's
    /// place is counted back only to there.
    #[serde(default, skip_serializing_if = "is_zero_ms")]
    pub last_ms: u64,
    /// Bytes the first look could not reach back to (it reads at most `MAX_BACK`): they are
    /// counted forward at the next Stops, their lines since the loop started only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog: Option<Backlog>,
}

fn is_zero_ms(n: &u64) -> bool {
    *n == 0
}

/// A range of a transcript still to count: from `from` up to `to`, where a line ends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Backlog {
    pub from: u64,
    pub to: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Seen {
    pub id: String,
    /// input, cache creation, output, cache read.
    pub usage: [u64; 4],
}

/// Reads what the transcripts gained since the last call into `tally`. `since` is when the
/// loop started (seconds since the epoch): a transcript seen for the first time is counted
/// back from its end to the first line older than that, and a subagent's transcript last
/// written before it is not followed at all. At most `MAX_PER_STOP` bytes are read in all; the
/// rest waits for the next Stop. `Err` says why the session's own transcript could not be
/// read (then nothing of it is counted); nothing here fails the gate.
pub(crate) fn update(
    tally: &mut Tally,
    transcript: &Path,
    since: f64,
) -> std::result::Result<(), String> {
    let mut left = MAX_PER_STOP;
    // The session's transcript is keyed by a word, not its path (which may be 4 KiB long): its
    // device and inode tell when another file has taken its place.
    let read = read_file(tally, transcript, MAIN, since, &mut left);
    let subagents = subagents_dir(transcript);
    let Ok(entries) = std::fs::read_dir(&subagents) else {
        return read;
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| is_agent_file(n))
        .collect();
    names.sort_unstable();
    for name in names {
        let known = tally.files.iter().any(|m| m.path == name);
        let path = subagents.join(&name);
        if !known {
            let written = std::fs::symlink_metadata(&path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0.0, |d| d.as_secs_f64());
            if written < since {
                continue;
            }
            // The main transcript's mark is one of the files.
            if tally.files.len() > MAX_FILES {
                tally.untracked = tally.untracked.saturating_add(1);
                continue;
            }
        }
        let _ = read_file(tally, &path, &name, since, &mut left);
    }
    read
}

/// `agent-<id>.jsonl`, the id of letters, digits, `-` and `_`, at most 64 of them.
fn is_agent_file(name: &str) -> bool {
    name.strip_prefix("agent-")
        .and_then(|n| n.strip_suffix(".jsonl"))
        .is_some_and(|id| {
            !id.is_empty()
                && id.len() <= 64
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

fn read_file(
    tally: &mut Tally,
    path: &Path,
    key: &str,
    since: f64,
    left: &mut u64,
) -> std::result::Result<(), String> {
    if *left == 0 {
        // This Stop has read its fill: the file waits for the next one, untouched.
        return Ok(());
    }
    let mut file = files::open_regular(path).map_err(|e| error::plain_io(&e))?;
    let meta = file.metadata().map_err(|e| error::plain_io(&e))?;
    let identity = files::identity(&file).map_err(|e| error::plain_io(&e))?;
    let at = tally.files.iter().position(|m| m.path == key);
    let known = at.map(|i| tally.files[i].clone());
    let mark = known.clone().filter(|m| {
        // Another file in its place, or one cut shorter: begin it again.
        (m.dev, m.ino) == identity && m.offset <= meta.len()
    });
    if mark.is_none() && meta.len() > *left && *left < MAX_BACK {
        // A first look needs its full reach back: it waits for the next Stop's budget.
        return Ok(());
    }
    // What was counted of the file in this one's place is not counted again: the new one is
    // read back only to the newest line counted there, its last messages remembered.
    let (since, recent, last_ms) = match (&mark, &known) {
        (None, Some(old)) => (
            since.max(old.last_ms as f64 / 1000.0),
            &old.recent[..],
            old.last_ms,
        ),
        (Some(mark), _) => (since, &mark.recent[..], mark.last_ms),
        (None, None) => (since, &[][..], 0),
    };
    let mut counter = Counter::new(recent);
    counter.newest_ms = last_ms;
    let (offset, backlog) = match &mark {
        Some(mark) => {
            let backlog = match &mark.backlog {
                Some(backlog) => {
                    let reached = range(
                        &mut file,
                        backlog.from,
                        backlog.to,
                        true,
                        &mut counter,
                        left,
                        Some(since),
                    )
                    .ok_or("it could not be read")?;
                    (reached < backlog.to).then_some(Backlog {
                        from: reached,
                        to: backlog.to,
                    })
                }
                None => None,
            };
            let offset = range(
                &mut file,
                mark.offset,
                meta.len(),
                false,
                &mut counter,
                left,
                None,
            )
            .ok_or("it could not be read")?;
            (offset, backlog)
        }
        None => {
            backward(file, meta.len(), since, &mut counter, left).ok_or("it could not be read")?
        }
    };
    tally.add(counter.total);
    let (dev, ino) = identity;
    let fresh = Mark {
        path: key.to_string(),
        dev,
        ino,
        offset,
        recent: counter.recent(),
        last_ms: counter.newest_ms,
        backlog,
    };
    match at {
        Some(i) => tally.files[i] = fresh,
        None => tally.files.push(fresh),
    }
    Ok(())
}

/// Counts the lines from `from` up to `to` (at most `MAX_READ` bytes, and what is left of this
/// Stop's budget): the lines that end before `to`, and the piece that ends at `to` too when
/// `to` ends a line (`whole`). With `since`, only lines written since then count. The offset
/// reached.
fn range(
    file: &mut File,
    from: u64,
    to: u64,
    whole: bool,
    counter: &mut Counter,
    left: &mut u64,
    since: Option<f64>,
) -> Option<u64> {
    let take = to.saturating_sub(from).min(MAX_READ).min(*left);
    *left -= take;
    if take == 0 {
        return Some(from);
    }
    file.seek(SeekFrom::Start(from)).ok()?;
    let mut bytes = Vec::with_capacity(take as usize);
    file.take(take).read_to_end(&mut bytes).ok()?;
    let end = if whole && from + take == to {
        bytes.len()
    } else {
        match memchr::memrchr(b'\n', &bytes) {
            Some(last) => last + 1,
            // One line longer than a read: passed over (its pieces are not JSON, so nothing of
            // it counts), never read again.
            None if take == MAX_READ => bytes.len(),
            // Out of this Stop's budget inside a line: it is read again, whole, next time.
            None => return Some(from),
        }
    };
    for line in bytes[..end].split(|&b| b == b'\n') {
        counter.line(line, since);
    }
    Some(from + end as u64)
}

/// Counts, going back from the last whole line, every line written since `since`, up to the
/// first older one (at most `MAX_BACK` bytes back); the offset after the last whole line.
fn backward(
    mut file: File,
    len: u64,
    since: f64,
    counter: &mut Counter,
    left: &mut u64,
) -> Option<(u64, Option<Backlog>)> {
    // The last whole line ends at the last newline.
    let tail = len.min(64 * 1024);
    file.seek(SeekFrom::Start(len - tail)).ok()?;
    let mut last = Vec::with_capacity(tail as usize);
    (&mut file).take(tail).read_to_end(&mut last).ok()?;
    let end = match memchr::memrchr(b'\n', &last) {
        Some(at) => len - tail + at as u64 + 1,
        None if len <= tail => 0,
        None => len - tail,
    };
    let mut lines = BackwardLines::ending_at(file, end, MAX_BACK.min(*left)).ok()?;
    let mut backwards = Vec::new();
    let mut older = false;
    while let Ok(Some(line)) = lines.next_line() {
        if line.is_empty() {
            continue;
        }
        // Each line is read as JSON once: its usage (and time) when it has one, else its time.
        let usage = usage_of(&line);
        let time = match &usage {
            Some((_, _, time)) => *time,
            None => timestamp(&line),
        };
        if time.is_some_and(|time| time < since) {
            older = true;
            break;
        }
        backwards.extend(usage);
    }
    *left = left.saturating_sub(lines.read_so_far());
    // Out of reach before a line older than the loop: what lies before is counted forward
    // later, so that no line written since the loop started is left out.
    let unread = lines.unread();
    let backlog = (!older && unread > 0).then_some(Backlog {
        from: 0,
        to: unread,
    });
    // Counted in the order they were written, so the last messages are the recent ones.
    for usage in backwards.into_iter().rev() {
        counter.count(usage, Some(since));
    }
    Some((end, backlog))
}

/// The subagent transcripts of a session transcript live beside it, in a directory named
/// after it: `<session>/subagents/agent-<id>.jsonl`.
pub(crate) fn subagents_dir(transcript: &Path) -> PathBuf {
    transcript.with_extension("").join("subagents")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn line(id: &str, usage: [u64; 4], time: &str) -> String {
        format!(
            "{{\"type\":\"assistant\",\"timestamp\":\"{time}\",\"message\":{{\"id\":\"{id}\",\"content\":[{{\"type\":\"text\",\"text\":\"x\"}}],\"usage\":{{\"input_tokens\":{},\"cache_creation_input_tokens\":{},\"output_tokens\":{},\"cache_read_input_tokens\":{}}}}}}}\n",
            usage[0], usage[1], usage[2], usage[3]
        )
    }

    #[test]
    fn each_message_counts_once_across_reads_and_only_since_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let since = crate::sys::time::parse_rfc3339("2026-12-01T10:00:00Z").unwrap();
        let mut file = File::create(&path).unwrap();
        write!(
            file,
            "{}",
            line("old", [1000, 0, 1000, 0], "2026-12-01T09:00:00Z")
        )
        .unwrap();
        write!(
            file,
            "{}",
            line("m1", [10, 20, 1, 500], "2026-12-01T10:00:01Z")
        )
        .unwrap();
        write!(
            file,
            "{}",
            line("m1", [10, 20, 5, 500], "2026-12-01T10:00:02Z")
        )
        .unwrap();
        // A partial line at the end is left for later.
        write!(file, "{{\"type\":\"assist").unwrap();
        let mut tally = Tally::default();
        update(&mut tally, &path, since).unwrap();
        assert_eq!(
            (
                tally.input,
                tally.cache_creation,
                tally.output,
                tally.cache_read
            ),
            (10, 20, 5, 500)
        );
        assert_eq!(tally.counted(), 35);
        // The partial line is finished, then m1 has one more line, then m2.
        writeln!(file, "ant\"}}").unwrap();
        write!(
            file,
            "{}",
            line("m1", [10, 20, 7, 500], "2026-12-01T10:00:03Z")
        )
        .unwrap();
        write!(
            file,
            "{}",
            line("m2", [3, 0, 4, 600], "2026-12-01T10:00:04Z")
        )
        .unwrap();
        update(&mut tally, &path, since).unwrap();
        assert_eq!(tally.counted(), 35 + 2 + 7);
        update(&mut tally, &path, since).unwrap();
        assert_eq!(tally.counted(), 44, "nothing new, nothing counted");
    }

    #[test]
    fn what_the_first_look_cannot_reach_is_counted_at_the_next_and_nothing_twice() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let since = crate::sys::time::parse_rfc3339("2026-12-01T10:00:00Z").unwrap();
        let mut text = line("old", [1000, 0, 1000, 0], "2026-12-01T09:00:00Z");
        // 60 messages since the loop started, about 17 KiB: beyond a first look's reach.
        for i in 0..60 {
            text.push_str(&line(
                &format!("m{i}"),
                [1, 0, 1, 0],
                "2026-12-01T10:00:01Z",
            ));
        }
        std::fs::write(&path, &text).unwrap();
        let mut tally = Tally::default();
        update(&mut tally, &path, since).unwrap();
        let first = tally.counted();
        assert!(first < 120, "the first look reaches only so far: {first}");
        assert!(tally.files[0].backlog.is_some());
        update(&mut tally, &path, since).unwrap();
        assert_eq!(tally.counted(), 120, "every message since the start, once");
        assert!(tally.files[0].backlog.is_none());
        update(&mut tally, &path, since).unwrap();
        assert_eq!(tally.counted(), 120);
    }

    #[test]
    fn a_transcript_put_in_the_place_of_another_is_counted_only_past_what_was_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let since = crate::sys::time::parse_rfc3339("2026-12-01T10:00:00Z").unwrap();
        let text = line("m1", [10, 0, 10, 0], "2026-12-01T10:00:01Z")
            + &line("m2", [10, 0, 10, 0], "2026-12-01T10:00:02Z");
        std::fs::write(&path, &text).unwrap();
        let mut tally = Tally::default();
        update(&mut tally, &path, since).unwrap();
        assert_eq!(tally.counted(), 40);
        // The same bytes under a new inode, and one message more.
        let copy = dir.path().join("copy");
        std::fs::write(
            &copy,
            text + &line("m3", [5, 0, 5, 0], "2026-12-01T10:00:03Z"),
        )
        .unwrap();
        std::fs::rename(&copy, &path).unwrap();
        update(&mut tally, &path, since).unwrap();
        assert_eq!(tally.counted(), 50, "only m3 is new");
    }

    #[test]
    fn malformed_usage_records_count_nothing_and_break_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let lines = [
            "not json \"usage\"\n",
            "{\"type\":\"assistant\",\"message\":{\"id\":7,\"usage\":\"lots\"}}\n",
            "{\"type\":\"assistant\",\"message\":{\"id\":\"a\",\"usage\":{\"input_tokens\":-5,\"output_tokens\":1.5}}}\n",
            "{\"type\":\"assistant\",\"message\":{\"id\":\"b\",\"usage\":{\"input_tokens\":\"9\",\"output_tokens\":18446744073709551615}}}\n",
            "{\"type\":\"user\",\"message\":{\"usage\":{\"input_tokens\":100}}}\n",
        ];
        std::fs::write(&path, lines.concat()).unwrap();
        let mut tally = Tally::default();
        update(&mut tally, &path, 0.0).unwrap();
        assert_eq!(tally.counted(), u64::MAX, "saturates, never wraps");
        assert_eq!(tally.input, 0);
    }

    #[test]
    fn a_codex_rollouts_usage_records_count_without_their_cached_input() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rollout.jsonl");
        let record = |id: &str| {
            format!(
                "{{\"timestamp\":\"2026-12-02T04:52:07.726Z\",\"type\":\"token_usage_record\",\"payload\":{{\"response_id\":\"{id}\",\"usage\":{{\"input_tokens\":4888,\"cached_input_tokens\":4444,\"cache_write_input_tokens\":0,\"output_tokens\":22,\"reasoning_output_tokens\":0,\"total_tokens\":4910}}}}}}\n"
            )
        };
        std::fs::write(&path, record("resp_1") + &record("resp_2")).unwrap();
        let mut tally = Tally::default();
        update(&mut tally, &path, 0.0).unwrap();
        assert_eq!(
            (tally.input, tally.output, tally.cache_read),
            (888, 44, 8888)
        );
        assert_eq!(tally.counted(), 932);
    }

    #[test]
    fn subagent_transcripts_count_too() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, line("m1", [1, 0, 1, 0], "2026-12-01T10:00:01Z")).unwrap();
        let agents = subagents_dir(&path);
        std::fs::create_dir_all(&agents).unwrap();
        std::fs::write(
            agents.join("agent-a1.jsonl"),
            line("s1", [5, 0, 5, 0], "2026-12-01T10:00:02Z"),
        )
        .unwrap();
        let mut tally = Tally::default();
        update(&mut tally, &path, 0.0).unwrap();
        assert_eq!(tally.counted(), 12);
        assert_eq!(tally.files.len(), 2);
    }
}
