//! SPEC §9, what the agent pushes over CI's notes with the user's rights: bytes that are not
//! UTF-8, junk, a deleted or cut note, decoy paths and refs: none takes CI's payload away from
//! the laptop, and none stops CI publishing.

use std::path::{Path, PathBuf};

use super::{
    World, agent_adds_note_bytes, agent_pushes_notes, agent_pushes_tree, agent_takes_remote_notes,
    ci_publishes, git_with_stdin, laptop_holding_cis_note, laptop_stop, mktree, push,
    remote_payloads, subject_of, sync, tree_of, unsigned_payload,
};
use crate::support::*;

/// A blob in `dir`'s repository whose id sorts before `than` (so its note is read first).
fn blob_sorting_before(dir: &Path, than: &str) -> String {
    for i in 0.. {
        let file = dir.join(".git/probe");
        std::fs::write(&file, format!("probe {i}\n")).unwrap();
        let id = git(dir, &["hash-object", "-w", file.to_str().unwrap()]);
        if id.as_str() < than {
            return id;
        }
    }
    unreachable!()
}

/// A note of bytes that are not UTF-8, read before CI's (its object sorts first), must not
/// shift where git's answer is cut and hide or replace CI's note.
#[test]
fn a_note_of_bytes_that_are_not_utf8_hides_no_other_note() {
    let (world, laptop, tree) = laptop_holding_cis_note();
    let tree = tree.as_str();
    let before = blob_sorting_before(&laptop, tree);
    let mut bytes = vec![0xff; 300];
    bytes.extend_from_slice(b"\n");
    agent_adds_note_bytes(&laptop, "tests", &before, &bytes);
    agent_pushes_notes(&laptop, "tests");
    world.syncs_and_passes(&laptop);
}

/// The agent, with push rights, removes CI's note from the remote (or rewrites it without CI's
/// line): the laptop that had it keeps it. A sync only ever adds.
#[test]
fn a_note_deleted_or_cut_on_the_remote_stays_on_the_laptop() {
    for how in ["removed", "rewritten"] {
        let world = World::new();
        let (_, laptop) = world.ci_vouched(true);
        world.syncs_and_passes(&laptop);
        let agent = world.clone_with_notes("agent");
        let subject = subject_of(&agent);
        let tree = subject.strip_prefix("git-tree:").unwrap();
        if how == "removed" {
            git(&agent, &["notes", "--ref", "vigil/tests", "remove", tree]);
        } else {
            agent_adds_note_bytes(
                &agent,
                "tests",
                tree,
                unsigned_payload("tests", &subject).as_bytes(),
            );
        }
        agent_pushes_notes(&agent, "tests");
        sync(&laptop);
        assert_eq!(
            laptop_stop(&laptop, "tests", Some(&world.public())),
            None,
            "{how}: CI's note was dropped"
        );
        // And pushed back: the remote has it again.
        ok(push(&laptop));
        let payloads = remote_payloads(&world, "tests", &subject);
        assert!(
            payloads.iter().any(|p| p.get("signature").is_some()),
            "{how}: {payloads:?}"
        );
    }
}

/// The agent pushes CI's note with more than 1 MiB of junk after it, as a fast-forward. The
/// laptop that had CI's payload keeps it, the note is rebuilt from what could be read and
/// pushed back, and a laptop that never had it then gets it; CI's next publish for that
/// content replaces an unreadable note rather than append to it.
#[test]
fn junk_pushed_over_cis_note_is_dropped_and_cis_payload_kept_everywhere() {
    let world = World::new();
    let (_, laptop) = world.ci_vouched(true);
    world.syncs_and_passes(&laptop);
    let agent = world.clone_with_notes("agent");
    let object = tree_of(&agent);
    let mut bytes = git(&agent, &["notes", "--ref", "vigil/tests", "show", &object]).into_bytes();
    bytes.push(b'\n');
    bytes.extend(std::iter::repeat_n(b'j', 1_100_000));
    bytes.push(b'\n');
    agent_adds_note_bytes(&agent, "tests", &object, &bytes);
    agent_pushes_notes(&agent, "tests");

    // The laptop keeps CI's payload, whatever junk came with it.
    world.syncs_and_passes(&laptop);
    ok(push(&laptop));
    world.clone_that_passes("fresh");

    // The junk again; this time CI publishes over it before any laptop mends it.
    agent_takes_remote_notes(&agent, "tests");
    agent_adds_note_bytes(&agent, "tests", &object, &bytes);
    agent_pushes_notes(&agent, "tests");
    let ci2 = world.clone_with_notes("ci2");
    ci_publishes(&ci2, "tests", Some(&world.secret()));
    world.clone_that_passes("again");
}

/// The agent makes the remote's notes ref of a check name a blob: every push of CI's would be
/// refused for good (`needs force`). The push replaces that ref, only while it still names
/// the blob that was fetched, and CI's verdict arrives.
#[test]
fn a_remote_notes_ref_made_a_blob_does_not_stop_ci_publishing() {
    let world = World::new();
    let blob = git(&world.remote, &["hash-object", "-w", "--stdin"]);
    git(
        &world.remote,
        &["update-ref", "refs/notes/vigil/tests", &blob],
    );
    world.ci_published();
    let kind = git(&world.remote, &["cat-file", "-t", "refs/notes/vigil/tests"]);
    assert_eq!(kind, "commit");
    world.clone_that_passes("laptop");
}

