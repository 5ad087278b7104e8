//! stop-gate's flags, defined once (`src/cli/stop-gate.flags`, SPEC §4 and §8): the hook, `loop
//! start`, `loop run`, `settings-merge install` and `install.sh` take exactly the flags the table
//! gives them, and `install.sh` refuses, before it builds anything, exactly the values the gate
//! refuses.

use std::path::Path;
use std::process::Output;

use vigil::cli::defs::{self, Flag, Scope};

use crate::support::*;

/// Values at the edges of every rule the table uses.
const PROBES: &[&str] = &[
    "",
    " ",
    "0",
    "1",
    "2",
    "3",
    "19",
    "20",
    "+5",
    "-1",
    "007",
    "1000",
    "1001",
    "10000",
    "10001",
    "86400",
    "86401",
    "1000000",
    "1000001",
    "abc",
    "45s",
    "0s",
    "30m",
    "7d",
    "2x",
    "5",
    "500k",
    "0k",
    "2m",
    "+5k",
    "block",
    "context",
    "bloc",
    "tests",
    "tests=make test",
    "=cmd",
    "../x",
    ".",
    "x y",
    "default",
    "origin",
    "-x",
    "/tmp",
    "block:context",
    "context:block",
    ":",
    "\u{a0}",
    " \u{3000}\t",
    "\u{a0}make",
];

fn with_example(flag: &Flag) -> Vec<&str> {
    let mut args = vec![flag.name];
    args.extend(flag.example);
    args
}

fn stop_gate_with(args: &[&str]) -> Output {
    stop_gate().args(args).output().unwrap()
}

#[test]
fn the_hook_takes_every_flag_the_table_gives_it_and_no_other() {
    for flag in defs::all() {
        let mut args = with_example(flag);
        args.push("--check-config");
        let out = stop_gate_with(&args);
        assert_eq!(
            out.status.success(),
            defs::find(Scope::Hook, flag.name).is_some(),
            "stop-gate {args:?}: {}",
            said(&out)
        );
    }
}

#[test]
fn loop_start_and_loop_run_take_every_flag_the_table_gives_them_and_no_other() {
    for flag in defs::all() {
        let mut args = vec!["loop", "start"];
        args.extend(with_example(flag));
        args.push("--help");
        let out = stop_gate_with(&args);
        assert_eq!(
            out.status.success(),
            defs::find(Scope::Start, flag.name).is_some(),
            "stop-gate {args:?}: {}",
            said(&out)
        );
        // loop run refuses a flag of loop start's that is not its own only after --help is
        // looked at, so that one is given without it.
        let mut args = vec!["loop", "run"];
        args.extend(with_example(flag));
        if defs::find(Scope::Run, flag.name).is_some() {
            args.push("--help");
        }
        args.extend(["--", "true"]);
        let out = stop_gate_with(&args);
        assert_eq!(
            out.status.success(),
            defs::find(Scope::Run, flag.name).is_some(),
            "stop-gate {args:?}: {}",
            said(&out)
        );
    }
}

#[test]
fn the_waiter_takes_every_flag_the_table_gives_it_and_no_other() {
    for flag in defs::all() {
        let mut args = vec!["wait"];
        args.extend(with_example(flag));
        args.push("--help");
        let out = stop_gate_with(&args);
        // Every handler takes --check-config, which the doctor runs it with.
        assert_eq!(
            out.status.success(),
            defs::find(Scope::Wait, flag.name).is_some() || flag.name == "--check-config",
            "stop-gate {args:?}: {}",
            said(&out)
        );
    }
    let out = stop_gate_with(&["wait", "--poll-ms", "9", "--help"]);
    assert_contains!(
        said(&out),
        "--poll-ms takes a whole number from 10 to 60000"
    );
}

