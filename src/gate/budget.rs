//! The block budget (SPEC §4): consecutive blocks per session from the check command, the
//! markers, malformed input and config errors, in the session's record of the protected state
//! (`session`). A pass resets it; when it is spent the stop is allowed and the session records
//! `aborted`.

use crate::error::Result;
use crate::state::project::{Project, SessionId};
use crate::state::session::{AgentBudget, Budget, Session};

pub(crate) const DEFAULT_MAX_BLOCKS: u32 = 3;

/// What the budget says about a block the gate wants to give.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Charge {
    /// Block: this is block `count` of `max`.
    Block { count: u32, max: u32 },
    /// The budget is spent: allow, and say the work is not verified.
    Spent { max: u32 },
}

/// Whose stops a budget counts: the main agent's, or a subagent's (kept apart, so that a
/// subagent passing never resets the main agent's count, nor spends it). A subagent is counted
/// by its `agent_id`, so one subagent sent back never spends another's budget; one without an
/// id shares the session's subagent budget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    Main,
    Subagent(Option<String>),
}

/// How many subagents' budgets a session keeps: past it, the budgets at zero go first, then
/// the oldest.
pub(crate) const MAX_AGENT_BUDGETS: usize = 64;

fn of<'a>(session: &'a mut Session, scope: &Scope) -> &'a mut Budget {
    match scope {
        Scope::Main => &mut session.record.budget,
        Scope::Subagent(None) => &mut session.record.subagent_budget,
        Scope::Subagent(Some(agent)) => {
            let budgets = &mut session.record.agent_budgets;
            let at = match budgets.iter().position(|b| b.agent_id == *agent) {
                Some(at) => at,
                None => {
                    if budgets.len() >= MAX_AGENT_BUDGETS {
                        budgets.retain(|b| b.budget.consecutive_blocks > 0);
                    }
                    if budgets.len() >= MAX_AGENT_BUDGETS {
                        budgets.remove(0);
                    }
                    budgets.push(AgentBudget {
                        agent_id: agent.clone(),
                        budget: Budget::default(),
                    });
                    budgets.len() - 1
                }
            };
            &mut budgets[at].budget
        }
    }
}

/// Counts one more block in an open session record (saved by the caller). When that would
/// exceed `max`, the budget is spent instead: the count starts again from zero and the session
/// records `aborted`.
pub(crate) fn charge_in(session: &mut Session, scope: &Scope, max: u32) -> Charge {
    charge_budget(of(session, scope), max)
}

/// Counts one more block against `budget`.
pub(crate) fn charge_budget(budget: &mut Budget, max: u32) -> Charge {
    budget.consecutive_blocks += 1;
    if budget.consecutive_blocks > max {
        budget.consecutive_blocks = 0;
        budget.status = Some("aborted".to_string());
        budget.budget_spent += 1;
        Charge::Spent { max }
    } else {
        Charge::Block {
            count: budget.consecutive_blocks,
            max,
        }
    }
}

/// A pass, in an open session record: whether it changed anything to save.
pub(crate) fn reset_in(session: &mut Session, scope: &Scope) -> bool {
    if let Scope::Subagent(Some(agent)) = scope {
        // A subagent's budget at zero is no budget: its entry goes.
        let before = session.record.agent_budgets.len();
        session
            .record
            .agent_budgets
            .retain(|b| b.agent_id != *agent);
        return session.record.agent_budgets.len() != before;
    }
    let budget = of(session, scope);
    if budget.consecutive_blocks == 0 && budget.status.is_none() {
        return false;
    }
    budget.consecutive_blocks = 0;
    budget.status = None;
    true
}

/// Counts one more block for `session` and saves it.
pub(crate) fn charge(
    project: &Project,
    session: &SessionId,
    scope: &Scope,
    max: u32,
) -> Result<Charge> {
    let mut record = Session::open(project, session)?;
    let charge = charge_in(&mut record, scope, max);
    record.save()?;
    Ok(charge)
}

/// A pass for `session`, which has a record (the caller has looked): nothing is written when
/// the count is at zero already.
pub(crate) fn reset(project: &Project, session: &SessionId, scope: &Scope) -> Result<()> {
    let mut record = Session::open(project, session)?;
    if reset_in(&mut record, scope) {
        record.save()?;
    }
    Ok(())
}
