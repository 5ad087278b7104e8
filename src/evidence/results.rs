//! Test results read per test (SPEC §11): a JUnit XML report (its XML read by quick-xml), or the
//! lines runners print for each test (`cargo test`'s `test X ... ok`, `go test -json`, pytest
//! `-rA`, unittest `-v`, TAP), and the runners' summaries, which say how many tests ran.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::error::{Error, Result};

/// One test's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Outcome {
    Passed,
    Skipped,
    Failed,
}

impl Outcome {
    pub(crate) fn word(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Skipped => "skipped",
            Outcome::Failed => "failed",
        }
    }
}

/// What a run said of its tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Results {
    /// Each test by its identity; a test named twice keeps its worst outcome.
    pub tests: BTreeMap<String, Outcome>,
    /// How many tests ran (passed or failed, not skipped) by the summaries recognised, when
    /// any was.
    pub ran: Option<u64>,
    /// How many failed by those summaries, when they say.
    pub failed: Option<u64>,
}

impl Results {
    fn record(&mut self, id: String, outcome: Outcome) {
        let entry = self.tests.entry(id).or_insert(outcome);
        *entry = (*entry).max(outcome);
    }

    fn count(&mut self, ran: u64, failed: Option<u64>) {
        self.ran = Some(self.ran.unwrap_or(0) + ran);
        if let Some(failed) = failed {
            self.failed = Some(self.failed.unwrap_or(0) + failed);
        }
    }

    pub(crate) fn outcome(&self, id: &str) -> Option<Outcome> {
        self.tests.get(id).copied()
    }
}

/// The tests of a JUnit XML report, wherever its `<testcase>` elements stand (under
/// `<testsuite>`, nested suites, or `<testsuites>` itself, as node's reporter writes them):
/// `classname::name`, or `name` without a class. A case with `<failure>` or `<error>` failed,
/// one with `<skipped>` was skipped. The XML is read by quick-xml.
pub(crate) fn from_junit(bytes: &[u8]) -> Result<Results> {
    use quick_xml::events::{BytesStart, Event};

    let bad = |e: &dyn std::fmt::Display| {
        Error::input(format!("the JUnit report is not XML vigil can read: {e}"))
    };
    let attribute = |tag: &BytesStart, name: &str| -> Result<Option<String>> {
        for attribute in tag.attributes() {
            let attribute = attribute.map_err(|e| bad(&e))?;
            if attribute.key.as_ref() == name {
                let value = attribute
                    .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                    .map_err(|e| bad(&e))?;
                return Ok(Some(value.into_owned()));
            }
        }
        Ok(None)
    };
    let mut reader = quick_xml::Reader::from_reader(bytes);
    let mut buf = Vec::new();
    let mut results = Results::default();
    // The case being read: its identity and worst outcome so far.
    let mut open: Option<(String, Outcome)> = None;
    let (mut ran, mut failed, mut cases) = (0, 0, 0u64);
    let mut close = |case: (String, Outcome), results: &mut Results| {
        if case.1 != Outcome::Skipped {
            ran += 1;
        }
        if case.1 == Outcome::Failed {
            failed += 1;
        }
        cases += 1;
        results.record(case.0, case.1);
    };
    loop {
        let event = reader.read_event_into(&mut buf).map_err(|e| bad(&e))?;
        let (tag, empty) = match &event {
            Event::Start(tag) => (Some(tag), false),
            Event::Empty(tag) => (Some(tag), true),
            Event::End(end) if end.local_name().as_ref() == "testcase" => {
                if let Some(case) = open.take() {
                    close(case, &mut results);
                }
                (None, false)
            }
            Event::Eof => break,
            _ => (None, false),
        };
        if let Some(tag) = tag {
            match tag.local_name().as_ref() {
                "testcase" => {
                    if let Some(case) = open.take() {
                        close(case, &mut results);
                    }
                    let name = attribute(tag, "name")?.unwrap_or_default();
                    let id = match attribute(tag, "classname")? {
                        Some(class) if !class.is_empty() => format!("{class}::{name}"),
                        _ => name,
                    };
                    let case = (id, Outcome::Passed);
                    if empty {
                        close(case, &mut results);
                    } else {
                        open = Some(case);
                    }
                }
                "failure" | "error" => {
                    if let Some(case) = open.as_mut() {
                        case.1 = Outcome::Failed;
                    }
                }
                "skipped" => {
                    if let Some(case) = open.as_mut() {
                        case.1 = case.1.max(Outcome::Skipped);
                    }
                }
                _ => {}
            }
        }
        buf.clear();
    }
    if let Some(case) = open.take() {
        close(case, &mut results);
    }
    if cases == 0 && !bytes.windows(9).any(|w| w == b"<testsuit") {
        return Err(Error::input(
            "the JUnit report holds no <testsuite> or <testcase>: it is not a JUnit report",
        ));
    }
    results.count(ran, Some(failed));
    Ok(results)
}

