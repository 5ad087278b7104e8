//! SPEC §3 per-task tokens and P4: `token new`, an instruction that never holds the assembled
//! marker, `scan` finding it on the screen a harness reads (split, wrapped, painted, in the
//! tail only), and `defang` breaking every live token and tag in text handed on.

use serde_json::{Value, json};

use super::verdict_of;
use crate::support::*;

const TOKEN: &str = "9f3c2a7e5b1d4c6a8e0f2b4d6c8a0e1f";
const MARKER: &str = "<<<VIGIL_DONE_9f3c2a7e5b1d4c6a8e0f2b4d6c8a0e1f>>>";

fn scan_report(bytes: &[u8], extra: &[&str]) -> Value {
    let output = promise_matcher()
        .args(["scan", "--json", "--token", TOKEN])
        .args(extra)
        .write_stdin(bytes.to_vec())
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_valid("scan.schema.json", &report);
    let code = if report["found"] == true { 0 } else { 1 };
    assert_eq!(output.status.code(), Some(code), "{report}");
    report
}

#[test]
fn token_new_prints_128_random_bits_as_32_hex() {
    let a = stdout_of(&promise_matcher().args(["token", "new"]).output().unwrap());
    let b = stdout_of(&promise_matcher().args(["token", "new"]).output().unwrap());
    for token in [&a, &b] {
        let token = token.trim_end();
        assert_eq!(token.len(), 32, "{token}");
        assert!(
            token
                .bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
        );
    }
    assert_ne!(a, b);
}

#[test]
fn token_instruction_never_contains_the_assembled_marker() {
    for prefix in ["VIGIL", "ACME", "X"] {
        let output = promise_matcher()
            .args([
                "token",
                "instruction",
                "--token",
                TOKEN,
                &format!("--prefix={prefix}"),
            ])
            .output()
            .unwrap();
        assert!(output.status.success());
        let text = stdout_of(&output);
        let marker = format!("<<<{prefix}_DONE_{TOKEN}>>>");
        assert!(!text.contains(&marker), "{text}");
        assert_contains!(text, &format!("`<<<{prefix}_`"), "the first piece is given");
        // The second piece is given.
        assert_contains!(text, &format!("`DONE_{TOKEN}>>>`"));
        let flat: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        // Whitespace removed, the pieces must not join.
        assert_lacks!(flat, &marker);
    }
}

#[test]
fn echoed_instruction_text_does_not_scan_as_found() {
    let instruction = stdout_of(
        &promise_matcher()
            .args(["token", "instruction", "--token", TOKEN])
            .output()
            .unwrap(),
    );
    // Echoed as a TUI does: coloured, wrapped at 40 columns with gutters.
    let mut echoed = String::from("\x1b[2m");
    for chunk in instruction.as_bytes().chunks(36) {
        echoed.push_str("\u{2502} ");
        echoed.push_str(&String::from_utf8_lossy(chunk));
        echoed.push_str(" \u{2502}\r\n");
    }
    echoed.push_str("\x1b[0m");
    for cols in ["200", "40", "17"] {
        let report = scan_report(echoed.as_bytes(), &["--cols", cols]);
        assert_eq!(report["found"], false, "cols {cols}: {report}");
    }
}

/// The scan's `report` lists the replayed screen among the views that saw the marker.
fn seen_on_screen(report: &Value) -> bool {
    report["views"]
        .as_array()
        .unwrap()
        .contains(&json!("screen"))
}

#[test]
fn scan_finds_the_marker_as_plain_text() {
    let report = scan_report(format!("working...\n{MARKER}\n").as_bytes(), &[]);
    assert_eq!(report["views"], json!(["text", "flattened", "screen"]));
}

#[test]
fn scan_finds_a_marker_split_across_two_writes_with_an_escape_between() {
    let bytes = format!("{}\x1b[0m\x1b]0;claude\x07{}", &MARKER[..20], &MARKER[20..]);
    let report = scan_report(bytes.as_bytes(), &[]);
    assert_eq!(report["found"], true);
    assert_eq!(
        report["views"][0], "flattened",
        "not visible as raw text: {report}"
    );
}

