//! SPEC §4, stop-gate, driven as Claude Code and Codex drive it: one file per rule of §4 (the
//! loop, its commands, the check command, markers, the budget, failing closed) and of the rules
//! of §9 the gate enforces. The project, its Stop and its loops come from `tests/support/`.

mod budget;
mod check_command;
mod config_change;
mod confinement;
mod fails_closed;
mod guard;
mod held_attacks;
mod held_faults;
mod held_results;
mod held_tests;
mod held_warm;
mod limits;
mod loop_commands;
mod loop_ends;
mod loop_run;
mod markers;
mod nested_reach;
mod off_switch;
mod project_config;
mod project_top;
mod ralph_loop;
mod slash_commands;
mod state_faults;

const DECLARED: &str = "Everything works now.\n\n<promise>DONE</promise>";
