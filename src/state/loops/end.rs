//! How a loop ends outside a Stop's verdict (SPEC §4, §9): a failed turn (StopFailure) or the
//! engine's cap on blocks interrupts it, the session's end cuts it, a human cancels it, a tree
//! changed after its pass is recorded, and a loop whose record is gone is witnessed from its
//! transcript; with the lines that tell each end, once.

use std::path::Path;

use crate::error::Result;
use crate::state::loop_state::{EndReason, Failure, LoopState, LoopStatus, MAX_FAILURES};
use crate::state::project::{Project, SessionId};
use crate::state::session;
use crate::state::session::Session;
use crate::state::wakes;
use crate::sys::time;
use crate::transcript;
use crate::verdict::defang;

/// Records a failed turn (StopFailure) in the session's record and, when a loop runs there, in
/// the loop, which becomes `interrupted`: no pass is spent, and the session's next stop goes on
/// with the pass that failed. A subagent's failed turn (it has an `agent_id`) is recorded in
/// the session only: Claude Code goes on with the main agent, which hears of it in a
/// `<task-notification>`.
pub(crate) fn record_failure(
    project: &Project,
    session: &SessionId,
    failure: Failure,
) -> Result<()> {
    let mut record = Session::open(project, session)?;
    let keep = |list: &mut Vec<Failure>, failure: Failure| {
        list.push(failure);
        if list.len() > MAX_FAILURES {
            list.drain(..list.len() - MAX_FAILURES);
        }
    };
    keep(&mut record.record.failures, failure.clone());
    // When an API error ends `claude -p`, Claude Code sends SIGTERM to the StopFailure hook
    // still running and runs SessionEnd's; the hook outlasts it and records the failure after
    // (seen under load): the loop was cut `session-ended` a moment ago, for the turn that
    // failed. Its end is that failure: still cut, NOT verified, with the reason
    // that tells the next session what happened, and its wake, if not taken yet, too.
    let mut amended = None;
    if let Some(state) = record.record.ralph.as_mut()
        && failure.agent_id.is_none()
        && state.end_reason == Some(EndReason::SessionEnded)
        && state.failures.is_empty()
        && time::parse_rfc3339(&state.updated_at)
            .is_some_and(|ended| time::now_secs() - ended < SESSION_END_RACE_SECS)
    {
        state.end(EndReason::TurnFailed);
        keep(
            &mut state.failures,
            Failure {
                iteration: Some(state.iteration),
                ..failure.clone()
            },
        );
        amended = Some(state.clone());
    }
    if let Some(state) = record.record.ralph.as_mut()
        && state.status.is_live()
        && failure.agent_id.is_none()
    {
        state.status = LoopStatus::Interrupted;
        state.updated_at = time::now_rfc3339();
        keep(
            &mut state.failures,
            Failure {
                iteration: Some(state.iteration),
                ..failure
            },
        );
    }
    record.save()?;
    if let Some(state) = amended {
        wakes::amend(&state);
    }
    Ok(())
}

/// Claude Code's own cap on consecutive Stop blocks (issue 29): when the transcript at
/// `transcript` shows the client ended a turn of this session's running loop over vigil's
/// block, after the loop last moved, the loop is recorded `interrupted` with the failure
/// `block_cap` (it goes on at the session's next stop, no pass spent), and the line to tell the
/// human comes back. `None` when there is no loop running, or no new cut.
pub(crate) fn note_engine_cut(
    project: &Project,
    session: &SessionId,
    transcript: &Path,
) -> Result<Option<String>> {
    match session::peek(project, session) {
        Ok(Some(record)) => match &record.ralph {
            Some(state) => engine_cut_of(project, session, state, transcript),
            None => Ok(None),
        },
        _ => Ok(None),
    }
}

/// [`note_engine_cut`] for a caller that has read the session's loop already (`state`).
pub(crate) fn engine_cut_of(
    project: &Project,
    session: &SessionId,
    state: &LoopState,
    transcript: &Path,
) -> Result<Option<String>> {
    if !state.status.is_live() {
        return Ok(None);
    }
    // After the loop last moved, and after the last failure it recorded (a cut is recorded at
    // the client's own time, which may run ahead of this machine's).
    let after = std::iter::once(&state.updated_at)
        .chain(state.failures.iter().map(|failure| &failure.at))
        .filter_map(|at| time::parse_rfc3339(at))
        .fold(0.0, f64::max);
    let Some((at, content)) = transcript::engine_cut_after(transcript, after) else {
        return Ok(None);
    };
    record_failure(
        project,
        session,
        Failure {
            error: BLOCK_CAP.into(),
            error_details: None,
            message: Some(defang::field_max(&content, 200)),
            at,
            iteration: None,
            agent_id: None,
        },
    )?;
    Ok(Some(format!(
        "vigil: Claude Code ended a turn of this session's loop over its Stop hook (it overrides a hook that blocks too many times in a row): the loop is interrupted at pass {}/{}, NOT verified, and goes on at the session's next stop; start Claude Code with CLAUDE_CODE_STOP_HOOK_BLOCK_CAP=0 in its environment to lift the cap for a loop vigil bounds",
        state.iteration, state.max_iterations
    )))
}