/// What the runners printed: each test by the lines they print for it, and the tests run by
/// their summaries. Output that names no test and no summary gives empty results.
pub(crate) fn from_output(text: &str) -> Results {
    let mut results = Results::default();
    let mut binary = String::new();
    // node prints `pass` before `fail`: the pair is counted at `fail`.
    let mut node_pass = None;
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        if let Some(name) = cargo_binary(line) {
            binary = name;
        } else if let Some((name, outcome)) = cargo_test(line) {
            results.record(format!("{binary}::{name}"), outcome);
        } else if let Some((ran, failed)) = cargo_summary(line) {
            results.count(ran, Some(failed));
        } else if let Some((id, outcome)) = go_json(line) {
            results.record(id, outcome);
            let failed = u64::from(outcome == Outcome::Failed);
            results.count(u64::from(outcome != Outcome::Skipped), Some(failed));
        } else if let Some((id, outcome)) = pytest_line(line) {
            results.record(id, outcome);
        } else if let Some((ran, failed)) = pytest_summary(line) {
            results.count(ran, Some(failed));
        } else if let Some((id, outcome)) = unittest_line(line) {
            results.record(id, outcome);
        } else if let Some((id, outcome)) = tap_line(line) {
            results.record(id, outcome);
        } else if let Some(ran) = unittest_summary(line) {
            results.count(ran, None);
        } else if let Some(passed) = node_count(line, "pass") {
            node_pass = Some(passed);
        } else if let Some(failed) = node_count(line, "fail")
            && let Some(passed) = node_pass.take()
        {
            results.count(passed + failed, Some(failed));
        }
    }
    results
}

