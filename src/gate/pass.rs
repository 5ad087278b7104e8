//! One pass of a running loop at a Stop (SPEC §4): the look at the loop under its lock, the
//! checks of a declaration without it, and the end of the pass, with its limits.

use crate::cli::hook::BackgroundTask;
use crate::cli::hook::HookInput;
use crate::cli::hook::TaskKind;
use crate::error::Error;
use crate::error::Result;
use crate::evidence::subject;
use crate::gate::budget::{self, Charge};
use crate::gate::output::{MAX_REASON, StopOutput, cap, defang_except, shown_question};
use crate::gate::{Gate, GateConfig};
use crate::state::loop_state;
use crate::state::loop_state::DEFAULT_STALL_AFTER;
use crate::state::loop_state::HeldTold;
use crate::state::loop_state::Limits;
use crate::state::loop_state::Repeat;
use crate::state::loop_state::{EndReason, LoopState, LoopStatus};
use crate::state::loops::{self};
use crate::state::project::SessionId;
use crate::state::session::Budget;
use crate::state::session::Session;
use crate::state::wakes;
use crate::sys::digest;
use crate::sys::time;
use crate::transcript;
use crate::transcript::usage;
use crate::transcript::usage::Tally;
use crate::verdict::defang::{self, defang};
use crate::verdict::promise::{Verdict, assess};

/// What the first look at a running loop found.
struct Seen {
    /// The last message; `None` when it could not be read.
    message: Option<String>,
    /// Why the message could not be read, when it could not.
    note: Option<String>,
    bounds: Bounds,
    /// For the human: why the token budget cannot count, when it cannot.
    warning: Option<String>,
    /// The checks a declaration must pass (`--run`, `--require-marker`), as a person names
    /// them; none: the declaration alone ends the loop, and verifies nothing.
    checks: Vec<String>,
}

/// The token tally as a Stop found it, and as the transcripts have it now.
struct Counted {
    before: Tally,
    after: Tally,
    warning: Option<String>,
}

/// A loop's limits in force: its own, else the hook's, else the defaults.
#[derive(Clone, Copy, Debug)]
struct Bounds {
    stall_after: u32,
    max_duration: Option<std::time::Duration>,
    max_tokens: Option<u64>,
}

impl Bounds {
    fn of(own: &Limits, hook: &Limits) -> Bounds {
        Bounds {
            stall_after: own
                .stall_after
                .or(hook.stall_after)
                .unwrap_or(DEFAULT_STALL_AFTER),
            max_duration: own
                .max_duration_secs
                .or(hook.max_duration_secs)
                .map(std::time::Duration::from_secs),
            max_tokens: own.max_tokens.or(hook.max_tokens),
        }
    }
}

/// Counts this pass's message against the last ones: the number of passes in a row that ended
/// with it, when that reaches `after` (0: stalls are not looked for).
fn stalled(state: &mut LoopState, message: &str, after: u32) -> Option<u32> {
    let normal = message.split_whitespace().collect::<Vec<_>>().join(" ");
    let sha256 = digest::sha256_hex(normal.as_bytes());
    let passes = match &state.progress.same_message {
        Some(last) if last.sha256 == sha256 => last.passes.saturating_add(1),
        _ => 1,
    };
    state.progress.same_message = Some(Repeat { sha256, passes });
    (after > 0 && passes >= after).then_some(passes)
}

/// `tally` with what the Stop's transcripts gained since it was counted, and why they could not
/// be read, when they could not.
fn recount(state: &LoopState, input: &HookInput, mut tally: Tally) -> (Tally, Option<String>) {
    let warning = match &input.transcript_path {
        None => Some("--max-tokens counts nothing: this Stop names no transcript".to_string()),
        Some(transcript) => usage::update(&mut tally, transcript, state.started_secs())
            .err()
            .map(|why| {
                format!(
                    "--max-tokens counts nothing of the transcript {}: {why}",
                    transcript.display()
                )
            }),
    };
    (tally, warning)
}

