//! The gate's answer: what a Stop hook prints, the watchdog that answers when the gate cannot,
//! the desktop notification, and the shaping of what the model and the person read.

use crate::cli::hook::{Specific, Wire};
use crate::cli::output;
use crate::gate::Feedback;
use crate::sys::watchdog;
use crate::verdict::defang::{self, defang};
use crate::verdict::terminal;

/// The longest `reason` a block carries.
pub(crate) const MAX_REASON: usize = 4000;

/// What a Stop hook prints (both engines accept these fields).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum StopOutput {
    /// Let the stop happen; the message, if any, is for the human.
    Allow(Option<String>),
    /// Keep the agent working: `reason` is what it reads next.
    Block {
        reason: String,
        system_message: Option<String>,
    },
}

impl StopOutput {
    /// The JSON line for stdout, or nothing for a silent allow.
    pub(crate) fn to_json(&self) -> Option<String> {
        self.wire(Feedback::Block, false).line()
    }

    /// The answer with a block given as `feedback`; `subagent` for a SubagentStop (which
    /// always gets `decision: block`).
    pub(crate) fn wire(&self, feedback: Feedback, subagent: bool) -> Wire<'_> {
        match self {
            StopOutput::Allow(message) => Wire {
                system_message: message.as_deref(),
                ..Wire::default()
            },
            StopOutput::Block {
                reason,
                system_message,
            } if feedback == Feedback::Context && !subagent => Wire {
                system_message: system_message.as_deref(),
                hook_specific_output: Some(Specific {
                    hook_event_name: "Stop",
                    additional_context: Some(reason),
                    ..Specific::default()
                }),
                ..Wire::default()
            },
            StopOutput::Block {
                reason,
                system_message,
            } => Wire {
                decision: Some("block"),
                reason: Some(reason),
                system_message: system_message.as_deref(),
                ..Wire::default()
            },
        }
    }

    /// The output with `notice` added to what the person reads, after anything there.
    pub(super) fn told(self, notice: Option<String>) -> StopOutput {
        let Some(notice) = notice else {
            return self;
        };
        let join = |message: Option<String>| {
            Some(match message {
                Some(message) => format!("{message}\n{notice}"),
                None => notice.clone(),
            })
        };
        match self {
            StopOutput::Allow(message) => StopOutput::Allow(join(message)),
            StopOutput::Block {
                reason,
                system_message,
            } => StopOutput::Block {
                reason,
                system_message: join(system_message),
            },
        }
    }
}

/// What the gate decided at a Stop: its answer, with every line the person must hear in it,
/// and the line of the loop that settled at this Stop, if one did (its wake's, SPEC §10).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Decision {
    pub output: StopOutput,
    pub settled: Option<String>,
}

/// How long after its deadline the watchdog answers for a gate that has not: room for the
/// gate's own answer, which comes at the deadline, and still inside the handler's 5 s margin.
const WATCHDOG_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// The last line of defence for the deadline (SPEC §9): whatever hangs (a filesystem, a lock
/// held by another process, an input that never ends), the stop is blocked just after the
/// deadline and the process ends, so the engine never kills the hook and lets the stop through
/// unchecked. Its block is not counted against the budget (that would take the state it could
/// be stuck on); the engine's own cap on consecutive blocks bounds it.
///
/// An alarm, not a thread (`sys::watchdog`): starting a thread cost more than the rest of a
/// Stop without a loop.
pub(crate) struct Watchdog {
    alarm: watchdog::Alarm,
}

impl Watchdog {
    pub(crate) fn start(deadline: std::time::Duration) -> Watchdog {
        let reason = format!(
            "stop-gate: ran past its --deadline of {} s (something it reads hangs); the stop is blocked, NOT verified",
            deadline.as_secs()
        );
        let block = StopOutput::Block {
            reason,
            system_message: None,
        };
        let json = block.to_json().unwrap_or_default();
        // A panic must not let the stop through: exiting 101 is a non-blocking error to both
        // engines, which then go on as if the gate had allowed. The gate's last act is a
        // block, unless its own answer is already being written.
        let on_panic = |info: &std::panic::PanicHookInfo| {
            let where_ = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            let block = StopOutput::Block {
                reason: format!(
                    "stop-gate: an internal error stopped it{where_}; the stop is blocked, NOT verified (please report it)"
                ),
                system_message: None,
            };
            (
                format!("{}\n", block.to_json().unwrap_or_default()).into_bytes(),
                output::diagnostic_line("stop-gate", &format!("internal error{where_}: {info}")),
            )
        };
        Watchdog {
            alarm: watchdog::Alarm::start(
                deadline + WATCHDOG_GRACE,
                format!("{json}\n").into_bytes(),
                on_panic,
            ),
        }
    }

