//! SPEC §2 and §3, the command line: usage and input errors are exit 2 with one line, text
//! comes from a file or stdin (invalid UTF-8 judged lossily, over 16 MiB refused), the verdict
//! word and its exit code survive a closed pipe.

use super::assert_verdict;
use crate::support::*;

#[test]
fn empty_promise_is_a_usage_error() {
    let output = promise_matcher_on(&["--promise", "  "], "x");
    usage_error(&output, "promise-matcher");
}

#[test]
fn promise_with_angle_brackets_is_a_usage_error() {
    for bad in ["<promise>DONE</promise>", "a<b", "a>b"] {
        let output = promise_matcher()
            .arg(format!("--promise={bad}"))
            .write_stdin("x")
            .output()
            .unwrap();
        usage_error(&output, "promise-matcher");
    }
}

#[test]
fn unknown_flag_is_a_usage_error() {
    let output = promise_matcher_on(&["--promis=DONE"], "x");
    let stderr = usage_error(&output, "promise-matcher");
    assert!(stderr.contains("--promis"), "{stderr}");
}

#[test]
fn two_files_is_a_usage_error() {
    let output = promise_matcher().args(["a", "b"]).output().unwrap();
    usage_error(&output, "promise-matcher");
}

#[test]
fn missing_file_is_an_input_error_naming_it() {
    let output = promise_matcher()
        .arg("/nonexistent/answer.txt")
        .output()
        .unwrap();
    let stderr = usage_error(&output, "promise-matcher");
    assert!(stderr.contains("/nonexistent/answer.txt"), "{stderr}");
}

#[test]
fn text_from_a_file_argument_is_judged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.txt");
    std::fs::write(&path, "ok\n<promise>DONE</promise>\n").unwrap();
    promise_matcher()
        .arg(&path)
        .assert()
        .success()
        .stdout("declared\n");
}

#[test]
fn plain_output_is_the_verdict_word() {
    promise_matcher()
        .write_stdin("DONE")
        .assert()
        .code(1)
        .stdout("absent\n");
}

#[test]
fn invalid_utf8_text_is_judged_lossily_not_refused() {
    promise_matcher()
        .write_stdin(b"\xff\xfe garbage\n<promise>DONE</promise>\n".to_vec())
        .assert()
        .success()
        .stdout("declared\n");
}

#[test]
fn a_closed_stdout_pipe_keeps_the_verdict_exit_code() {
    let pm = assert_cmd::cargo::cargo_bin!("promise-matcher");
    for (text, code) in [("DONE", "1"), ("<promise>DONE</promise>", "0")] {
        let script = format!(
            "(sleep 0.3; echo '{text}') | '{}' | true; echo ${{PIPESTATUS[1]}}",
            pm.display()
        );
        let output = std::process::Command::new("bash")
            .arg("-c")
            .arg(&script)
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&output.stdout).trim(),
            code,
            "{text}"
        );
    }
}

#[test]
fn a_failed_write_to_stdout_is_one_line_naming_the_binary() {
    let output = std::process::Command::new(assert_cmd::cargo::cargo_bin!("promise-matcher"))
        .stdin(std::process::Stdio::null())
        .stdout(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        )
        .output()
        .unwrap();
    let stderr = usage_error(&output, "promise-matcher");
    assert_contains!(stderr, "cannot write to standard output");
}

#[test]
fn many_opening_tags_are_judged_in_one_pass() {
    // 200,000 opening tags before one closing tag: quadratic pairing would take minutes.
    let text = "<promise>".repeat(200_000) + "</promise>\n<promise>DONE</promise> trailing";
    assert_verdict(&text, "mentioned");
}

#[test]
fn text_over_16_mib_is_refused() {
    let big = vec![b'a'; 16 * 1024 * 1024 + 1];
    let output = promise_matcher().write_stdin(big).output().unwrap();
    assert_contains!(usage_error(&output, "promise-matcher"), "16 MiB");
}

#[test]
fn every_help_prints_usage_and_exits_0() {
    for args in [
        vec!["--help"],
        vec!["-h"],
        vec!["token", "--help"],
        vec!["scan", "--help"],
        vec!["defang", "--help"],
    ] {
        let output = promise_matcher().args(&args).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{args:?}");
        assert!(stdout_of(&output).contains("Usage"), "{args:?}");
    }
}
