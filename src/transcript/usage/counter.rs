//! What one line of a transcript counts (a Claude Code `assistant` line's usage, or a Codex
//! rollout's `token_usage_record`), and the counter that counts each message once across its
//! lines and across Stops.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;

use crate::sys::time;
use crate::transcript::usage::{RECENT, Seen};

/// The usage of messages, each id counted once.
pub(super) struct Counter {
    seen: HashMap<String, [u64; 4]>,
    /// The last `RECENT` ids counted, the latest last.
    order: std::collections::VecDeque<String>,
    pub(super) total: [u64; 4],
    /// The newest line counted, in milliseconds.
    pub(super) newest_ms: u64,
}

impl Counter {
    pub(super) fn new(recent: &[Seen]) -> Counter {
        Counter {
            seen: recent.iter().map(|s| (s.id.clone(), s.usage)).collect(),
            order: recent.iter().map(|s| s.id.clone()).collect(),
            total: [0; 4],
            newest_ms: 0,
        }
    }

    pub(super) fn line(&mut self, line: &[u8], since: Option<f64>) {
        if let Some(usage) = usage_of(line) {
            self.count(usage, since);
        }
    }

    /// Counts one line's usage (its message id, figures and time), unless it is older than
    /// `since`.
    pub(super) fn count(&mut self, (id, usage, time): Usage, since: Option<f64>) {
        if let (Some(since), Some(time)) = (since, time)
            && time < since
        {
            return;
        }
        if let Some(time) = time {
            self.newest_ms = self.newest_ms.max((time * 1000.0) as u64);
        }
        let Some(id) = id else {
            // No id to tell its lines apart: counted as it stands.
            for (total, n) in self.total.iter_mut().zip(usage) {
                *total = total.saturating_add(n);
            }
            return;
        };
        let counted = self.seen.entry(id.clone()).or_insert([0; 4]);
        for ((total, had), n) in self.total.iter_mut().zip(counted.iter_mut()).zip(usage) {
            if n > *had {
                *total = total.saturating_add(n - *had);
                *had = n;
            }
        }
        if self.order.back() != Some(&id) {
            if let Some(at) = self.order.iter().position(|known| *known == id) {
                self.order.remove(at);
            }
            self.order.push_back(id);
            if self.order.len() > RECENT {
                self.order.pop_front();
            }
        }
    }

    pub(super) fn recent(&self) -> Vec<Seen> {
        self.order
            .iter()
            .map(|id| Seen {
                id: id.clone(),
                usage: self.seen[id],
            })
            .collect()
    }
}

/// A line's message id, its figures (input, cache creation, output, cache read) and its time.
pub(super) type Usage = (Option<String>, [u64; 4], Option<f64>);

#[derive(Deserialize)]
struct Line {
    #[serde(rename = "type")]
    kind: Option<String>,
    message: Option<Message>,
    timestamp: Option<Value>,
    /// Codex's rollout: a `token_usage_record` carries its usage here.
    payload: Option<Record>,
}

#[derive(Deserialize)]
struct Record {
    response_id: Option<Value>,
    usage: Option<Value>,
}

#[derive(Deserialize)]
struct Message {
    id: Option<Value>,
    usage: Option<Value>,
}

/// An assistant line's message id, usage (input, cache creation, output, cache read) and time:
/// Claude Code's transcript line of type `assistant` (`message.id`, `message.usage`), or a
/// Codex rollout's `token_usage_record` (`payload.response_id`, `payload.usage`, whose
/// `input_tokens` include the cached and cache-written ones). A line that is not JSON, or has
/// no usage object, has none; a figure that is not a whole number counts as 0.
pub(super) fn usage_of(line: &[u8]) -> Option<Usage> {
    memchr::memmem::find(line, b"\"usage\"")?;
    let line: Line = serde_json::from_slice(line).ok()?;
    let (id, usage) = match line.kind.as_deref() {
        Some("assistant") => {
            let message = line.message?;
            (message.id, message.usage?)
        }
        Some("token_usage_record") => {
            let record = line.payload?;
            (record.response_id, record.usage?)
        }
        _ => return None,
    };
    let usage = usage.as_object()?;
    let figure = |name: &str| usage.get(name).and_then(Value::as_u64).unwrap_or(0);
    let figures = if usage.contains_key("cached_input_tokens") {
        let (cached, written) = (
            figure("cached_input_tokens"),
            figure("cache_write_input_tokens"),
        );
        [
            figure("input_tokens")
                .saturating_sub(cached)
                .saturating_sub(written),
            written,
            figure("output_tokens"),
            cached,
        ]
    } else {
        [
            figure("input_tokens"),
            figure("cache_creation_input_tokens"),
            figure("output_tokens"),
            figure("cache_read_input_tokens"),
        ]
    };
    let id = id
        .as_ref()
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty() && id.len() <= 64)
        .map(str::to_string);
    let time = line
        .timestamp
        .as_ref()
        .and_then(Value::as_str)
        .and_then(time::parse_rfc3339);
    Some((id, figures, time))
}

/// A line's `timestamp`, when it has one.
pub(super) fn timestamp(line: &[u8]) -> Option<f64> {
    #[derive(Deserialize)]
    struct Stamp {
        timestamp: Option<Value>,
    }
    let stamp: Stamp = serde_json::from_slice(line).ok()?;
    time::parse_rfc3339(stamp.timestamp?.as_str()?)
}
