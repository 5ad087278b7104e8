//! `--stall-after K`: the same last message K passes in a row ends the loop `stalled`; the
//! limits' flags are numbers or refused.

use crate::support::*;

use super::start_with;

#[test]
fn the_same_last_message_on_stall_after_passes_ends_the_loop_stalled() {
    let p = Project::new();
    start_with(&p, "s1", 10, &[]);
    // The same words, whitespace aside: a stall by default on the third pass.
    for message in ["Still  on it.", "Still on\tit.\n"] {
        assert!(p.stop(&[], "s1", Some(message)).blocked());
    }
    let third = p.stop(&[], "s1", Some(" Still on it. "));
    third.assert_allowed_saying("stalled");
    assert_contains!(third.system_message(), "NOT verified");
    let state = p.loop_state("s1");
    assert_eq!(state["status"], "aborted");
    assert_eq!(state["end_reason"], "stalled");
    assert_eq!(
        state["iteration"], 3,
        "the rest of the budget was not spent"
    );
}

#[test]
fn messages_that_change_never_stall_and_stall_after_zero_turns_it_off() {
    let p = Project::new();
    start_with(&p, "s1", 10, &[]);
    for i in 0..5 {
        let message = format!("Step {} of the work.", i % 2);
        assert!(p.stop(&[], "s1", Some(&message)).blocked(), "pass {i}");
    }
    start_with(&p, "s2", 10, &["--stall-after", "0"]);
    for _ in 0..5 {
        assert!(
            p.stop(&["--stall-after", "2"], "s2", Some("Same."))
                .blocked()
        );
    }
    assert_eq!(p.loop_state("s2")["limits"]["stall_after"], 0);
}

#[test]
fn the_hooks_stall_after_is_the_default_for_loops_that_do_not_say() {
    let p = Project::new();
    start_with(&p, "s1", 10, &[]);
    assert!(
        p.stop(&["--stall-after", "2"], "s1", Some("Same."))
            .blocked()
    );
    let second = p.stop(&["--stall-after", "2"], "s1", Some("Same."));
    assert!(!second.blocked(), "stalled after two");
    assert_eq!(p.loop_state("s1")["end_reason"], "stalled");
}

#[test]
fn stall_after_and_the_budgets_are_refused_when_they_are_not_numbers() {
    let p = Project::new();
    for (flag, value) in [
        ("--stall-after", "1"),
        ("--stall-after", "-1"),
        ("--stall-after", "three"),
        ("--max-duration", "0s"),
        ("--max-duration", "2 hours"),
        ("--max-tokens", "0"),
        ("--max-tokens", "lots"),
        ("--max-tokens", "99999999999999999999k"),
    ] {
        let out = p
            .loop_for("s1")
            .flags(&[flag, value])
            .prompt("Task.")
            .output();
        usage_error(&out, "stop-gate");
        // Each in a session of its own: three blocks in a row would spend one budget.
        let hook = p.stop(&[flag, value], &format!("h{}", value.len()), Some("x"));
        assert!(hook.blocked(), "a hook with a bad {flag} denies");
        assert!(hook.reason().contains("config error"), "{}", hook.reason());
    }
}