/// How a loop that ended outside a Stop is told, once, at the session's next Stop or by a
/// terminal: `vigil loop was cut at pass 4/20: the session ended while it ran; the work is NOT
/// verified …`.
pub(crate) fn told_end(state: &LoopState) -> String {
    let (k, max) = (state.iteration, state.max_iterations);
    match (state.status, state.end_reason) {
        (LoopStatus::Cancelled, _) => {
            format!("vigil loop was cancelled at pass {k}/{max}: the work is NOT verified")
        }
        (LoopStatus::Cut, reason) => format!(
            "vigil loop was cut at pass {k}/{max}: {}; the work is NOT verified. Start it again with /vigil-loop or `stop-gate loop start`",
            reason.unwrap_or(EndReason::SessionEnded).told()
        ),
        (LoopStatus::Passed, _) => told_passed(state),
        (status, reason) => format!(
            "vigil loop ended {} at pass {k}/{max}{}: the work is NOT verified",
            status.as_str(),
            reason.map_or(String::new(), |r| format!(" ({})", r.told()))
        ),
    }
}

/// How a loop that passed is told: whether checks verified the declaration, or it stood alone.
pub(crate) fn told_passed(state: &LoopState) -> String {
    let (k, max) = (state.iteration, state.max_iterations);
    if state.checks.as_ref().is_none_or(Vec::is_empty) {
        format!(
            "vigil loop passed on pass {k}/{max}: completion declared, but no check is configured on the Stop hook (--run, --require-marker), so nothing verified the work"
        )
    } else {
        format!("vigil loop passed on pass {k}/{max}: completion declared and every check passed")
    }
}

/// The session has ended (SessionEnd, or the command of `loop run` returned): a loop still live
/// there is `cut`, since nothing will judge it again, with the reason its last turn gives
/// (the engine's cap, an API error, else the end itself). The loop as it now stands, when one
/// was cut.
pub(crate) fn end_session(project: &Project, session: &SessionId) -> Result<Option<LoopState>> {
    let mut record = Session::open(project, session)?;
    // A wake an end still owes (a kill came between the end and its wake): written now.
    let _ = wakes::settle_owed(&mut record);
    let Some(state) = record.record.ralph.as_mut() else {
        return Ok(None);
    };
    if !state.status.is_live() {
        return Ok(None);
    }
    let reason = match (state.status, state.failures.last()) {
        (LoopStatus::Interrupted, Some(failure)) if failure.error == BLOCK_CAP => {
            EndReason::BlockCap
        }
        (LoopStatus::Interrupted, _) => EndReason::TurnFailed,
        _ => EndReason::SessionEnded,
    };
    state.end(reason);
    state.reported = false;
    state.wake_owed = state.report.is_some();
    record.save()?;
    wakes::settle_owed(&mut record);
    let state = record.record.ralph.clone().expect("the loop is there");
    Ok(Some(state))
}

/// The tree changed after the passing Stop of `session`'s loop vouched for it (`loop run` saw
/// it at its end): recorded, and the loop's wake and `loop list` entry say so, if no one has
/// taken the wake yet. The loop as it now stands.
pub(crate) fn changed_after(project: &Project, session: &SessionId) -> Result<Option<LoopState>> {
    let mut record = Session::open(project, session)?;
    let Some(state) = record.record.ralph.as_mut() else {
        return Ok(None);
    };
    if state.status != LoopStatus::Passed || state.changed_after {
        return Ok(Some(state.clone()));
    }
    state.changed_after = true;
    state.updated_at = time::now_rfc3339();
    let state = state.clone();
    record.save()?;
    wakes::amend(&state);
    Ok(Some(state))
}

/// How soon after a SessionEnd cut a StopFailure of the same session is taken as the cause of
/// the end (the engine ran the two hooks in the other order).
const SESSION_END_RACE_SECS: f64 = 30.0;

/// The failure a turn that the engine ended over the gate's block is recorded as.
pub(crate) const BLOCK_CAP: &str = "block_cap";

/// The witness (SPEC §9, issue 29): the session has no record, yet the last 256 KiB of its
/// transcript hold vigil's loop blocks as Claude Code writes them, so its loop's record is
/// gone (the state home removed). The line to tell, once: a record with no loop is written, so
/// no later hook of the session tells it again. A witness only ever makes a verdict worse.
pub(crate) fn witness(project: &Project, session: &SessionId, transcript: &Path) -> Option<String> {
    if !matches!(session::peek(project, session), Ok(None)) {
        return None;
    }
    witness_unrecorded(project, session, transcript)
}

/// [`witness`] for a caller that found the session has no record already.
pub(crate) fn witness_unrecorded(
    project: &Project,
    session: &SessionId,
    transcript: &Path,
) -> Option<String> {
    if !transcript::vigil_loop_blocked(transcript) {
        return None;
    }
    let _ = Session::open(project, session).and_then(|mut record| record.save());
    Some("vigil: this session ran a vigil loop (its blocks are in the transcript), but the loop's record is gone from the state home: the loop is NOT verified; start it again with /vigil-loop or `stop-gate loop start`".to_string())
}

/// What `cancel` did.
pub(crate) enum Cancelled {
    /// The running loop now says `cancelled`.
    Loop(Box<LoopState>),
    /// The record could not be read (damaged, or gone while its loop ran): the loop is over,
    /// NOT verified, and this says why.
    Lost(String),
}

/// Ends a running loop with `cancelled`. `Ok(None)` when no loop is running.
pub(crate) fn cancel(project: &Project, session: &SessionId) -> Result<Option<Cancelled>> {
    let mut record = Session::open(project, session)?;
    if let Some(lost) = record.take_lost() {
        record.save()?;
        return Ok(Some(Cancelled::Lost(lost)));
    }
    let Some(state) = record.record.ralph.as_mut() else {
        return Ok(None);
    };
    if !state.status.is_live() {
        return Ok(None);
    }
    state.end(EndReason::Cancelled);
    state.reported = false;
    state.wake_owed = state.report.is_some();
    record.save()?;
    wakes::settle_owed(&mut record);
    let state = record.record.ralph.clone().expect("the loop is there");
    Ok(Some(Cancelled::Loop(Box::new(state))))
}
