//! Which vigil binary serves which hook event, in which engine, and when (SPEC §8): the one
//! list the installer's entries and the doctor's expectations are made from, and that the
//! plugin's `hooks/hooks.json` is checked against (a test). A new event: DEVELOPMENT.md,
//! "A new hook event".

use super::Engine;
use crate::cli::hook::HookEvent;
use crate::reach::guard::MATCHER;

/// What a handler's command line carries after its binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Args {
    /// Nothing.
    None,
    /// `--checkpoint`: session-end-handoff's intermediate record.
    Checkpoint,
    /// The gate's flags (`--run`, `--require-marker`, …), as the install chose them; the
    /// handler's timeout stays above the gate's deadline.
    Gate,
    /// `wait`: the waiter, in the background (`asyncRewake`), for an hour.
    Wait,
    /// `--sync-notes REMOTE`, when the install names a remote.
    SyncNotes,
}

/// When a handler is installed, and what the doctor says of one that is missing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// Always: without it the doctor fails (the waiter, which it checks on its own, aside).
    Always,
    /// Always: without it the doctor warns, with what is lost.
    Recommended(&'static str),
    /// When the gate checks subagents' reports (`--subagents`, `--contract`).
    Subagents,
    /// Under `--protect` (and kept by later installs); `unix`: not on Windows, which has no
    /// sandbox to keep.
    Protect { unix: bool },
}

/// One handler vigil wires.
#[derive(Debug)]
pub struct Wiring {
    pub event: HookEvent,
    pub binary: &'static str,
    pub args: Args,
    pub claude: bool,
    pub codex: bool,
    pub when: When,
    /// The group's matcher: the tools PreToolUse guards, the settings ConfigChange judges.
    pub matcher: Option<&'static str>,
    /// In the group of the handler before it, not a group of its own.
    pub joins: bool,
}

impl Wiring {
    /// Whether `engine` runs this handler.
    pub(crate) fn for_engine(&self, engine: Engine) -> bool {
        match engine {
            Engine::Claude => self.claude,
            Engine::Codex => self.codex,
        }
    }
}

impl Wiring {
    const fn claude_only(mut self) -> Wiring {
        self.codex = false;
        self
    }

    const fn codex_only(mut self) -> Wiring {
        self.claude = false;
        self
    }

    const fn when(mut self, when: When) -> Wiring {
        self.when = when;
        self
    }

    const fn matcher(mut self, matcher: &'static str) -> Wiring {
        self.matcher = Some(matcher);
        self
    }

    const fn joins(mut self) -> Wiring {
        self.joins = true;
        self
    }
}

const fn row(event: HookEvent, binary: &'static str, args: Args) -> Wiring {
    Wiring {
        event,
        binary,
        args,
        claude: true,
        codex: true,
        when: When::Always,
        matcher: None,
        joins: false,
    }
}

/// Every handler, in the order an install writes them.
pub(crate) static WIRING: [Wiring; 12] = [
    // The gate (SPEC §4).
    row(HookEvent::Stop, "stop-gate", Args::Gate),
    // Codex's Stop also leaves the handoff checkpoint, so a session cut short still leaves a
    // record (SPEC §8); Codex sends SessionEnd at the end of `codex exec` too (0.171.0).
    row(HookEvent::Stop, "session-end-handoff", Args::Checkpoint)
        .codex_only()
        .joins(),
    // The waiter (SPEC §10): in the background until a loop that reports to this session or
    // project settles (Claude Code's asyncRewake; Codex 0.171.0 has no async hook, and hears
    // its wakes at SessionStart and UserPromptSubmit). A group of its own, after the gate's
    // (Claude Code runs a Stop's handlers at once, whatever their order).
    row(HookEvent::Stop, "stop-gate", Args::Wait).claude_only(),
    row(
        HookEvent::SessionStart,
        "session-start-loader",
        Args::SyncNotes,
    ),
    row(HookEvent::SessionEnd, "session-end-handoff", Args::None),
    row(
        HookEvent::PreCompact,
        "session-end-handoff",
        Args::Checkpoint,
    ),
    // The human's /vigil-loop and /vigil-cancel, read from the prompt as typed.
    row(HookEvent::UserPromptSubmit, "stop-gate", Args::None),
    // A turn that ends on an API error is recorded, and the next session told (Claude Code;
    // Codex 0.171.0 has no StopFailure).
    row(
        HookEvent::StopFailure,
        "session-end-handoff",
        Args::Checkpoint,
    )
    .claude_only()
    .when(When::Recommended(
        "so a turn that ends on an API error (a rate limit, a 529) is not recorded and the next session is not told",
    )),
    // A gate for subagents' reports, with the Stop handler's flags.
    row(HookEvent::SubagentStop, "stop-gate", Args::Gate).when(When::Subagents),
    // --protect: the file tools held to the agent's reach (SPEC §9).
    row(HookEvent::PreToolUse, "stop-gate", Args::None)
        .claude_only()
        .when(When::Protect { unix: false })
        .matcher(MATCHER),
    // --protect: where each file tool's write really landed (the guard's window: a link
    // swapped in after PreToolUse), told to the person and the model.
    row(HookEvent::PostToolUse, "stop-gate", Args::None)
        .claude_only()
        .when(When::Protect { unix: false })
        .matcher(MATCHER),
    // --protect: a settings change that would take the protection away from the running
    // session is blocked (`live`).
    row(HookEvent::ConfigChange, "stop-gate", Args::None)
        .claude_only()
        .when(When::Protect { unix: true })
        .matcher("local_settings|project_settings|user_settings"),
];

/// The handlers `engine` runs.
pub fn of(engine: Engine) -> impl Iterator<Item = &'static Wiring> {
    WIRING.iter().filter(move |w| w.for_engine(engine))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_vigil_handles_is_wired_and_only_those() {
        for event in HookEvent::HANDLED {
            assert!(
                WIRING.iter().any(|w| w.event == event),
                "{event:?} has no handler"
            );
            assert_eq!(HookEvent::named(event.name()), event);
        }
        for wiring in &WIRING {
            assert!(
                HookEvent::HANDLED.contains(&wiring.event),
                "{wiring:?} wires an event vigil does not handle"
            );
            assert!(
                crate::cli::flags::BINARIES.contains(&wiring.binary),
                "{wiring:?}"
            );
            assert!(wiring.claude || wiring.codex, "{wiring:?} runs nowhere");
        }
        assert!(!WIRING[0].joins, "the first handler has a group of its own");
    }
}
