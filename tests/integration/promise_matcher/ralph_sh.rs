//! The documented bash Ralph loop (templates/ralph.sh), run with promise-matcher as its judge:
//! it ends on a declaration, never on a mention, and at its cap.

use crate::support::*;

/// Runs templates/ralph.sh in a temp project with a stand-in `claude` that prints the given
/// replies in turn (the last one forever), returning the output and how often it ran.
fn ralph(replies: &[&str], max: u32) -> (std::process::Output, usize) {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    for (i, reply) in replies.iter().enumerate() {
        std::fs::write(dir.path().join(format!("reply{}", i + 1)), reply).unwrap();
    }
    let claude = bin.join("claude");
    std::fs::write(
        &claude,
        format!(
            "#!/usr/bin/env bash\nn=$(( $(cat count 2>/dev/null || echo 0) + 1 ))\necho $n > count\n\
             [ \"$1\" = -p ] && [ \"$2\" = \"$(cat PROMPT.md)\" ] || exit 9\n\
             f=reply$n; [ -f $f ] || f=reply{}\ncat $f\n",
            replies.len()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&claude, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(
        dir.path().join("PROMPT.md"),
        "Fix the parser. Say it's done with $(no) `subst`.\n",
    )
    .unwrap();
    let pm_dir = assert_cmd::cargo::cargo_bin!("promise-matcher")
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!("{}:{}:/usr/bin:/bin", bin.display(), pm_dir.display());
    let output = std::process::Command::new("bash")
        .arg(repo_path("templates/ralph.sh"))
        .current_dir(dir.path())
        .env("PATH", path)
        .env("RALPH_MAX", max.to_string())
        .output()
        .unwrap();
    let count =
        std::fs::read_to_string(dir.path().join("count")).map_or(0, |c| c.trim().parse().unwrap());
    (output, count)
}

#[test]
fn ralph_loop_ends_on_the_declaration_not_the_mention() {
    let (output, passes) = ralph(
        &[
            "Working on it.",
            "I will end with <promise>DONE</promise> later.",
            "All tests pass.\n\n<promise>DONE</promise>\n",
        ],
        20,
    );
    assert_exit(&output, 0);
    assert_eq!(passes, 3);
    let stdout = stdout_of(&output);
    assert_contains!(stdout, "pass 1: absent");
    assert_contains!(stdout, "pass 2: mentioned");
    assert!(stdout.contains("declared DONE on pass 3"), "{stdout}");
}

#[test]
fn ralph_loop_stops_at_its_iteration_cap() {
    let (output, passes) = ralph(&["Still going."], 3);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(passes, 3);
    assert!(String::from_utf8_lossy(&output.stderr).contains("NOT verified"));
}

#[test]
fn ralph_loop_stops_when_the_agent_asks_a_human() {
    let (output, passes) = ralph(
        &["needs-decision: Drop the legacy API?\n<promise>DONE</promise>"],
        5,
    );
    assert_eq!(output.status.code(), Some(3));
    assert_eq!(passes, 1);
}