    /// Prints the gate's own answer, unless the alarm has answered already (then the process
    /// is gone): only one answer is ever written.
    /// Whether the answer was written out.
    pub(crate) fn answer(&self, json: Option<String>) -> bool {
        self.alarm
            .answer(json.map(|json| format!("{json}\n").into_bytes()).as_deref())
    }
}

/// The `terminalSequence` that tells the person `line` (SPEC §10): a desktop notification as
/// OSC 9 and as OSC 777, which Claude Code emits for the hook (it allows only those, and BEL).
/// Control characters go, and `;` (OSC 777's separator); the body begins with `vigil`, since
/// an OSC 9 body may not begin with a digit.
pub(crate) fn desktop_notification(line: &str) -> String {
    let body: String = format!("vigil: {line}")
        .chars()
        .filter(|c| !c.is_control())
        .map(|c| if c == ';' { ',' } else { c })
        .take(200)
        .collect();
    format!("\u{1b}]9;{body}\u{7}\u{1b}]777;notify;vigil;{body}\u{7}")
}

/// What the person must hear whatever the decision (a check that ran unconfined, a settings
/// change blocked), and what settled, gathered while the gate decides.
#[derive(Default)]
pub(super) struct Heard {
    pub(super) notices: Vec<String>,
    pub(super) settled: Option<String>,
}

impl Heard {
    /// The notices, the latest first, as one message.
    pub(super) fn notice(&self) -> Option<String> {
        (!self.notices.is_empty()).then(|| {
            let mut lines: Vec<&str> = self.notices.iter().map(String::as_str).collect();
            lines.reverse();
            lines.join("\n")
        })
    }
}

/// A failing check: the one useful line, and detail the model can use.
pub(super) struct Failure {
    pub(super) line: String,
    pub(super) detail: String,
}

impl Failure {
    pub(super) fn line(line: String) -> Failure {
        Failure {
            line,
            detail: String::new(),
        }
    }

    /// The block reason: the line, then the detail; defanged and at most `MAX_REASON` chars.
    pub(super) fn reason(&self) -> String {
        let text = if self.detail.is_empty() {
            self.line.clone()
        } else {
            format!("{}\n{}", self.line, self.detail)
        };
        cap(&defang(&text), MAX_REASON)
    }
}

/// Keeps the first line and as much of the end as fits in `max` characters.
pub(super) fn cap(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let first = text.lines().next().unwrap_or("");
    let first: String = first.chars().take(max / 2).collect();
    let marker = "\n[…]\n";
    let room = max.saturating_sub(first.chars().count() + marker.chars().count());
    let tail: Vec<char> = text.chars().rev().take(room).collect();
    format!(
        "{first}{marker}{}",
        tail.into_iter().rev().collect::<String>()
    )
}

/// Defangs `text` but keeps the one live `keep` (the promise as the model must write it).
pub(super) fn defang_except(text: &str, keep: &str) -> String {
    if keep.is_empty() {
        return defang(text);
    }
    text.split(keep).map(defang).collect::<Vec<_>>().join(keep)
}

/// The longest question a human is shown.
const MAX_QUESTION: usize = 500;

/// An escalated question as the human reads it: plain text without format characters (escape
/// sequences would run in the human's terminal, bidi controls reorder what it shows),
/// at most `MAX_QUESTION` characters, defanged.
pub(super) fn shown_question(question: &str) -> String {
    let plain = defang::visible(&terminal::plain_text(question.as_bytes()));
    let mut shown: String = plain.chars().take(MAX_QUESTION).collect();
    if shown.len() < plain.len() {
        shown.push('…');
    }
    defang(&shown)
}

pub(super) fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_keeps_the_first_line_and_the_end() {
        let text = format!("first line\n{}\nlast line", "x".repeat(10_000));
        let capped = cap(&text, 100);
        assert!(capped.chars().count() <= 100);
        assert!(capped.starts_with("first line\n"));
        assert!(capped.ends_with("last line"));
    }

    #[test]
    fn outputs_are_the_wire_shapes() {
        assert_eq!(StopOutput::Allow(None).to_json(), None);
        assert_eq!(
            StopOutput::Allow(Some("m".into())).to_json().unwrap(),
            r#"{"systemMessage":"m"}"#
        );
        let block = StopOutput::Block {
            reason: "r".into(),
            system_message: None,
        };
        assert_eq!(
            block.to_json().unwrap(),
            r#"{"decision":"block","reason":"r"}"#
        );
    }
}
