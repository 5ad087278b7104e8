//! SPEC §5 and §9, a sync's bounds: past what one answer of git holds every note is read, past
//! the most kept the newest are kept and said, a fetch over its cap or a flood of notes, checks
//! or blobs fills nothing, and checks sorting first leave yours out only until named.

use std::path::{Path, PathBuf};

use super::{
    World, agent_adds_note_bytes, agent_pushes_notes, agent_pushes_tree, agent_takes_remote_notes,
    ci_publishes, find_dir_named, git_with_stdin, laptop_holding_cis_note, laptop_stop, mktree,
    push, sync,
};
use crate::support::*;

/// Notes that add up to more than one read of git's takes (here 12 of nearly 1 MiB, after
/// CI's, in four reads of 4 MiB): every one is read, CI's included, or none is.
#[test]
fn notes_past_what_one_answer_of_git_holds_are_all_read() {
    let (world, laptop, tree) = laptop_holding_cis_note();
    let tree = tree.as_str();
    let padding = format!("{{\"pad\":\"{}\"}}\n", "x".repeat(1_000_000));
    let mut added = 0;
    for i in 0.. {
        let file = laptop.join(".git/probe");
        std::fs::write(&file, format!("filler {i}\n")).unwrap();
        let id = git(&laptop, &["hash-object", "-w", file.to_str().unwrap()]);
        if id.as_str() > tree {
            agent_adds_note_bytes(&laptop, "tests", &id, padding.as_bytes());
            added += 1;
            if added == 12 {
                break;
            }
        }
    }
    agent_pushes_notes(&laptop, "tests");
    let out = sync(&laptop);
    assert_stdout_contains(&out, "tests (13 contents)");
    world.stop_passes(&laptop);
}

/// `count` notes of `tests` on the remote, each the blob `blob`, for ids that sort before any
/// real one, in one commit.
fn old_notes_on_the_remote(world: &World, blob: &str, count: usize) {
    let listing: String = (1..=count)
        .map(|i| format!("100644 blob {blob}\t{i:040x}\n"))
        .collect();
    let tree = git_with_stdin(&world.remote, &["mktree"], listing.as_bytes());
    let commit = git(&world.remote, &["commit-tree", &tree, "-m", "old notes"]);
    git(
        &world.remote,
        &["update-ref", "refs/notes/vigil/tests", &commit],
    );
}

/// The remote's notes of `tests` moved to a commit of `tree` on top of them, as whoever has
/// push rights can.
fn remote_notes_become(world: &World, tree: &str, message: &str) {
    let notes = git(&world.remote, &["rev-parse", "refs/notes/vigil/tests"]);
    let commit = git(
        &world.remote,
        &["commit-tree", tree, "-p", &notes, "-m", message],
    );
    git(
        &world.remote,
        &["update-ref", "refs/notes/vigil/tests", &commit],
    );
}

/// More contents with notes than are kept: the newest are kept (CI's, published last, whose
/// tree id sorts after every older one here), and the sync says how many were left out.
#[test]
fn past_the_most_notes_kept_the_newest_are_kept_and_the_sync_says_so() {
    let world = World::new();
    // 5,000 old notes, for ids that sort before any real one, in one commit on the remote.
    let blob = git(&world.remote, &["hash-object", "-w", "--stdin"]);
    old_notes_on_the_remote(&world, &blob, 5000);
    let (_, laptop) = world.ci_vouched(true);
    let out = sync(&laptop);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_contains!(stderr, "905 older contents", "{}", said(&out));
    assert_contains!(stderr, "newest 4096", "{}", said(&out));
    world.stop_passes(&laptop);
}