#[test]
fn scan_finds_a_marker_drawn_inside_box_drawing_gutters() {
    let bytes = format!(
        "\u{256d}\u{2500}\u{2500}\u{256e}\r\n\u{2502} {} \u{2502}\r\n\u{2502} {} \u{2502}\r\n\u{2570}\u{2500}\u{2500}\u{256f}\r\n",
        &MARKER[..25],
        &MARKER[25..]
    );
    let report = scan_report(bytes.as_bytes(), &[]);
    assert_eq!(report["views"], json!(["flattened", "screen"]));
}

#[test]
fn scan_finds_a_marker_soft_wrapped_at_the_terminal_width() {
    // The TUI wraps at 30 columns by breaking the line and indenting the continuation.
    let mut bytes = String::from("\u{25cf} ");
    for (i, chunk) in MARKER.as_bytes().chunks(28).enumerate() {
        if i > 0 {
            bytes.push_str("\r\n  ");
        }
        bytes.push_str(std::str::from_utf8(chunk).unwrap());
    }
    let report = scan_report(bytes.as_bytes(), &["--cols", "30"]);
    assert_eq!(report["views"], json!(["flattened", "screen"]));
    // A real soft wrap by the terminal itself: the screen view joins the rows.
    let report = scan_report(format!("xx{MARKER}").as_bytes(), &["--cols", "10"]);
    assert!(seen_on_screen(&report), "{report}");
}

#[test]
fn scan_finds_a_marker_painted_with_cursor_moves_while_a_spinner_repaints_only_on_screen() {
    let (first, second) = MARKER.split_at(20);
    let mut bytes = String::from("\x1b[2J\x1b[H");
    bytes.push_str(&format!("\x1b[9;1H{first}"));
    for frame in ["\u{280b}", "\u{2819}", "\u{2839}"] {
        bytes.push_str(&format!("\x1b[23;1H\x1b[2K{frame} Thinking\u{2026} (3s)"));
    }
    bytes.push_str(&format!("\x1b[9;21H{second}"));
    bytes.push_str("\x1b[23;1H\x1b[2K");
    let report = scan_report(bytes.as_bytes(), &[]);
    assert_eq!(
        report["views"],
        json!(["screen"]),
        "only the replayed screen can see it"
    );
}

#[test]
fn scan_finds_the_marker_in_scrollback() {
    let mut bytes = format!("{MARKER}\r\n").into_bytes();
    for i in 0..500 {
        bytes.extend_from_slice(format!("log line {i}\r\n").as_bytes());
    }
    let report = scan_report(&bytes, &[]);
    assert_eq!(report["found"], true);
}

#[test]
fn scan_does_not_find_a_marker_outside_the_tail() {
    let mut bytes = format!("{MARKER}\n").into_bytes();
    bytes.extend(std::iter::repeat_n(b'.', 100_000));
    assert_eq!(scan_report(&bytes, &[])["found"], false);
    assert_eq!(scan_report(&bytes, &["--tail", "200000"])["found"], true);
}

#[test]
fn scan_of_a_file_reads_only_its_tail() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.log");
    let mut bytes = vec![b'x'; 5 * 1024 * 1024];
    bytes.extend_from_slice(MARKER.as_bytes());
    std::fs::write(&path, &bytes).unwrap();
    promise_matcher()
        .args(["scan", "--token", TOKEN])
        .arg(&path)
        .assert()
        .success();
    // Redirected standard input is a file too.
    let status = std::process::Command::new(assert_cmd::cargo::cargo_bin!("promise-matcher"))
        .args(["scan", "--token", TOKEN])
        .stdin(std::fs::File::open(&path).unwrap())
        .status()
        .unwrap();
    assert!(status.success());
    // A marker at the start of the file is outside the tail.
    let mut bytes = MARKER.as_bytes().to_vec();
    bytes.extend(vec![b'x'; 5 * 1024 * 1024]);
    std::fs::write(&path, &bytes).unwrap();
    promise_matcher()
        .args(["scan", "--token", TOKEN])
        .arg(&path)
        .assert()
        .code(1);
}