/// What an attack on CI's note of `tests` starts from: the laptop that synced it, the agent's
/// clone holding the remote's notes, their commit, and the object the note is for.
struct Attack {
    laptop: PathBuf,
    agent: PathBuf,
    base: String,
    object: String,
}

/// In a new world, CI publishes its signed verdict, a laptop syncs it and its Stop passes, and
/// the agent takes the remote's notes into a clone of its own, to build on them.
fn ci_vouched_and_the_agent_holds_the_notes() -> (World, Attack) {
    let world = World::new();
    world.ci_published();
    let laptop = world.clone_that_passes("laptop");
    let agent = world.clone_with_notes("agent");
    let base = git(&agent, &["rev-parse", "refs/notes/vigil/tests"]);
    let object = git(
        &agent,
        &["ls-tree", "--name-only", "refs/notes/vigil/tests"],
    );
    assert_eq!(object.len(), 40, "{object}");
    let attack = Attack {
        laptop,
        agent,
        base,
        object,
    };
    (world, attack)
}

/// The agent pushes `root` as the next notes of `tests`, as a fast-forward of `base`. The
/// laptop's Stop still passes after two syncs, and after its push a fresh clone's does too.
fn the_agent_pushes_and_cis_payload_stays(
    world: &World,
    attack: &Attack,
    root: &str,
    message: &str,
) {
    let (laptop, agent, base) = (&attack.laptop, &attack.agent, &attack.base);
    agent_pushes_tree(agent, root, base, message);
    for _ in 0..2 {
        sync(laptop);
        world.stop_passes(laptop);
    }
    ok(push(laptop));
    world.clone_that_passes("fresh");
}

/// The agent puts junk at the fanout path of CI's note (`8e/4d…`, which git notes reads) and
/// a decoy blob at `8e4/d…` (no note path), as a fast-forward. The laptop puts CI's line back
/// where git notes reads it, not at the decoy, and keeps it.
#[test]
fn a_decoy_path_beside_cis_note_does_not_take_the_put_back() {
    let (world, attack) = ci_vouched_and_the_agent_holds_the_notes();
    let (agent, object) = (&attack.agent, &attack.object);
    let junk = git_with_stdin(agent, &["hash-object", "-w", "--stdin"], b"{\"junk\":1}\n");
    let decoy = git_with_stdin(agent, &["hash-object", "-w", "--stdin"], b"decoy\n");
    let real = mktree(agent, &[format!("100644 blob {junk}\t{}", &object[2..])]);
    let other = mktree(agent, &[format!("100644 blob {decoy}\t{}", &object[3..])]);
    let root = mktree(
        agent,
        &[
            format!("040000 tree {real}\t{}", &object[..2]),
            format!("040000 tree {other}\t{}", &object[..3]),
        ],
    );
    the_agent_pushes_and_cis_payload_stays(&world, &attack, &root, "cut");
}

/// The agent deletes the remote's `refs/notes/vigil/tests` and makes `refs/notes/vigil/tests/x`:
/// every push of `tests` would be refused (a ref cannot be a file and a directory). The push
/// deletes what is below the check's name (only while it names what was fetched), and CI's
/// verdict arrives.
#[test]
fn a_remote_ref_below_a_checks_name_does_not_stop_ci_publishing() {
    ci_publishes_past_a_ref("refs/notes/vigil/tests/x");
}

/// The agent makes a ref `refs/notes/vigil` itself on the remote. No fetch of
/// `refs/notes/vigil/*` sees it, and every push of a check would be refused (a ref cannot be
/// a file and a directory): the push finds it and deletes it (only while it names what it
/// saw), and CI's verdict arrives.
#[test]
fn a_ref_where_the_checks_directory_is_does_not_stop_ci_publishing() {
    ci_publishes_past_a_ref("refs/notes/vigil");
}

/// The agent makes the ref `name` on the remote, at `main`: CI publishes all the same, the
/// remote then holds the notes of `tests` alone, and a laptop that syncs passes.
fn ci_publishes_past_a_ref(name: &str) {
    let world = World::new();
    let head = git(&world.remote, &["rev-parse", "main"]);
    git(&world.remote, &["update-ref", name, &head]);
    world.ci_published();
    assert_eq!(world.remote_refs(), vec!["refs/notes/vigil/tests"]);
    world.clone_that_passes("laptop");
}

/// The agent deletes CI's note on the remote and puts junk over 1 MiB at the same object's id
/// in capitals (`8E4D…`), which git notes reads as the note of that object. The laptop's
/// put-back takes the capitals away too: it keeps CI's payload, and after its push a fresh
/// clone gets it.
#[test]
fn a_decoy_in_capitals_does_not_take_cis_payload() {
    let (world, attack) = ci_vouched_and_the_agent_holds_the_notes();
    let (agent, object) = (&attack.agent, &attack.object);
    let mut big = vec![b'a'; 2 << 20];
    big.push(b'\n');
    let junk = git_with_stdin(agent, &["hash-object", "-w", "--stdin"], &big);
    let root = mktree(
        agent,
        &[format!("100644 blob {junk}\t{}", object.to_uppercase())],
    );
    the_agent_pushes_and_cis_payload_stays(&world, &attack, &root, "caps");
}