/// The time or token budget that is spent, if one is: its end reason and what to tell.
fn spent(state: &LoopState, bounds: &Bounds) -> Option<(EndReason, String)> {
    if let Some(max) = bounds.max_duration {
        let ran = (time::now_secs() - state.started_secs()).max(0.0);
        if ran >= max.as_secs_f64() {
            return Some((
                EndReason::MaxDuration,
                format!(
                    "its time budget of {} is spent (it started {} ago)",
                    time::format_duration(max),
                    time::format_duration(std::time::Duration::from_secs(ran as u64))
                ),
            ));
        }
    }
    if let Some(max) = bounds.max_tokens {
        let untracked = state.progress.tokens.as_ref().map_or(0, |t| t.untracked);
        if untracked > 0 {
            return Some((
                EndReason::MaxTokens,
                format!(
                    "its token budget of {max} cannot be kept: {untracked} subagent transcript(s) written since it started are past the 128 a loop follows"
                ),
            ));
        }
        let counted = state.progress.tokens.as_ref().map_or(0, |t| t.counted());
        if counted >= max {
            return Some((
                EndReason::MaxTokens,
                format!(
                    "its token budget of {max} is spent ({counted} input, cache-creation and output tokens counted since it started)"
                ),
            ));
        }
    }
    None
}

/// The background tasks of a Stop still running, named for the model with the id the TaskStop
/// tool takes: a shell by its command, a subagent by its description, another kind by its
/// description, name or tool and its label; at most five, each at most 80 characters of plain
/// text.
fn running_tasks(input: &HookInput) -> String {
    let running: Vec<&BackgroundTask> = input
        .background_tasks
        .iter()
        .flatten()
        .filter(|t| t.is_running())
        .collect();
    let named: Vec<String> = running
        .iter()
        .take(5)
        .map(|task| task_named(task))
        .collect();
    let mut text = named.join(", ");
    if running.len() > 5 {
        text.push_str(&format!(" and {} more", running.len() - 5));
    }
    text
}

/// One running task, for the model: what it is, then its kind and id.
fn task_named(task: &BackgroundTask) -> String {
    let short = |text: &str| defang::field_max(text, 80);
    let said = |fields: &[&Option<String>], otherwise: &str| {
        short(
            fields
                .iter()
                .find_map(|f| f.as_deref())
                .unwrap_or(otherwise),
        )
    };
    let (what, kind) = match &task.kind {
        TaskKind::Shell => match &task.command {
            Some(command) => (format!("`{}`", short(command)), "shell".to_string()),
            None => (said(&[&task.description], "a shell"), "shell".to_string()),
        },
        TaskKind::Subagent => (
            said(&[&task.description, &task.agent_type], "a subagent"),
            "subagent".to_string(),
        ),
        TaskKind::Other(label) => (
            said(&[&task.description, &task.name, &task.tool], "a task"),
            short(label),
        ),
        TaskKind::Unnamed => (
            said(&[&task.description, &task.name, &task.tool], "a task"),
            "task".to_string(),
        ),
    };
    match &task.id {
        Some(id) => format!("{what} ({kind} {})", short(id)),
        None => format!("{what} ({kind})"),
    }
}