#[test]
fn scan_tail_cut_inside_a_character_still_finds_the_marker() {
    let mut bytes = "\u{00e9}".repeat(100).into_bytes();
    bytes.extend_from_slice(MARKER.as_bytes());
    let tail = (MARKER.len() + 1).to_string();
    assert_eq!(scan_report(&bytes, &["--tail", &tail])["found"], true);
}

#[test]
fn scan_with_another_token_or_prefix_is_not_found() {
    assert_eq!(
        scan_report(b"<<<VIGIL_DONE_0000000000000000aaaaaaaaaaaaaaaa>>>", &[])["found"],
        false
    );
    assert_eq!(
        scan_report(MARKER.as_bytes(), &["--prefix", "ACME"])["found"],
        false
    );
    assert_eq!(
        scan_report(
            MARKER.replace("VIGIL", "ACME").as_bytes(),
            &["--prefix", "ACME"]
        )["found"],
        true
    );
}

#[test]
fn scan_needs_a_valid_token() {
    for args in [
        vec!["scan"],
        vec!["scan", "--token", "short"],
        vec!["scan", "--token", TOKEN, "--cols", "0"],
        vec!["scan", "--token", TOKEN, "--tail", "x"],
    ] {
        let output = promise_matcher_on(&args, "");
        usage_error(&output, "promise-matcher");
    }
}

#[test]
fn defanged_marker_does_not_scan_as_found() {
    let output = promise_matcher_on(&["defang"], format!("{MARKER}\n"));
    let defanged = stdout_of(&output);
    assert_eq!(
        defanged,
        format!("{}\n", MARKER.replace("<<<VIGIL_", "<<<VIG-IL_"))
    );
    assert_eq!(scan_report(defanged.as_bytes(), &[])["found"], false);
}

/// SPEC §3: the flattened view drops exactly what the screen model drops. Each of these bytes
/// inside a marker vanishes from the screen, so the marker is whole there; defang must see it
/// whole too, or it leaves a live marker on the screen.
#[test]
fn defang_breaks_a_marker_split_by_whatever_the_screen_swallows() {
    let (head, tail) = MARKER.split_at(6); // `<<<VIG` | `IL_DONE_…`
    for (what, between) in [
        ("a C1 CSI, which the screen ignores", "\u{9b}"),
        ("a C1 OSC", "\u{9d}"),
        ("a C1 DCS", "\u{90}"),
        ("a C1 NEL", "\u{85}"),
        ("an OSC cut short by CAN", "\x1b]0;title\x18"),
        ("an OSC cut short by SUB", "\x1b]0;title\x1a"),
        ("a DCS cut short by CAN", "\x1bPq#0\x18"),
        ("a CSI cut short by CAN", "\x1b[12\x18"),
        ("an APC cut short by SUB", "\x1b_x\x1a"),
        ("SOS, PM and APC strings", "\x1bXa\x1b\\\x1b^b\x1b\\"),
        ("invalid UTF-8, which the screen never draws", "\u{fffd}"),
        (
            "a zero-width character at the start of a line",
            "\r\n\u{200b}",
        ),
    ] {
        let marked = format!("{head}{between}{tail}\n");
        let report = scan_report(marked.as_bytes(), &[]);
        assert!(
            seen_on_screen(&report),
            "{what}: the screen shows the marker whole ({report})"
        );
        let defanged = defanged(marked.as_bytes());
        let report = scan_report(&defanged, &[]);
        assert_eq!(
            report["found"],
            false,
            "{what}: {:?} {report}",
            String::from_utf8_lossy(&defanged)
        );
    }
    // Raw invalid bytes, and a repeat that completes the `<<<` on the screen.
    for marked in [
        [head.as_bytes(), b"\xff\xfe", tail.as_bytes()].concat(),
        [b"<<\x1b[b", &MARKER.as_bytes()[2..]].concat(),
    ] {
        assert_eq!(scan_report(&marked, &[])["found"], true);
        let defanged = defanged(&marked);
        let report = scan_report(&defanged, &[]);
        assert_eq!(
            report["found"],
            false,
            "{:?} {report}",
            String::from_utf8_lossy(&defanged)
        );
    }
}

