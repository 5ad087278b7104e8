//! SPEC §6 and §9, what only informs: the handoff's view of the working tree by the index's
//! stat data (issue 16): the paths it names are those `git status` names, a racy entry is read
//! rather than believed, a forged index fools only what informs (and the next session is told
//! "by stat, not verified"), and the record is written before git answers.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::*;

/// The SessionEnd of session s-1: the record it left.
fn end(dir: &Path) -> Value {
    let payload =
        json!({"session_id": "s-1", "cwd": dir, "hook_event_name": "SessionEnd", "reason": "exit"});
    ok(session_end(dir, &[], payload.to_string()));
    handoff_record(dir, "final.json")
}

fn changed(record: &Value) -> Vec<String> {
    let mut files: Vec<String> = record["git"]["changed_files"]
        .as_array()
        .unwrap_or_else(|| panic!("no changed files in {record}"))
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect();
    files.sort();
    files
}

/// The paths `git status` names, every untracked file listed, vigil's own state left out.
fn git_status_paths(dir: &Path) -> Vec<String> {
    let text = git_output(
        dir,
        &["status", "--porcelain=v1", "-z", "-uall", "--no-renames"],
    );
    let mut paths: Vec<String> = String::from_utf8(text.stdout)
        .unwrap()
        .split('\0')
        .filter(|e| e.len() > 3)
        .map(|e| e[3..].to_string())
        .filter(|p| !p.starts_with(".vigil/"))
        .collect();
    paths.sort();
    paths
}

fn touch_back(path: &Path) {
    let out = std::process::Command::new("touch")
        .args(["-d", "1 hour ago"])
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success());
}

#[test]
fn the_trees_changes_by_stat_are_the_paths_git_status_names() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    git(dir, &["init", "-q", "-b", "main"]);
    for (path, content) in [
        ("same_size.txt", "aaaa\n"),
        ("grown.txt", "short\n"),
        ("gone.txt", "gone\n"),
        ("kept.txt", "kept\n"),
        ("script.sh", "echo hi\n"),
        ("dir/staged_then_undone.txt", "one\n"),
        ("ignored/tracked.txt", "tracked though ignored\n"),
        (".gitignore", "ignored/\n*.log\n"),
    ] {
        write_file(&dir.join(path), content);
    }
    std::os::unix::fs::symlink("kept.txt", dir.join("link")).unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["add", "-f", "ignored/tracked.txt"]);
    git(dir, &["commit", "-qm", "init"]);
    // Every kind of change git tells.
    write_file(&dir.join("same_size.txt"), "bbbb\n");
    write_file(&dir.join("grown.txt"), "much longer now\n");
    std::fs::remove_file(dir.join("gone.txt")).unwrap();
    let script = dir.join("script.sh");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    write_file(&dir.join("dir/staged_then_undone.txt"), "two\n");
    git(dir, &["add", "dir/staged_then_undone.txt"]);
    write_file(&dir.join("dir/staged_then_undone.txt"), "one\n");
    write_file(
        &dir.join("ignored/tracked.txt"),
        "changed inside an ignored directory\n",
    );
    write_file(&dir.join("new/untracked.txt"), "new\n");
    write_file(&dir.join("staged_new.txt"), "added\n");
    git(dir, &["add", "staged_new.txt"]);
    write_file(&dir.join("noise.log"), "ignored, never named\n");
    std::fs::remove_file(dir.join("link")).unwrap();
    std::os::unix::fs::symlink("grown.txt", dir.join("link")).unwrap();

    let expected = git_status_paths(dir);
    assert_eq!(
        expected,
        [
            "dir/staged_then_undone.txt",
            "gone.txt",
            "grown.txt",
            "ignored/tracked.txt",
            "link",
            "new/untracked.txt",
            "same_size.txt",
            "script.sh",
            "staged_new.txt",
        ]
    );
    let record = end(dir);
    assert_eq!(record["git"]["dirty"], true);
    assert_eq!(changed(&record), expected);

    // Committed, the same walk finds the tree clean (vigil's own state never counts).
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "all"]);
    let record = end(dir);
    assert_eq!(record["git"]["dirty"], false, "{record}");
    assert_eq!(changed(&record), Vec::<String>::new());
}