/// A remote whose notes are more than `--max-fetch`: refused in one line, and nothing of them
/// is left in vigil's repository.
#[test]
fn a_remote_that_sends_more_than_max_fetch_is_refused_and_leaves_nothing() {
    let world = World::new();
    let (_, laptop) = world.ci_vouched(false);
    // 3 MiB that do not compress, in a note on the remote.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let noise: Vec<u8> = (0..3 << 20)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect();
    agent_takes_remote_notes(&laptop, "tests");
    let object = git(&laptop, &["rev-parse", "HEAD"]);
    agent_adds_note_bytes(&laptop, "tests", &object, &noise);
    agent_pushes_notes(&laptop, "tests");
    // The laptop's own state home, so that only its object store is looked at.
    let own = tempfile::tempdir().unwrap();
    let laptop_mw = |args: &[&str]| {
        marker_writer()
            .args(args)
            .current_dir(&laptop)
            .env("VIGIL_STATE_HOME", own.path())
            .output()
            .unwrap()
    };
    let out = laptop_mw(&["sync", "--max-fetch", "1M"]);
    usage_error(&out, "marker-writer");
    assert_stderr_contains(&out, "over 1 MiB (--max-fetch)");
    assert!(
        find_dir_named(own.path(), "notes.git").is_some(),
        "the fetch was made"
    );
    let leftovers = tmp_files_under(own.path());
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // With room enough, the same remote syncs.
    let out = ok(laptop_mw(&["sync"]));
    assert!(String::from_utf8_lossy(&out.stdout).contains("tests"));
}

/// Files named `tmp_*` under `dir` (what a cut-off fetch leaves in an object store).
fn tmp_files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(tmp_files_under(&path));
        } else if entry.file_name().to_string_lossy().starts_with("tmp_") {
            found.push(path);
        }
    }
    found
}

/// The agent empties the remote's notes of a check that has thousands (CI's among them): the
/// laptop keeps every one, put back in one go, fanned-out tree and all.
#[test]
fn a_remote_that_drops_thousands_of_notes_takes_none_from_the_laptop() {
    let world = World::new();
    let blob = git_with_stdin(
        &world.remote,
        &["hash-object", "-w", "--stdin"],
        b"an old payload\n",
    );
    old_notes_on_the_remote(&world, &blob, 3000);
    let (_, laptop) = world.ci_vouched(true);
    let out = sync(&laptop);
    assert_stdout_contains(&out, "tests (3001 contents)");
    // The agent's commit on top of the remote's notes: an empty tree.
    let empty = git_with_stdin(&world.remote, &["mktree"], b"");
    remote_notes_become(&world, &empty, "drop them all");
    let out = ok(push(&laptop));
    assert_stdout_contains(&out, "tests (3001 contents)");
    world.stop_passes(&laptop);
    let listed = git(&world.remote, &["notes", "--ref", "vigil/tests", "list"]);
    assert_eq!(listed.lines().count(), 3001, "pushed back whole");
}

/// A pack of a few KiB can name one 1 MiB blob from a hundred notes: written out, 100 MiB. A
/// check's notes over 16 MiB in all are not read: the sync says so, writes nothing of them,
/// and the notes synced before stay.
#[test]
fn notes_that_name_one_blob_a_hundred_times_are_not_written_out_a_hundred_times() {
    let world = World::new();
    let (_, laptop) = world.ci_vouched(true);
    sync(&laptop);
    let blob = git_with_stdin(
        &world.remote,
        &["hash-object", "-w", "--stdin"],
        &vec![b'A'; 1 << 20],
    );
    let notes = git(&world.remote, &["rev-parse", "refs/notes/vigil/tests"]);
    let mut listing = git(&world.remote, &["ls-tree", &notes]);
    listing.push('\n');
    for i in 1..=100u32 {
        listing.push_str(&format!("100644 blob {blob}\t{i:040x}\n"));
    }
    let tree = git_with_stdin(&world.remote, &["mktree"], listing.as_bytes());
    remote_notes_become(&world, &tree, "a hundred times");
    let out = sync(&laptop);
    assert_stderr_contains(&out, "over 16 MiB in all");
    let written = sizes_under(&protected_dir(&laptop).join("notes"));
    assert!(written < 1 << 20, "{written} bytes written out");
    world.stop_passes(&laptop);
}

fn sizes_under(dir: &Path) -> u64 {
    let mut total = 0;
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let meta = entry.metadata().unwrap();
            total += if meta.is_dir() {
                sizes_under(&entry.path())
            } else {
                meta.len()
            };
        }
    }
    total
}

/// In `clone`, a blob of 1 MiB and a tree that names it `times` times: (blob, tree).
fn one_mib_named(clone: &Path, times: u32) -> (String, String) {
    let mut big = vec![b'a'; (1 << 20) - 1];
    big.push(b'\n');
    let blob = git_with_stdin(clone, &["hash-object", "-w", "--stdin"], &big);
    let entries: Vec<String> = (1..=times)
        .map(|i| format!("100644 blob {blob}\t{i:040x}"))
        .collect();
    let tree = mktree(clone, &entries);
    (blob, tree)
}

