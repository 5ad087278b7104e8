//! The checks a Stop must pass (SPEC §4, §11): the subagent contract, the human's hold, the
//! check command and the markers, within the deadline.

use crate::cli::flags;
use crate::cli::hook::HookInput;
use crate::evidence::held;
use crate::evidence::marker;
use crate::evidence::payload;
use crate::evidence::signing;
use crate::evidence::subject::Subject;
use crate::gate::contract::Contract;
use crate::gate::contract::Source;
use crate::gate::output::Failure;
use crate::gate::{Gate, GateConfig, RESERVE};
use crate::gate::{command, held_check};
use crate::reach::sandbox;
use crate::state::hold::{self, Hold};
use crate::state::loop_state::HeldTold;
use crate::transcript;

impl Gate<'_> {
    /// The subagent contract: the report is one JSON object the schema accepts.
    pub(super) fn contract(
        &self,
        source: &Source,
        config: &GateConfig,
        input: &HookInput,
    ) -> Result<(), Failure> {
        let contract = Contract::load(source, &self.project.dir).map_err(|e| {
            Failure::line(format!(
                "stop-gate: config error: {e}; fix --contract in the hook settings (`settings-merge check` validates it)"
            ))
        })?;
        let message = match &input.last_assistant_message {
            Some(message) => message.clone(),
            None => match &input.agent_transcript_path {
                Some(path) => transcript::last_assistant_text_of(path, true)
                    .map_err(|e| {
                        Failure::line(format!(
                            "stop-gate: cannot read the subagent's transcript ({e}); its report cannot be checked"
                        ))
                    })?
                    .unwrap_or_default(),
                None => String::new(),
            },
        };
        contract
            .check(&message, config.contract_max_tokens)
            .map_err(|v| Failure {
                line: v.line,
                detail: v.shape,
            })
    }

    /// Checks 2 and 3, in order; the first failure.
    pub(super) fn checks(&self, config: &GateConfig) -> Result<(), Failure> {
        self.judged(config).result
    }

    /// Checks 2 and 3, and what the hold saw on the way.
    pub(super) fn judged(&self, config: &GateConfig) -> Judged {
        let mut told = Told::default();
        let result = self.checks_in_time(config, &mut told);
        let result = if self.deadline.passed() {
            Err(Failure::line(format!(
                "stop-gate: the checks did not finish within --deadline {} s; the stop is blocked, NOT verified (raise --deadline, and the hook's timeout above it)",
                config.deadline.as_secs()
            )))
        } else {
            result
        };
        Judged { result, told }
    }

    fn checks_in_time(&self, config: &GateConfig, told: &mut Told) -> Result<(), Failure> {
        // The human's hold (SPEC §11): held files as held, before anything runs.
        let hold = self.hold_checked(told)?;
        if let Some(command) = &config.run {
            self.run_check(config, command, hold.as_ref(), told)?;
        }
        self.markers(config, hold.as_ref())
    }

    /// The human's hold (SPEC §11), if there is one, checked: the held files must be as held
    /// (what the comparison found goes in `told`).
    fn hold_checked(&self, told: &mut Told) -> Result<Option<Hold>, Failure> {
        let hold = hold::load(&self.project).map_err(|e| {
            Failure::line(format!(
                "stop-gate: {e}; the stop is blocked while the human's hold on the tests cannot be read"
            ))
        })?;
        if hold.is_none()
            && let Some(outer) = hold::above(&self.project)
        {
            return Err(Failure::line(format!(
                "stop-gate: the human holds the tests of {}, and {} is a repository of its own inside it that git was not told of (a `.git` made there); the stop is blocked: remove {}/.git",
                outer.display(),
                self.project.dir.display(),
                self.project.dir.display()
            )));
        }
        if let Some(hold) = &hold {
            let compared = held::compare(&self.project, hold).map_err(|e| {
                Failure::line(format!(
                    "stop-gate: cannot compare the tree with the human's hold on the tests: {e}"
                ))
            })?;
            told.held = Some(HeldTold {
                differ: compared
                    .changed
                    .iter()
                    .map(|(path, change)| format!("{} ({})", hold::shown(path), change.word()))
                    .collect(),
                new_tests: compared.new.iter().map(|p| hold::shown(p)).collect(),
                moved: Vec::new(),
            });
            if !compared.changed.is_empty() {
                return Err(Failure::line(held_differ(&compared)));
            }
            if !compared.new.is_empty() {
                self.tell(format!(
                    "vigil: files the human's hold does not judge (a check under the hold leaves them out): {}",
                    held_check::named(&compared.new)
                ));
            }
        }
        Ok(hold)
    }

    /// Check 2: the check command, on what the hold judges when there is one.
    fn run_check(
        &self,
        config: &GateConfig,
        command: &str,
        hold: Option<&Hold>,
        told: &mut Told,
    ) -> Result<(), Failure> {
        // The reserve is kept for the markers and the gate's state, whatever came before.
        let timeout = || {
            let left = self.deadline.remaining().saturating_sub(RESERVE);
            config
                .timeout
                .min(left)
                .max(std::time::Duration::from_secs(1))
        };
        let plan = command::plan(
            &self.project,
            config.check_write.clone(),
            config.check_network,
        );
        let required = || sandbox::confinement_required(&self.project.dir);
        if let Some(hold) = hold {
            // Under a hold the check runs on what it judges, and its tests are read one by
            // one (SPEC §11).
            let decided = held_check::check(
                &self.project,
                hold,
                command,
                &plan,
                &required,
                &timeout,
                config.limits(self.deadline),
            );
            for line in decided.notices {
                self.tell(line);
            }
            if let Some(held) = told.held.as_mut() {
                held.moved = decided.moved;
            }
            told.subject = decided.subject;
            decided.result.map_err(|r| Failure {
                line: r.line,
                detail: r.detail,
            })?;
        } else {
            let (checked, _) = held_check::run_reported(
                &self.project,
                command,
                plan,
                required,
                timeout(),
                command::OUTPUT_TAIL,
            )
            .map_err(Failure::line)?;
            if let Some(notice) = checked.unconfined {
                self.tell(notice);
            }
            checked.result.map_err(|f| Failure {
                line: f.line,
                detail: f.tail,
            })?;
        }
        Ok(())
    }

    /// Check 3: every required marker vouches for the tree (and was made under the hold).
    fn markers(&self, config: &GateConfig, hold: Option<&Hold>) -> Result<(), Failure> {
        if config.markers.is_empty() {
            return Ok(());
        }
        let limits = config.limits(self.deadline);
        let subject = Subject::Worktree
            .id(&self.project, None, limits)
            .map_err(|e| {
                Failure::line(format!(
                    "stop-gate: cannot tell what the markers must vouch for: {e}"
                ))
            })?;
        // The same trusted keys as `marker-writer verify`: the flag, $VIGIL_VERIFY_KEY, or the
        // keys of the protected state. A key that cannot be read denies.
        let trust = signing::trusted_keys(&self.project, config.verify_key.as_deref())
            .map_err(|e| Failure::line(format!("stop-gate: {e}")))?;
        for required in &config.markers {
            let check = &required.check;
            let verified = marker::verify(
                &self.project,
                check,
                &subject,
                config.marker_max_age,
                &trust,
                required.command.as_deref(),
            );
            // Under a hold a marker counts only when its run held the same tests (SPEC §11): a
            // run of the tree as the agent left it could include what the hold leaves out.
            if let (Ok(payload), Some(hold)) = (&verified, hold)
                && let Err(why) = held::marker_held(payload, hold)
            {
                return Err(Failure::line(format!(
                    "stop-gate: marker `{check}` was not made under the human's hold on the tests ({why}); a protected writer must run it holding the same tests: `marker-writer run --check {check} --snapshot -- CMD` here, or `--hold-from REF` in CI"
                )));
            }
            if let Err(denial) = verified {
                // What to paste: a command with shell syntax runs (and is recorded) as sh -c.
                let command = match required.command.as_deref() {
                    Some(command) if payload::needs_shell(command) => {
                        format!("sh -c {}", flags::shell_quote(command))
                    }
                    Some(command) => command.to_string(),
                    None => "<the command that checks it>".to_string(),
                };
                // A bound command counts from a snapshot's run, or from CI's signed one.
                let snapshot = if required.command.is_some() {
                    " --snapshot"
                } else {
                    ""
                };
                return Err(Failure::line(format!(
                    "stop-gate: marker `{check}` {}; a protected writer (CI, a git hook, a human) must run `marker-writer run --check {check}{snapshot} -- {command}` on this content before you stop",
                    denial.describe()
                )));
            }
        }
        Ok(())
    }
}

/// The one useful line of a Stop whose held files differ from the human's hold (SPEC §11).
fn held_differ(compared: &held::Comparison) -> String {
    let first = compared
        .changed
        .first()
        .map_or_else(|| "PATH".to_string(), |(path, _)| hold::shown(path));
    format!(
        "stop-gate: held files differ from the human's hold: {}; the tests that judge the work are the human's, so put them back as held (`stop-gate hold diff` shows how they differ; `stop-gate hold cat {first} > {first}` restores one), and if a held test is wrong, end with `needs-decision: ` and why, for the human to run `stop-gate hold refresh {first}`",
        compared.changed_phrase(10)
    )
}

/// What the checks decided, and what the hold saw on the way.
pub(super) struct Judged {
    pub(super) result: Result<(), Failure>,
    pub(super) told: Told,
}

/// What a declared Stop tells of the hold (SPEC §11), kept with the loop for the person.
#[derive(Default)]
pub(super) struct Told {
    pub(super) held: Option<HeldTold>,
    /// The tree the check ran on, when it ran in a copy.
    pub(super) subject: Option<String>,
}
