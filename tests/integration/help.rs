//! SPEC §1 and §2, the binaries' own words (issue 15): every flag the docs show a binary
//! with is in that binary's help, no help line is wider than 100 columns, and each reports its
//! version.

use crate::support::*;

/// Each binary, and the subcommands that have a help of their own.
const HELPS: &[(&str, &[&[&str]])] = &[
    (
        "promise-matcher",
        &[
            &["token", "--help"],
            &["scan", "--help"],
            &["defang", "--help"],
        ],
    ),
    (
        "stop-gate",
        &[
            &["loop", "--help"],
            &["wait", "--help"],
            &["hold", "--help"],
        ],
    ),
    (
        "marker-writer",
        &[
            &["run", "--help"],
            &["write", "--help"],
            &["verify", "--help"],
            &["show", "--help"],
            &["keygen", "--help"],
            &["trust", "--help"],
        ],
    ),
    ("session-end-handoff", &[]),
    ("session-start-loader", &[]),
    ("settings-merge", &[]),
];

fn help_of(binary: &str, subcommands: &[&[&str]]) -> String {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(bin_dir().join(binary))
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{binary} {args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let mut text = run(&["--help"]);
    for args in subcommands {
        text.push_str(&run(args));
    }
    text
}

/// The `--flags` written after `name` on each line of the docs that runs it, outside quotes (a
/// quoted `--run 'cargo test --locked'` holds the check's flags, not the binary's).
fn readme_flags(name: &str) -> Vec<String> {
    let guide = std::fs::read_dir(repo_path("docs")).unwrap();
    let readme = ["README.md", "GUIDE.md", "DEVELOPMENT.md"]
        .map(repo_path)
        .into_iter()
        .chain(guide.map(|doc| doc.unwrap().path()))
        .filter(|doc| doc.extension().is_some_and(|ext| ext == "md"))
        .map(|doc| std::fs::read_to_string(doc).unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    let mut flags = Vec::new();
    for line in readme.lines() {
        let mut rest = line;
        while let Some(at) = rest.find(name) {
            rest = &rest[at + name.len()..];
            let mut quote = None;
            let mut word = String::new();
            for c in rest.chars().chain(std::iter::once(' ')) {
                match (quote, c) {
                    (Some(q), c) if c == q => quote = None,
                    (Some(_), _) => {}
                    (None, '\'' | '"') => quote = Some(c),
                    // `--` ends the binary's flags: what follows is a command of its own.
                    (None, c) if c.is_whitespace() && word == "--" => break,
                    (None, c) if c.is_whitespace() || "`|)]".contains(c) => {
                        let flag: String = word
                            .split('=')
                            .next()
                            .unwrap_or("")
                            .chars()
                            .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
                            .collect();
                        if flag.starts_with("--") && flag.len() > 2 && !flags.contains(&flag) {
                            flags.push(flag);
                        }
                        word.clear();
                        if "`|".contains(c) {
                            break;
                        }
                    }
                    (None, c) => word.push(c),
                }
            }
        }
    }
    flags
}

#[test]
fn every_flag_the_readme_uses_is_in_the_binarys_help() {
    for (binary, subcommands) in HELPS {
        let help = help_of(binary, subcommands);
        for flag in readme_flags(binary) {
            assert_contains!(
                help,
                &flag,
                "{binary} --help lacks {flag}, which the docs use"
            );
        }
    }
    let out = std::process::Command::new("bash")
        .arg(repo_path("install.sh"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    for flag in readme_flags("install.sh") {
        assert!(help.contains(&flag), "install.sh --help lacks {flag}");
    }
}

#[test]
fn no_help_line_is_wider_than_100_columns() {
    for (binary, subcommands) in HELPS {
        for line in help_of(binary, subcommands).lines() {
            assert!(
                unicode_width::UnicodeWidthStr::width(line) <= 100,
                "{binary}: {line:?}"
            );
        }
    }
}

#[test]
fn every_binary_reports_its_version() {
    for name in BINARIES {
        let out = vigil_process(name).arg("--version").output().unwrap();
        assert_eq!(
            stdout_of(&out),
            format!("{name} {}\n", env!("CARGO_PKG_VERSION")),
            "{name}"
        );
    }
}