/// Rewrites the index entry of `path` to the file's stat data as it is now, keeping the blob
/// id the index held: what an agent does to make git believe a changed file unchanged.
fn forge_stat(dir: &Path, path: &str) -> gix_index::entry::Stat {
    forge_index_stat(dir, path, "aaaa\n".len())
}

/// [`one_file_repo`] with a marker for its content ([`mark`]).
fn marked_repo() -> Project {
    let repo = one_file_repo();
    mark(repo.path());
    repo
}

fn one_file_repo() -> Project {
    Project::builder().file("f.txt", "aaaa\n").git().build()
}

/// A passed `tests` marker for the tree as it is.
fn mark(dir: &Path) {
    ok(marker_writer_in(
        dir,
        &["run", "--check", "tests", "--", "true"],
    ));
}

#[test]
fn a_racy_entry_is_read_not_believed() {
    let dir = one_file_repo();
    let dir = dir.path();
    write_file(&dir.join("f.txt"), "bbbb\n");
    let stat = forge_stat(dir, "f.txt");
    // The index written no later than the file changed: its stat data cannot tell a change
    // made in the same instant, so git reads the file, and so must the walk.
    let when = filetime::FileTime::from_unix_time(i64::from(stat.mtime.secs), stat.mtime.nsecs);
    filetime::set_file_mtime(dir.join(".git/index"), when).unwrap();
    let record = end(dir);
    assert_eq!(record["git"]["dirty"], true, "{record}");
    assert_eq!(changed(&record), ["f.txt"]);
}

#[test]
fn a_forged_index_fools_only_what_informs_and_the_next_session_is_told_so() {
    let repo = marked_repo();
    let dir = repo.path();
    // The agent breaks the file, dates it back and forges the index entry to match it.
    write_file(&dir.join("f.txt"), "bbbb\n");
    touch_back(&dir.join("f.txt"));
    forge_stat(dir, "f.txt");
    // git sees nothing: the marker is in the protected state, the index forged.
    assert_eq!(git(dir, &["status", "--porcelain"]), "");
    let record = end(dir);
    // What only informs believes the stat data, as git status does...
    assert_eq!(record["git"]["dirty"], false, "{record}");
    assert_eq!(record["markers"][0]["matches_worktree"], true, "{record}");
    let out = session_start_loader()
        .current_dir(dir)
        .write_stdin(json!({"session_id": "s-2", "cwd": dir, "source": "startup"}).to_string())
        .output()
        .unwrap();
    let told = String::from_utf8_lossy(&out.stdout);
    assert!(told.contains("clean (by stat, not verified)"), "{told}");
    assert_contains!(
        told,
        "matched the working tree when recorded, by stat, not verified"
    );
    // ...and the gate, which hashes every file, is not fooled.
    let verify = marker_writer_in(dir, &["verify", "--check", "tests"]);
    assert_eq!(verify.status.code(), Some(1));
    let line = assert_one_line_error(&verify, "marker-writer");
    assert!(line.contains("subject mismatch"), "{line}");
}

/// The repository's configuration is the agent's: a clean filter it names runs for any git
/// command that reads working files (`git status` did, as the handoff's fallback), as the
/// user, outside the sandbox. The agent makes the walk fail on purpose (a gitlink) so that a
/// fallback would run: none does, and the dirty state is left unknown.
#[test]
fn no_filter_the_repository_names_runs_even_when_the_walk_cannot_read_the_tree() {
    let dir = one_file_repo();
    let dir = dir.path();
    let ran = dir.join("filter-ran");
    git(
        dir,
        &[
            "config",
            "filter.x.clean",
            &format!("sh -c 'echo ran >> {}; cat'", ran.display()),
        ],
    );
    write_file(&dir.join(".gitattributes"), "* filter=x\n");
    let head = git(dir, &["rev-parse", "HEAD"]);
    git(
        dir,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{head},sub"),
        ],
    );
    // Same bytes, another time: git must read the file, through the filter, to compare it.
    touch_back(&dir.join("f.txt"));
    std::fs::remove_file(&ran).ok();
    let record = end(dir);
    assert!(!ran.exists(), "the repository's filter ran: {record}");
    assert_eq!(record["git"]["dirty"], Value::Null, "{record}");
    assert!(record["git"]["head"].is_string(), "{record}");
}

