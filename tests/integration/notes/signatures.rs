//! SPEC §5 and §9, what a sync brings is what anyone with push access wrote: a note counts only
//! when signed by a trusted key; every hostile note denies with its reason.

use std::path::Path;

use serde_json::{Value, json};

use super::{
    World, agent_adds_note_bytes, agent_pushes_notes, ci_publishes, laptop_stop, subject_of, sync,
    unsigned_payload,
};
use crate::support::*;

/// The agent on the laptop, with the user's push rights, writes its own note for the content
/// and pushes it, then lets the user's sync bring it in.
fn agent_pushes_a_note(laptop: &Path, check: &str, line: &str) {
    let tree = subject_of(laptop);
    let object = tree.strip_prefix("git-tree:").unwrap();
    agent_adds_note_bytes(laptop, check, object, line.as_bytes());
    agent_pushes_notes(laptop, check);
}

#[test]
fn a_note_the_laptop_writes_without_the_key_is_a_bad_signature() {
    let (world, laptop) = World::with_laptop();
    let subject = subject_of(&laptop);
    agent_pushes_a_note(&laptop, "tests", &unsigned_payload("tests", &subject));
    sync(&laptop);
    let reason = laptop_stop(&laptop, "tests", Some(&world.public())).unwrap();
    assert!(reason.contains("bad signature"), "{reason}");
    // A key pair the agent made itself signs nothing the pinned key accepts.
    let (own, _) = keygen_into(&laptop, &laptop.join("agent-keys"));
    let signed = ok(marker_writer_in(
        &laptop,
        &[
            "write",
            "--check",
            "tests",
            "--status",
            "passed",
            "--sign-key",
            own.to_str().unwrap(),
        ],
    ));
    drop(signed);
    let reason = laptop_stop(&laptop, "tests", Some(&world.public())).unwrap();
    assert!(reason.contains("bad signature"), "{reason}");
}

/// A note's text, made for the content it is attached to.
type NoteFor<'a> = dyn Fn(&str) -> String + 'a;

#[test]
fn hostile_notes_each_deny_with_their_reason_and_nothing_panics() {
    let huge = format!("{{\"pad\":\"{}\"}}", "x".repeat(2 << 20));
    let cases: [(&str, &NoteFor, &str); 4] = [
        ("malformed JSON", &|_| "{not json".to_string(), "malformed"),
        (
            "a payload for another check",
            &|subject| {
                let mut payload: Value =
                    serde_json::from_str(&unsigned_payload("tests", subject)).unwrap();
                payload["check"] = json!("lint");
                payload.to_string()
            },
            "malformed",
        ),
        (
            "a payload for another subject",
            &|_| unsigned_payload("tests", &format!("git-tree:{}", "ab".repeat(20))),
            "subject mismatch",
        ),
        ("a huge note", &|_| huge.clone(), "malformed"),
    ];
    for (what, line, expected) in cases {
        let (_world, laptop) = World::with_laptop();
        let subject = subject_of(&laptop);
        agent_pushes_a_note(&laptop, "tests", &line(&subject));
        let out = marker_writer_in(&laptop, &["sync"]);
        assert!(out.status.success(), "{what}: {}", said(&out));
        let reason = laptop_stop(&laptop, "tests", None).unwrap();
        assert!(reason.contains(expected), "{what}: {reason}");
        let verify = marker_writer_in(&laptop, &["verify", "--check", "tests"]);
        assert_eq!(verify.status.code(), Some(1), "{what}: {}", said(&verify));
        assert_one_line_error(&verify, "marker-writer");
    }

    // A good note first; then the remote's ref is made to name a blob: the sync says so in a
    // line, and the local notes stay as they were.
    let (world, laptop) = World::with_laptop();
    let good = world.clone("ci");
    ci_publishes(&good, "tests", Some(&world.secret()));
    world.syncs_and_passes(&laptop);
    let blob = git(&world.remote, &["hash-object", "-w", "--stdin"]);
    git(
        &world.remote,
        &["update-ref", "refs/notes/vigil/tests", &blob],
    );
    let out = sync(&laptop);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_contains!(
        stderr,
        "names a blob, not a history of notes",
        "{}",
        said(&out)
    );
    assert_eq!(
        laptop_stop(&laptop, "tests", Some(&world.public())),
        None,
        "the local notes stayed"
    );
    // A laptop that never had notes: the same ref denies as missing, and says nothing else.
    let fresh = world.clone("fresh");
    let out = sync(&fresh);
    assert!(String::from_utf8_lossy(&out.stderr).contains("names a blob"));
    let reason = laptop_stop(&fresh, "tests", None).unwrap();
    assert!(reason.contains("missing"), "{reason}");
}