/// One commit whose tree names one 1 MiB blob 64 times, under 40 check names: a push of well
/// under 1 MiB. The laptop writes no check's notes over 16 MiB in all, takes at most 32
/// checks, and says what it left out.
#[test]
fn one_small_push_under_many_check_names_does_not_fill_the_disk() {
    let world = World::new();
    let agent = world.clone("agent");
    let (blob, tree) = one_mib_named(&agent, 64);
    let commit = git(&agent, &["commit-tree", &tree, "-m", "flood"]);
    let small = mktree(&agent, &[format!("100644 blob {blob}\t{:040x}", 1)]);
    let one = git(&agent, &["commit-tree", &small, "-m", "one"]);
    for i in 0..40 {
        let named = if i < 8 { &commit } else { &one };
        git(
            &agent,
            &["update-ref", &format!("refs/notes/vigil/c{i:02}"), named],
        );
    }
    git(
        &agent,
        &words("push -q origin refs/notes/vigil/*:refs/notes/vigil/*"),
    );
    let laptop = world.clone("laptop");
    let out = ok(marker_writer_in(&laptop, &["sync", "--timeout", "120"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("over 16 MiB in all"), "{}", said(&out));
    assert_contains!(stderr, "8 more checks on the remote", "{}", said(&out));
    let written = sizes_under(&protected_dir(&laptop).join("notes"));
    assert!(written <= 24 << 20, "{written} bytes written out");
}

/// The agent pushes onto the remote's notes of `tests` a commit whose tree names one 1 MiB blob
/// 17 times. No sync can merge it (`over 16 MiB in all`), so CI's push would never
/// fast-forward: it replaces the remote's notes (only while they are what it fetched).
#[test]
fn notes_on_the_remote_over_the_total_do_not_stop_ci_publishing() {
    let world = World::new();
    let ci = world.ci_published();
    let agent = world.clone_with_notes("agent");
    let base = git(&agent, &["rev-parse", "refs/notes/vigil/tests"]);
    let (_, tree) = one_mib_named(&agent, 17);
    let commit = agent_pushes_tree(&agent, &tree, &base, "over");
    // CI tests new content and cannot publish it.
    std::fs::write(ci.join("lib.rs"), "pub fn answer() -> u32 { 43 }\n").unwrap();
    git(&ci, &["commit", "-qam", "next"]);
    let out = ci_publishes(&ci, "tests", Some(&world.secret()));
    assert_stderr_contains(&out, "a push replaces the remote's");
    assert_ne!(
        git(&world.remote, &["rev-parse", "refs/notes/vigil/tests"]),
        commit
    );
    world.clone_that_passes("laptop");
}

/// The agent pushes 32 tiny notes refs whose names sort before `tests`. A new laptop takes
/// those and says it left `tests` out (which only denies); `sync --check tests` takes it, and
/// later syncs keep it.
#[test]
fn checks_sorting_first_leave_yours_out_only_until_sync_check_names_it() {
    let world = World::new();
    world.ci_published();
    let agent = world.clone("agent");
    let tree = git_with_stdin(&agent, &["hash-object", "-w", "-t", "tree", "--stdin"], b"");
    let commit = git(&agent, &["commit-tree", &tree, "-m", "empty"]);
    for i in 0..32 {
        git(
            &agent,
            &["update-ref", &format!("refs/notes/vigil/a{i:02}"), &commit],
        );
    }
    git(
        &agent,
        &words("push -q origin refs/notes/vigil/a*:refs/notes/vigil/a*"),
    );
    let laptop = world.clone("laptop");
    let out = sync(&laptop);
    assert_stderr_contains(&out, "1 more checks on the remote (tests)");
    assert_stderr_contains(&out, "sync --check NAME");
    assert!(laptop_stop(&laptop, "tests", Some(&world.public())).is_some());
    ok(marker_writer_in(&laptop, &["sync", "--check", "tests"]));
    world.stop_passes(&laptop);
    world.syncs_and_passes(&laptop);
}