#[test]
fn every_help_names_the_flags_the_table_gives_its_command() {
    let hook = stdout_of(&stop_gate_with(&["--help"]));
    let lp = stdout_of(&stop_gate_with(&["loop", "--help"]));
    let wait = stdout_of(&stop_gate_with(&["wait", "--help"]));
    let merge = stdout_of(&settings_merge().arg("--help").output().unwrap());
    let install = stdout_of(
        &std::process::Command::new("bash")
            .arg(repo_path("install.sh"))
            .arg("--help")
            .output()
            .unwrap(),
    );
    for flag in defs::all() {
        let named = |text: &str| {
            text.contains(&format!("{} ", flag.name))
                || text.contains(&format!("{}\n", flag.name))
                || text.contains(&format!("{},", flag.name))
                || text.contains(&format!("{}]", flag.name))
        };
        if flag.in_scope(Scope::Hook) {
            assert!(named(&hook), "stop-gate --help lacks {}", flag.name);
        }
        if flag.in_scope(Scope::Start) {
            assert!(named(&lp), "stop-gate loop --help lacks {}", flag.name);
        }
        // The waiter's own help, and its usage line in the hook's.
        if flag.in_scope(Scope::Wait) {
            assert!(named(&wait), "stop-gate wait --help lacks {}", flag.name);
            let line = hook.lines().find(|l| l.contains("stop-gate wait")).unwrap();
            assert!(
                named(line),
                "stop-gate --help's wait line lacks {}",
                flag.name
            );
        }
        if flag.in_scope(Scope::Install) {
            assert!(named(&merge), "settings-merge --help lacks {}", flag.name);
            assert!(named(&install), "install.sh --help lacks {}", flag.name);
        }
    }
}

/// Whether `install.sh FLAG VALUE` is refused for its value, before anything is built.
fn install_sh_refuses(flag: &str, value: &str, nowhere: &Path) -> bool {
    let out = std::process::Command::new("bash")
        .arg(repo_path("install.sh"))
        .arg("--project")
        .arg(nowhere)
        .args([flag, value])
        .env("VIGIL_BUILT_DIR", nowhere)
        .output()
        .unwrap();
    let text = said(&out);
    let refused = text.contains("nothing was built or changed");
    assert!(
        refused || text.contains("does not exist"),
        "install.sh {flag} {value:?} went further than it should with no project: {text}"
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "install.sh {flag} {value:?}: {text}"
    );
    refused
}

/// Whether the gate (or, for a flag only the installer takes, settings-merge) refuses the value.
fn binaries_refuse(flag: &Flag, value: &str, nowhere: &Path) -> bool {
    if flag.in_scope(Scope::Hook) {
        // The latest deadline, so that a --timeout is judged on its own (the pair is checked
        // where both are known: by the gate, and by settings-merge on the handler it writes).
        return !stop_gate_with(&["--deadline", "86400", flag.name, value, "--check-config"])
            .status
            .success();
    }
    let out = settings_merge()
        .args(["install", "--dry-run", "--settings"])
        .arg(nowhere.join("settings.json"))
        .args([flag.name, value])
        .output()
        .unwrap();
    // Refused for its value: settings-merge says so in the words the gate uses.
    let text = said(&out);
    ["needs", "takes", "is"]
        .iter()
        .any(|verb| text.contains(&format!("{} {verb} ", flag.name)))
}

#[test]
fn install_sh_refuses_a_bad_value_before_building_exactly_where_the_binaries_do() {
    let dir = tempfile::tempdir().unwrap();
    let nowhere = dir.path().join("no-such-project");
    let mut checked = 0;
    for flag in defs::of(Scope::Install).filter(|f| f.takes_value()) {
        for value in PROBES.iter().copied().chain(flag.example) {
            if flag.name == "--timeout" && value == "86400" {
                // Over what the latest deadline leaves after the reserve: a pair rule.
                continue;
            }
            assert_eq!(
                install_sh_refuses(flag.name, value, &nowhere),
                binaries_refuse(flag, value, &nowhere),
                "install.sh and the binaries differ on {} {value:?}",
                flag.name
            );
            checked += 1;
        }
    }
    assert!(checked > 400, "{checked}");
}