impl Gate<'_> {
    /// Check 1. `None` when no loop is running for this session (and none ended unreported).
    /// The loop's lock is held to read and to write its state, not while the checks run: a
    /// long test run must not keep `loop cancel` out. A pass that declared nothing needs no
    /// check, and is decided in one locked step.
    pub(super) fn run_loop(
        &self,
        config: &GateConfig,
        input: &HookInput,
        session: &SessionId,
    ) -> Option<StopOutput> {
        let mut seen: Option<Seen> = None;
        // The transcripts are read before the lock is taken: `loop cancel`, a StopFailure or
        // a subagent's stop need not wait on them.
        let counted = self.count_tokens(config, input, session);
        let first = self.with_loop(session, |state, budget| {
            let bounds = Bounds::of(&state.limits, &config.loop_limits);
            let mut warning = None;
            if let Some(counted) = counted {
                let now = state.progress.tokens.clone().unwrap_or_default();
                let (tally, said) = if now == counted.before {
                    (counted.after, counted.warning)
                } else {
                    // Another Stop counted meanwhile: count again from where it got to.
                    recount(state, input, now)
                };
                warning = said;
                state.progress.tokens = Some(tally);
            }
            let promise = state.promise()?;
            let (message, note) = match transcript::last_message(input) {
                Ok(found) => (Some(found.map(|(text, _)| text).unwrap_or_default()), None),
                Err(e) => (
                    None,
                    Some(format!(
                        "stop-gate: cannot read the transcript ({e}); this pass counts as not done"
                    )),
                ),
            };
            let assessment = assess(message.as_deref().unwrap_or(""), &promise);
            let pass = Seen {
                message,
                note,
                bounds,
                warning,
                checks: config.check_names(),
            };
            match assessment.verdict {
                Verdict::Blocked => {
                    let question = assessment.question.unwrap_or_default();
                    Ok(Step::End(
                        EndReason::NeedsDecision,
                        format!(
                            "vigil loop stopped at pass {}/{}: the agent asks for a decision: {}",
                            state.iteration,
                            state.max_iterations,
                            shown_question(&question)
                        ),
                    ))
                }
                Verdict::Declared => {
                    let running = running_tasks(input);
                    if running.is_empty() {
                        seen = Some(pass);
                        return Ok(Step::Continue);
                    }
                    // Not final while background work runs (its result is still to come).
                    let work = format!("background work is still running: {running}");
                    if state.progress.waited_in_pass != Some(state.iteration)
                        && spent(state, &bounds).is_none()
                    {
                        state.progress.waited_in_pass = Some(state.iteration);
                        return Ok(self.wait(state, budget, &running));
                    }
                    let line = format!(
                        "stop-gate: {work}; a declaration counts only once it has finished (stop a task that never ends, such as a server or a monitor, with the TaskStop tool and its id before you finish)"
                    );
                    self.advance(state, budget, Verdict::Absent, Some(line), &pass)
                }
                _ => self.advance(state, budget, Verdict::Absent, None, &pass),
            }
        });
        match first {
            Ok(Some(Step::Continue)) => {}
            Ok(Some(Step::Output(output))) => return Some(output),
            Ok(_) => return None,
            Err(output) => return Some(output),
        }
        let pass = seen?;
        // The promise was declared: checks 2 and 3 run, without the lock.
        let judged = self.judged(config);
        let failing = judged.result.err().map(|f| defang(&f.line));
        // What a pass vouches for: the tree its check ran on (the hold's copy), else the tree
        // as it is once the checks passed; a change after it is told at the run's end.
        let vouched = match (&failing, judged.told.subject) {
            (Some(_), _) => None,
            (None, Some(subject)) => Some(subject),
            (None, None) if !pass.checks.is_empty() => {
                subject::worktree_tree(&self.project, config.limits(self.deadline)).ok()
            }
            (None, None) => None,
        };
        let held = judged.told.held.map(HeldTold::capped);
        match self.with_loop(session, |state, budgets| {
            if held.is_some() {
                state.held = held;
            }
            state.vouched = vouched;
            self.advance(state, budgets, Verdict::Declared, failing, &pass)
        }) {
            Ok(Some(Step::Output(output))) => Some(output),
            Ok(_) => None,
            Err(output) => Some(output),
        }
    }

    /// Reads what the transcripts gained, for a running loop with a token budget, without the
    /// record's lock (the tally read is checked again under it).
    fn count_tokens(
        &self,
        config: &GateConfig,
        input: &HookInput,
        session: &SessionId,
    ) -> Option<Counted> {
        let state = loops::load(&self.project, session).ok().flatten()?;
        if !state.status.is_live() {
            return None;
        }
        Bounds::of(&state.limits, &config.loop_limits).max_tokens?;
        let before = state.progress.tokens.clone().unwrap_or_default();
        let (after, warning) = recount(&state, input, before.clone());
        Some(Counted {
            before,
            after,
            warning,
        })
    }

    /// Holds a declared stop once in a pass while background work runs: a block within the
    /// main agent's budget, no pass spent. When the budget is spent the stop is allowed, NOT
    /// verified, and the loop goes on at the next stop.
    fn wait(&self, state: &LoopState, budget: &mut Budget, running: &str) -> Step {
        let work = format!("background work is still running: {running}");
        let promise = state.promise().map(|p| p.tagged()).unwrap_or_default();
        match budget::charge_budget(budget, self.max_blocks) {
            Charge::Block { .. } => {
                let line = format!(
                    "stop-gate: {work}; wait for it to finish (its result comes back to you; a task that never ends, such as a server or a monitor, you stop with the TaskStop tool and its id), then finish by ending with {promise} on its own last line, when it is true"
                );
                Step::Output(StopOutput::Block {
                    reason: cap(&defang_except(&line, &promise), MAX_REASON),
                    system_message: Some(defang(&format!(
                        "vigil loop {}/{}: waiting for background work before the declaration counts: {running}",
                        state.iteration, state.max_iterations,
                    ))),
                })
            }
            Charge::Spent { max } => Step::Output(StopOutput::Allow(Some(defang(&format!(
                "vigil: stop allowed after {max} consecutive blocks; the work is NOT verified. Last problem: {work}"
            ))))),
        }
    }

    /// The end of a pass: passed when declared with every check passing; aborted at the last
    /// pass, or when a limit is spent (a stall, the time, the tokens); and otherwise the next
    /// pass, with the problem (if any) before the prompt. A pass resets the main agent's budget
    /// (`budget`, saved with the loop in one write).
    fn advance(
        &self,
        state: &mut LoopState,
        budget: &mut Budget,
        verdict: Verdict,
        failing: Option<String>,
        pass: &Seen,
    ) -> Result<Step> {
        let (k, max) = (state.iteration, state.max_iterations);
        if verdict == Verdict::Declared && failing.is_none() {
            *budget = Budget {
                budget_spent: budget.budget_spent,
                ..Budget::default()
            };
            state.checks = Some(
                pass.checks
                    .iter()
                    .take(loop_state::MAX_CHECKS)
                    .cloned()
                    .collect(),
            );
            return Ok(Step::End(EndReason::Declared, loops::told_passed(state)));
        }
        let problem = failing.or(pass.note.clone());
        let why = problem
            .as_ref()
            .map_or(String::new(), |line| format!(" Last problem: {line}"));
        if k >= max {
            return Ok(Step::End(
                EndReason::MaxIterations,
                format!(
                    "vigil loop aborted after {max} passes without a verified completion: the work is NOT verified.{why}"
                ),
            ));
        }
        if let Some(message) = &pass.message
            && let Some(repeats) = stalled(state, message, pass.bounds.stall_after)
        {
            return Ok(Step::End(
                EndReason::Stalled,
                format!(
                    "vigil loop aborted at pass {k}/{max}: it stalled, ending {repeats} passes in a row with the same message; the work is NOT verified. Change the task or the prompt, then start it again.{why}"
                ),
            ));
        }
        if let Some((reason, told)) = spent(state, &pass.bounds) {
            return Ok(Step::End(
                reason,
                format!(
                    "vigil loop aborted at pass {k}/{max}: {told}; the work is NOT verified.{why}"
                ),
            ));
        }
        state.iteration = k + 1;
        // A new pass: the blocks counted so far (a hold for background work) were not in a row
        // with what comes now.
        budget.consecutive_blocks = 0;
        budget.status = None;
        let promise = state.promise()?;
        // The finish line goes to the model too, however the loop was started (SPEC §4): a
        // loop started from a terminal has told the model nothing else.
        let finish = format!(
            "vigil loop {}/{max}: finish only by ending with {} on its own last line, when it is true",
            state.iteration,
            promise.tagged()
        );
        let reason = match problem {
            Some(line) => format!("{line}\n\n{}\n\n{finish}", state.prompt),
            None => format!("{}\n\n{finish}", state.prompt),
        };
        let told = match &pass.warning {
            Some(warning) => format!("{finish} (vigil: {})", defang::field(warning)),
            None => finish,
        };
        Ok(Step::Output(StopOutput::Block {
            reason,
            system_message: Some(told),
        }))
    }

    /// Locks the session's record, and applies `step` to its running loop (with the main
    /// agent's budget beside it), saving what it changed in one write. A loop that is not
    /// running is reported once if it was cancelled and never reported (a cancel happens
    /// outside a Stop; the human must hear of it). A record that is damaged, or gone while its
    /// loop was known to run, is told to the human as NOT verified, never taken for "no loop".
    /// `Ok(None)`: no loop.
    fn with_loop(
        &self,
        session: &SessionId,
        step: impl FnOnce(&mut LoopState, &mut Budget) -> Result<Step>,
    ) -> Result<Option<Step>, StopOutput> {
        // The record's lock is let go before a denial charges the budget, which takes it again.
        self.locked(session, step)
            .map_err(|e: Error| self.deny(session, &format!("stop-gate: {e}")))
    }

    /// `with_loop`'s work, under the record's lock.
    fn locked(
        &self,
        session: &SessionId,
        step: impl FnOnce(&mut LoopState, &mut Budget) -> Result<Step>,
    ) -> Result<Option<Step>> {
        let mut record = Session::open(&self.project, session)?;
        // A wake an end still owes (a kill came between the end and its wake): written now.
        let _ = wakes::settle_owed(&mut record);
        if let Some(lost) = record.take_lost() {
            // Told now: the record is saved without it (and without the running marker).
            record.save()?;
            return Ok(Some(Step::Output(StopOutput::Allow(Some(format!(
                "vigil: {lost}; the loop is over, and its work is NOT verified. Start it again with /vigil-loop or `stop-gate loop start`"
            ))))));
        }
        let Some(state) = record.record.ralph.as_mut() else {
            return Ok(None);
        };
        if !state.status.is_live() {
            // An end that happened outside a Stop (a cancel, a session that ended with its
            // loop running, then resumed) is told once.
            if !state.reported {
                state.reported = true;
                let line = loops::told_end(state);
                record.save()?;
                return Ok(Some(Step::Output(StopOutput::Allow(Some(line)))));
            }
            return Ok(None);
        }
        let before = record.record.clone();
        let state = record.record.ralph.as_mut().expect("the loop is there");
        // Back from a failed turn (StopFailure): the pass that failed goes on.
        if state.status == LoopStatus::Interrupted {
            state.status = LoopStatus::Running;
        }
        let step = step(state, &mut record.record.budget)?;
        if let Step::End(why, message) = step {
            let state = record.record.ralph.as_mut().expect("the loop is there");
            state.end(why);
            state.reported = true;
            // The end and the wake it owes are one save: a kill before the wake is written
            // leaves it owed, for the session's next hook (issue 44).
            state.wake_owed = state.report.is_some();
            record.save()?;
            let unwoken = wakes::settle_owed(&mut record);
            let state = record.record.ralph.as_ref().expect("the loop is there");
            if let Some(report) = &state.report {
                let line = wakes::loop_line(state, report);
                self.heard.borrow_mut().settled = Some(line);
            }
            // A wake that could not be written is told to the person, not only on stderr.
            let message = match unwoken {
                Some(line) => format!("{message}\nvigil: {line}"),
                None => message,
            };
            return Ok(Some(Step::Output(StopOutput::Allow(Some(message)))));
        }
        if record.record != before {
            if let Some(state) = record.record.ralph.as_mut() {
                state.updated_at = time::now_rfc3339();
            }
            record.save()?;
        }
        Ok(Some(step))
    }
}

/// What one look at a running loop leads to.
enum Step {
    /// Go on: the promise was declared, and the checks decide.
    Continue,
    /// End the loop for this reason, allowing the stop with this message.
    End(EndReason, String),
    /// Print this.
    Output(StopOutput),
}