/// `     Running unittests src/lib.rs (target/debug/deps/vigil-0123abcd)`: `vigil`;
/// `   Doc-tests vigil`: `doc-vigil`.
fn cargo_binary(line: &str) -> Option<String> {
    let trimmed = line.trim_start();
    if let Some(name) = trimmed.strip_prefix("Doc-tests ") {
        return Some(format!("doc-{}", name.trim()));
    }
    let rest = trimmed.strip_prefix("Running ")?;
    let path = rest.rsplit_once('(')?.1.strip_suffix(')')?;
    let file = path.rsplit(['/', '\\']).next()?;
    let file = file.strip_suffix(".exe").unwrap_or(file);
    let name = match file.rsplit_once('-') {
        Some((name, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => name,
        _ => file,
    };
    Some(name.to_string())
}

/// `test a::b ... ok`, `... FAILED`, `... ignored` (`, reason` may follow).
fn cargo_test(line: &str) -> Option<(String, Outcome)> {
    let rest = line.strip_prefix("test ")?;
    let (name, result) = rest.rsplit_once(" ... ")?;
    let outcome = match result.trim() {
        "ok" => Outcome::Passed,
        "FAILED" => Outcome::Failed,
        r if r == "ignored" || r.starts_with("ignored, ") => Outcome::Skipped,
        _ => return None,
    };
    // A doc test names its file and line: `src/lib.rs - f (line 3)`.
    if name.is_empty() || name.contains('\t') {
        return None;
    }
    Some((name.to_string(), outcome))
}

/// `test result: ok. 3 passed; 1 failed; 2 ignored; 0 measured; 0 filtered out; finished in …`.
fn cargo_summary(line: &str) -> Option<(u64, u64)> {
    let rest = line.strip_prefix("test result: ")?;
    let (_, counts) = rest.split_once(". ")?;
    let passed = count_before(counts, " passed")?;
    let failed = count_before(counts, " failed")?;
    Some((passed + failed, failed))
}

/// The number just before `word` in `text`.
fn count_before(text: &str, word: &str) -> Option<u64> {
    let at = text.find(word)?;
    let digits: String = text[..at]
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.chars().rev().collect::<String>().parse().ok()
}

#[derive(Deserialize)]
struct GoEvent {
    #[serde(rename = "Action")]
    action: String,
    #[serde(rename = "Package")]
    package: Option<String>,
    #[serde(rename = "Test")]
    test: Option<String>,
}

/// A `go test -json` event that ends a test: `package/Test` and how.
fn go_json(line: &str) -> Option<(String, Outcome)> {
    if !line.starts_with('{') || !line.contains("\"Action\"") {
        return None;
    }
    let event: GoEvent = serde_json::from_str(line).ok()?;
    let test = event.test?;
    let outcome = match event.action.as_str() {
        "pass" => Outcome::Passed,
        "fail" => Outcome::Failed,
        "skip" => Outcome::Skipped,
        _ => return None,
    };
    Some((
        format!("{}/{test}", event.package.unwrap_or_default()),
        outcome,
    ))
}

/// pytest `-rA`'s summary lines: `PASSED tests/a.py::test_x`, `FAILED tests/a.py::t - why`.
fn pytest_line(line: &str) -> Option<(String, Outcome)> {
    let (word, rest) = line.split_once(' ')?;
    let outcome = match word {
        "PASSED" | "XFAIL" | "XPASS" => Outcome::Passed,
        "FAILED" | "ERROR" => Outcome::Failed,
        _ => return None,
    };
    let id = rest.split(" - ").next()?.trim();
    (id.contains("::") && !id.contains(' ')).then(|| (id.to_string(), outcome))
}

/// pytest's closing line: `==== 3 passed, 1 failed, 2 skipped in 0.12s ====`, or `-q`'s bare
/// `3 passed in 0.12s`; `no tests ran in 0.01s`.
fn pytest_summary(line: &str) -> Option<(u64, u64)> {
    let text = line.trim().trim_matches('=').trim();
    let (counts, time) = text.rsplit_once(" in ")?;
    // `0.12s`, or `62.01s (0:01:02)`.
    if !time.split_whitespace().next()?.ends_with('s') {
        return None;
    }
    if counts == "no tests ran" {
        return Some((0, 0));
    }
    let mut ran = 0;
    let mut failed = 0;
    let mut any = false;
    for part in counts.split(", ") {
        let (n, word) = part.trim().split_once(' ')?;
        let n: u64 = n.parse().ok()?;
        match word {
            "passed" | "xfailed" | "xpassed" => ran += n,
            "failed" | "error" | "errors" => {
                ran += n;
                failed += n;
            }
            "skipped" | "deselected" | "warning" | "warnings" | "rerun" => {}
            _ => return None,
        }
        any = true;
    }
    any.then_some((ran, failed))
}

/// unittest `-v`: `test_add (tests.test_calc.T.test_add) ... ok` (Python 3.11 and later), or
/// `test_add (tests.test_calc.T) ... ok` (earlier).
fn unittest_line(line: &str) -> Option<(String, Outcome)> {
    let (head, result) = line.rsplit_once(" ... ")?;
    let outcome = match result.trim() {
        "ok" | "expected failure" => Outcome::Passed,
        "FAIL" | "ERROR" | "unexpected success" => Outcome::Failed,
        r if r.starts_with("skipped") => Outcome::Skipped,
        _ => return None,
    };
    let (name, rest) = head.split_once(" (")?;
    let inside = rest.strip_suffix(')')?;
    if name.contains(' ') || inside.contains(' ') {
        return None;
    }
    let id = if inside.ends_with(&format!(".{name}")) {
        inside.to_string()
    } else {
        format!("{inside}.{name}")
    };
    Some((id, outcome))
}

/// TAP (node's test runner where its output is no terminal): `ok 1 - adds`, `not ok 2 - x`,
/// `ok 3 - later # SKIP`; a subtest is indented.
fn tap_line(line: &str) -> Option<(String, Outcome)> {
    let text = line.trim_start();
    let (passed, rest) = match text.strip_prefix("not ok ") {
        Some(rest) => (false, rest),
        None => (true, text.strip_prefix("ok ")?),
    };
    let (number, rest) = rest.split_once(' ').unwrap_or((rest, ""));
    if number.is_empty() || !number.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let rest = rest.strip_prefix("- ").unwrap_or(rest);
    let (name, directive) = rest.split_once(" # ").unwrap_or((rest, ""));
    let directive = directive.trim_start().to_ascii_uppercase();
    let outcome = if directive.starts_with("SKIP") || directive.starts_with("TODO") {
        Outcome::Skipped
    } else if passed {
        Outcome::Passed
    } else {
        Outcome::Failed
    };
    let name = name.trim();
    (!name.is_empty()).then(|| (name.to_string(), outcome))
}

/// `Ran 3 tests in 0.001s`.
fn unittest_summary(line: &str) -> Option<u64> {
    let rest = line.strip_prefix("Ran ")?;
    let (n, rest) = rest.split_once(' ')?;
    (rest.starts_with("test") && rest.contains(" in ")).then(|| n.parse().ok())?
}

/// node's test runner: TAP's `# pass N`, or the spec reporter's `ℹ pass N` (`fail` alike).
fn node_count(line: &str, word: &str) -> Option<u64> {
    let rest = line
        .strip_prefix("# ")
        .or_else(|| line.strip_prefix("ℹ "))?;
    rest.strip_prefix(word)?
        .strip_prefix(' ')?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargo_tests_are_named_by_their_binary() {
        let out = "     Running unittests src/lib.rs (target/debug/deps/calc-0123abcd)\n\nrunning 2 tests\ntest tests::adds ... ok\ntest tests::subtracts ... FAILED\ntest tests::slow ... ignored, too slow\n\ntest result: FAILED. 1 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s\n     Running tests/it.rs (target/debug/deps/it-99aa)\ntest adds ... ok\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n";
        let r = from_output(out);
        assert_eq!(r.outcome("calc::tests::adds"), Some(Outcome::Passed));
        assert_eq!(r.outcome("calc::tests::subtracts"), Some(Outcome::Failed));
        assert_eq!(r.outcome("calc::tests::slow"), Some(Outcome::Skipped));
        assert_eq!(r.outcome("it::adds"), Some(Outcome::Passed));
        assert_eq!((r.ran, r.failed), (Some(3), Some(1)));
    }

    #[test]
    fn pytest_report_all_lines_and_summaries_are_read() {
        let out = "...F\n=== short test summary info ===\nPASSED tests/test_a.py::test_x\nPASSED tests/test_a.py::test_p[1-2]\nFAILED tests/test_a.py::test_y - assert 1 == 2\nSKIPPED [1] tests/test_a.py:9: later\n==== 1 failed, 2 passed, 1 skipped in 0.12s ====\n";
        let r = from_output(out);
        assert_eq!(r.outcome("tests/test_a.py::test_x"), Some(Outcome::Passed));
        assert_eq!(
            r.outcome("tests/test_a.py::test_p[1-2]"),
            Some(Outcome::Passed)
        );
        assert_eq!(r.outcome("tests/test_a.py::test_y"), Some(Outcome::Failed));
        assert_eq!((r.ran, r.failed), (Some(3), Some(1)));
        assert_eq!(from_output("\nno tests ran in 0.01s\n").ran, Some(0));
        assert_eq!(from_output("5 deselected in 0.01s").ran, Some(0));
    }

    #[test]
    fn unittest_verbose_lines_are_read_in_both_forms() {
        let out = "test_add (tests.test_calc.T.test_add) ... ok\ntest_sub (tests.test_calc.T) ... FAIL\ntest_x (tests.test_calc.T.test_x) ... skipped 'later'\n\nRan 3 tests in 0.001s\n";
        let r = from_output(out);
        assert_eq!(
            r.outcome("tests.test_calc.T.test_add"),
            Some(Outcome::Passed)
        );
        assert_eq!(
            r.outcome("tests.test_calc.T.test_sub"),
            Some(Outcome::Failed)
        );
        assert_eq!(
            r.outcome("tests.test_calc.T.test_x"),
            Some(Outcome::Skipped)
        );
        assert_eq!(r.ran, Some(3));
        assert_eq!(
            from_output("Ran 0 tests in 0.000s\n\nNO TESTS RAN").ran,
            Some(0)
        );
    }

    #[test]
    fn go_json_events_name_package_and_test() {
        let out = "{\"Action\":\"run\",\"Package\":\"ex/calc\",\"Test\":\"TestAdd\"}\n{\"Action\":\"pass\",\"Package\":\"ex/calc\",\"Test\":\"TestAdd\",\"Elapsed\":0}\n{\"Action\":\"fail\",\"Package\":\"ex/calc\",\"Test\":\"TestSub/neg\"}\n{\"Action\":\"fail\",\"Package\":\"ex/calc\"}\n";
        let r = from_output(out);
        assert_eq!(r.outcome("ex/calc/TestAdd"), Some(Outcome::Passed));
        assert_eq!(r.outcome("ex/calc/TestSub/neg"), Some(Outcome::Failed));
        assert_eq!(r.tests.len(), 2);
    }

    #[test]
    fn a_junit_report_names_class_and_test() {
        let xml = r#"<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="3">
            <testcase classname="tests.test_a" name="test_x"/>
            <testcase classname="tests.test_a" name="test_y"><failure message="no">x</failure></testcase>
            <testcase classname="tests.test_a" name="test_z"><skipped message="later"/></testcase>
            </testsuite></testsuites>"#;
        let r = from_junit(xml.as_bytes()).unwrap();
        assert_eq!(r.outcome("tests.test_a::test_x"), Some(Outcome::Passed));
        assert_eq!(r.outcome("tests.test_a::test_y"), Some(Outcome::Failed));
        assert_eq!(r.outcome("tests.test_a::test_z"), Some(Outcome::Skipped));
        assert_eq!((r.ran, r.failed), (Some(2), Some(1)));
        assert!(from_junit(b"<not xml").is_err());
        assert!(from_junit(b"<html></html>").is_err());
    }

    #[test]
    fn a_junit_report_of_nodes_runner_has_its_cases_under_testsuites() {
        let xml = r#"<?xml version="1.0" encoding="utf-8"?>
            <testsuites>
            <testcase name="adds" time="0.001" classname="test"/>
            <testcase name="fails" time="0.0009" classname="test" failure="2 == 3">
            <failure type="testCodeFailure" message="2 == 3">boom</failure>
            </testcase>
            <testcase name="later" time="0.0001" classname="test">
            <skipped type="skipped" message="true"/>
            </testcase>
            <!-- tests 3 -->
            </testsuites>"#;
        let r = from_junit(xml.as_bytes()).unwrap();
        assert_eq!(r.outcome("test::adds"), Some(Outcome::Passed));
        assert_eq!(r.outcome("test::fails"), Some(Outcome::Failed));
        assert_eq!(r.outcome("test::later"), Some(Outcome::Skipped));
        assert_eq!((r.ran, r.failed), (Some(2), Some(1)));
    }

    #[test]
    fn node_summaries_count_pass_and_fail() {
        let r = from_output("# tests 3\n# pass 2\n# fail 1\n");
        assert_eq!((r.ran, r.failed), (Some(3), Some(1)));
        let r = from_output("ℹ tests 0\nℹ pass 0\nℹ fail 0\n");
        assert_eq!(r.ran, Some(0));
    }

    #[test]
    fn tap_lines_name_each_test() {
        let r = from_output(
            "TAP version 13\n# Subtest: adds\nnot ok 1 - adds\n  ---\nok 2 - multiplies\nok 3 - later # SKIP\n    ok 1 - inner\nok  \texample.com/pkg\t0.01s\n1..3\n# pass 1\n# fail 1\n",
        );
        assert_eq!(r.outcome("adds"), Some(Outcome::Failed));
        assert_eq!(r.outcome("multiplies"), Some(Outcome::Passed));
        assert_eq!(r.outcome("later"), Some(Outcome::Skipped));
        assert_eq!(r.outcome("inner"), Some(Outcome::Passed));
        assert_eq!(r.tests.len(), 4);
    }

    #[test]
    fn a_test_named_twice_keeps_its_worst_outcome() {
        let r = from_output("test a ... FAILED\ntest a ... ok\n");
        assert_eq!(r.outcome("::a"), Some(Outcome::Failed));
    }

    #[test]
    fn output_with_no_runner_in_it_names_nothing() {
        let r = from_output("src/lib.rs:3: warning: unused\nall clean\n");
        assert!(r.tests.is_empty());
        assert_eq!(r.ran, None);
    }
}
