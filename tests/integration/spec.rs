//! The contract lives with the code (issue 42): `SPEC.md` in the repository is the spec the
//! code cites, kept identical to the shared one this project was given, and every "§N" and
//! "SPEC Pn" that `src/` or the docs cite names a section or principle it has.

use std::path::{Path, PathBuf};

const REPO: &str = env!("CARGO_MANIFEST_DIR");

fn spec() -> String {
    std::fs::read_to_string(Path::new(REPO).join("SPEC.md")).expect("SPEC.md is in the repository")
}

/// The section numbers (`## 9. Tamper resistance` gives 9) and principles (`**P6 ` gives 6).
fn sections_and_principles(spec: &str) -> (Vec<u32>, Vec<u32>) {
    let number = |rest: &str| -> Option<u32> {
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    let sections = spec
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .filter_map(number)
        .collect();
    let principles = spec
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("- **P"))
        .filter_map(number)
        .collect();
    (sections, principles)
}

/// Every `§N` in `text`, and every `Pn` that follows "SPEC " (`SPEC P6`, `SPEC P9, §11`).
fn citations(text: &str) -> (Vec<u32>, Vec<u32>) {
    let digits = |s: &str| -> Option<u32> {
        let d: String = s.chars().take_while(char::is_ascii_digit).collect();
        d.parse().ok()
    };
    let sections = text
        .split('§')
        .skip(1)
        .filter_map(|s| digits(s.trim_start()))
        .collect();
    let principles = text
        .match_indices("SPEC P")
        .filter_map(|(at, found)| digits(&text[at + found.len()..]))
        .collect();
    (sections, principles)
}

fn cited_files() -> Vec<PathBuf> {
    let mut files = vec![];
    let mut dirs = vec![Path::new(REPO).join("src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    // The docs: every Markdown file at the top and in `docs/`.
    let mut dirs = vec![Path::new(REPO).to_path_buf(), Path::new(REPO).join("docs")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for path in entries.map(|e| e.unwrap().path()) {
            if path.is_dir() && path.starts_with(Path::new(REPO).join("docs")) {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") && !path.ends_with("SPEC.md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn every_spec_citation_names_a_section_the_spec_in_the_repository_has() {
    let (sections, principles) = sections_and_principles(&spec());
    assert!(
        sections.contains(&11) && principles.contains(&9),
        "SPEC.md lost its headings"
    );
    let mut cited = 0;
    let mut wrong = vec![];
    for file in cited_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let (s, p) = citations(line);
            cited += s.len() + p.len();
            let place = || format!("{}:{}", file.strip_prefix(REPO).unwrap().display(), n + 1);
            wrong.extend(
                s.iter()
                    .filter(|s| !sections.contains(s))
                    .map(|s| format!("{}: §{s}", place())),
            );
            wrong.extend(
                p.iter()
                    .filter(|p| !principles.contains(p))
                    .map(|p| format!("{}: P{p}", place())),
            );
        }
    }
    // src/ alone cites the spec well over a hundred times: a reader that finds none is broken.
    assert!(cited > 200, "only {cited} citations found");
    assert!(
        wrong.is_empty(),
        "citations of sections SPEC.md does not have:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn a_citation_of_a_section_the_spec_lacks_is_found() {
    let (sections, principles) = sections_and_principles(&spec());
    let (s, p) = citations("held (SPEC §12, §9; SPEC P10)");
    assert_eq!(s, [12, 9]);
    assert_eq!(p, [10]);
    assert!(!sections.contains(&12) && !principles.contains(&10));
}

#[test]
fn the_spec_in_the_repository_is_the_one_this_project_was_given() {
    // The shared copy sits beside the clone where the project is developed and checked (CI
    // clones next to it); elsewhere there is nothing to compare with.
    let shared = Path::new(REPO).join("../shared/SPEC.md");
    let Ok(given) = std::fs::read_to_string(&shared) else {
        return;
    };
    assert!(
        given == spec(),
        "SPEC.md differs from ../shared/SPEC.md: copy it over (cp ../shared/SPEC.md SPEC.md)"
    );
}