#[test]
fn install_sh_refuses_a_flag_without_its_value_or_with_one_it_does_not_take() {
    let dir = tempfile::tempdir().unwrap();
    // `--ru\156` is no flag of install.sh's, whatever awk would make of its escape.
    for args in [
        &["--run"][..],
        &["--no-run=yes"],
        &["--frobnicate"],
        &["--ru\\156", "make test"],
        &["--prefix"],
        &["--project"],
    ] {
        let out = std::process::Command::new("bash")
            .arg(repo_path("install.sh"))
            .arg("--project")
            .arg(dir.path())
            .args(args)
            .env("VIGIL_BUILT_DIR", dir.path().join("none"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", said(&out));
        let text = String::from_utf8(out.stderr).unwrap();
        assert!(text.starts_with("install.sh: "), "{args:?}: {text}");
        assert_eq!(text.trim_end().lines().count(), 1, "{args:?}: {text}");
    }
}

/// docs/flags.md's flag references are the tables': they cannot drift from what the parsers take.
#[test]
fn guides_flag_reference_is_made_from_the_tables() {
    let path = repo_path("docs/flags.md");
    let mut guide = std::fs::read_to_string(&path).unwrap();
    let before = guide.clone();
    for table in &defs::TABLES {
        let binary = table.binary;
        let begin = format!("<!-- flag reference of {binary} -->\n");
        let end = format!("<!-- end of the flag reference of {binary} -->");
        let (head, rest) = guide
            .split_once(&begin)
            .unwrap_or_else(|| panic!("docs/flags.md has the flag reference of {binary}"));
        let (_, tail) = rest.split_once(&end).expect("and its end");
        guide = format!("{head}{begin}{}{end}{tail}", defs::reference(table));
    }
    if std::env::var_os("VIGIL_BLESS").is_some() {
        std::fs::write(&path, &guide).unwrap();
        return;
    }
    assert!(
        guide == before,
        "docs/flags.md's flag reference is not the tables'; `VIGIL_BLESS=1 cargo test --test integration flags` rewrites it"
    );
}

/// The words that reach command `word` of `binary`: what goes before its flags.
fn command_words(binary: &str, word: &'static str) -> Vec<&'static str> {
    match (binary, word) {
        ("marker-writer", word) => vec![word],
        ("promise-matcher", "judge") => vec![],
        ("promise-matcher", word) => vec![word],
        ("settings-merge", _) => vec!["install"],
        ("stop-gate", "status" | "list" | "cancel") => vec!["loop", word],
        ("stop-gate", word) if word.starts_with("hold-") => vec!["hold", &word[5..]],
        _ => vec![],
    }
}

fn binary(name: &str) -> assert_cmd::Command {
    match name {
        "marker-writer" => marker_writer(),
        "promise-matcher" => promise_matcher(),
        "settings-merge" => settings_merge(),
        "session-start-loader" => session_start_loader(),
        "session-end-handoff" => session_end_handoff(),
        _ => stop_gate(),
    }
}

/// Every command of every binary takes exactly the flags its table gives it (each with the
/// table's example value, then --help), and its --help names each of them. stop-gate's hook,
/// loop start, loop run and wait are held to theirs above.
#[test]
fn every_command_takes_the_flags_its_table_gives_it_and_its_help_names_them() {
    let covered = ["hook", "start", "run", "install", "wait"];
    for table in &defs::TABLES {
        for word in table.scopes() {
            if table.binary == "stop-gate" && covered.contains(&word) {
                continue;
            }
            let scope = Scope::of(table.binary, word);
            let words = command_words(table.binary, word);
            let help = stdout_of(
                &binary(table.binary)
                    .args(&words)
                    .arg("--help")
                    .output()
                    .unwrap(),
            );
            for flag in table.all() {
                let mut args = words.clone();
                args.extend(with_example(flag));
                args.push("--help");
                let out = binary(table.binary).args(&args).output().unwrap();
                // Every hook takes --check-config, which the doctor runs it with.
                let taken = defs::find(scope, flag.name).is_some()
                    || (flag.name == "--check-config" && words.is_empty());
                assert_eq!(
                    out.status.success(),
                    taken,
                    "{} {args:?}: {}",
                    table.binary,
                    said(&out)
                );
                if flag.in_scope(scope) {
                    assert_contains!(
                        help,
                        &flag.usage(),
                        "{} {words:?} --help lacks {}",
                        table.binary,
                        flag.usage()
                    );
                }
            }
        }
    }
}