#[test]
fn where_attributes_may_convert_content_the_markers_match_is_unknown() {
    let dir = one_file_repo();
    let dir = dir.path();
    write_file(&dir.join(".gitattributes"), "*.txt text eol=crlf\n");
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "attributes"]);
    mark(dir);
    let record = end(dir);
    // The index holds the blob after conversion: matched or not, by stat it cannot be told.
    assert_eq!(
        record["markers"][0]["matches_worktree"],
        Value::Null,
        "{record}"
    );
    assert_eq!(record["git"]["dirty"], false, "{record}");
}

/// SessionEnd of `dir` with an untracked file of 1000 MiB in it (`dataset.bin`), which must
/// take under a second: its record.
fn end_beside_a_huge_file(dir: &Path) -> Value {
    let huge = std::fs::File::create(dir.join("dataset.bin")).unwrap();
    huge.set_len(1000 << 20).unwrap();
    let started = Instant::now();
    let record = end(dir);
    assert_within(started, Duration::from_secs(1), "");
    record
}

/// A file far too large to hash in the budget, untracked: with no marker it is named changed
/// unread; with one, the walk that must hash it is not waited for past the deadline.
#[test]
fn a_huge_untracked_file_costs_the_handoff_nothing_past_its_deadline() {
    let dir = one_file_repo();
    let dir = dir.path();
    let record = end_beside_a_huge_file(dir);
    assert_eq!(changed(&record), ["dataset.bin"]);
    // Now with a marker, whose match needs the file hashed.
    std::fs::remove_file(dir.join("dataset.bin")).unwrap();
    mark(dir);
    let record = end_beside_a_huge_file(dir);
    assert_eq!(record["git"]["dirty"], Value::Null, "{record}");
    assert_eq!(
        record["markers"][0]["matches_worktree"],
        Value::Null,
        "{record}"
    );
}

#[test]
fn the_record_is_written_before_git_answers() {
    let dir = one_file_repo();
    let dir = dir.path();
    // A git that takes two seconds for anything.
    let (_bin, slow) = slow_git("2");
    let mut cmd = vigil_process("session-end-handoff");
    cmd.current_dir(dir)
        .env("VIGIL_TEST_GIT", &slow)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let started = Instant::now();
    let mut child = cmd.spawn().unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(
                json!({"session_id": "first", "cwd": dir, "hook_event_name": "SessionEnd", "reason": "exit"})
                    .to_string()
                    .as_bytes(),
            )
            .unwrap();
    }
    let path = dir.join(".vigil/handoff/final.json");
    // Git answers nothing for two seconds and the deadline is at 290 ms: the first record is
    // there long before either.
    let appeared = loop {
        if let Ok(bytes) = std::fs::read(&path)
            && let Ok(record) = serde_json::from_slice::<Value>(&bytes)
        {
            break (started.elapsed(), record);
        }
        assert_within(started, Duration::from_secs(2), "no record within 2 s");
        std::thread::sleep(Duration::from_millis(2));
    };
    let (when, first) = appeared;
    assert!(
        when < Duration::from_millis(150),
        "the first record came after {when:?}"
    );
    assert_eq!(first["session_id"], "first");
    assert_eq!(first["git"], Value::Null);
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

/// SPEC P6 lets a handoff skip the wait for the disk, and it must: while the disk writes back a
/// large file, one sync takes as long as that writeback (tests/load times it). No call of the
/// handoff, nor of the git it runs, waits for the disk.
#[test]
fn a_handoff_never_waits_for_the_disk() {
    let repo = marked_repo();
    let dir = repo.path();
    write_file(&dir.join("f.txt"), "changed\n");
    let payload =
        json!({"session_id": "s-1", "cwd": dir, "hook_event_name": "SessionEnd", "reason": "exit"});
    let Some((out, calls)) = traced(
        "session-end-handoff",
        dir,
        &payload,
        "fsync,fdatasync,sync_file_range,syncfs,sync,msync",
    ) else {
        return;
    };
    assert_exit(&out, 0);
    assert_eq!(calls.text.trim(), "", "the handoff waited for the disk");
    let record = handoff_record(dir, "final.json");
    assert_eq!(changed(&record), ["f.txt"]);
    assert_eq!(record["markers"][0]["matches_worktree"], false);
}