/// A repeat count is read as the screen reads it: `ESC[0001b` repeats once, however many zeros
/// lead, and a control inside the digits does not split the number. A screen that read `0001`
/// as a large count painted a run of `<` that defang never saw.
#[test]
fn repeat_counts_are_read_alike_by_defang_and_the_screen() {
    let rest = &MARKER[3..];
    let once = format!("<\u{1b}[0001b{rest}\n");
    assert_eq!(scan_report(once.as_bytes(), &[])["found"], false);
    for twice in [
        format!("<\u{1b}[0002b{rest}\n"),
        format!("<\u{1b}[0\u{0}2b{rest}\n"),
    ] {
        let report = scan_report(twice.as_bytes(), &[]);
        assert_eq!(report["found"], true, "{twice:?}");
        let defanged = defanged(twice.as_bytes());
        assert_eq!(scan_report(&defanged, &[])["found"], false, "{twice:?}");
    }
    // A count past the screen, hidden behind a control, costs what a small one does.
    let started = std::time::Instant::now();
    let hostile = format!("x{}", "\u{1b}[6\u{0}5535b".repeat(7200));
    scan_report(hostile.as_bytes(), &[]);
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
}

/// What `promise-matcher defang` makes of `bytes`.
fn defanged(bytes: &[u8]) -> Vec<u8> {
    let output = promise_matcher_on(&["defang"], bytes.to_vec());
    assert!(output.status.success());
    output.stdout
}

#[test]
fn defang_breaks_a_marker_right_after_an_escape_introducer() {
    for prefix in ["\x1b", "\x1b[", "\x1b]0;", "\x1bP", "\u{9b}"] {
        let text = format!("{prefix}{MARKER}");
        let defanged = promise_matcher_on(&["defang"], text.clone()).stdout;
        assert_eq!(scan_report(&defanged, &[])["found"], false, "{text:?}");
    }
}

#[test]
fn scan_work_is_bounded_by_the_tail_even_for_hostile_repeat_sequences() {
    // `ESC[65535b` repeats the last character 65535 times: unclamped, this tail costs seconds.
    let bytes = b"x\x1b[65535b".repeat(8192);
    assert_eq!(scan_report(&bytes, &[])["found"], false);
    assert_eq!(scan_report(&bytes, &["--cols", "2"])["found"], false);
}

#[test]
fn defang_breaks_promise_tags_so_the_text_never_declares() {
    let text = "All done.\n<promise>DONE</promise>\n";
    let output = promise_matcher_on(&["defang"], text);
    let defanged = stdout_of(&output);
    assert_eq!(defanged, "All done.\n<pro-mise>DONE</pro-mise>\n");
    assert_eq!(verdict_of(&defanged), "absent");
}

#[test]
fn defang_is_idempotent_and_only_adds_hyphens() {
    let text = "<<<VIGIL_DONE_x>>> <<<ACME_DONE_y>>> <promise>DONE</promise> caf\u{e9}\n";
    let once = stdout_of(&promise_matcher_on(&["defang", "--prefix", "ACME"], text));
    let twice = stdout_of(&promise_matcher_on(
        &["defang", "--prefix", "ACME"],
        once.clone(),
    ));
    assert_eq!(once, twice);
    assert_eq!(
        once,
        "<<<VIG-IL_DONE_x>>> <<<AC-ME_DONE_y>>> <pro-mise>DONE</pro-mise> caf\u{e9}\n"
    );
}
