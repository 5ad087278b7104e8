//! Issue 44 item 6: every input the fuzz targets keep (`fuzz/regressions/<target>/`: a crash a
//! run found, and seeds of the shapes that once broke a reader) is replayed through the same
//! check as the target's (`vigil::fuzzing`), under plain `cargo test`.

use std::path::Path;

#[test]
fn every_input_the_fuzz_targets_keep_is_replayed_through_their_checks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions");
    let mut replayed = 0;
    for target in vigil::fuzzing::TARGETS {
        let dir = root.join(target);
        let entries = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}: each target keeps its inputs", dir.display()));
        for entry in entries.flatten() {
            let bytes = std::fs::read(entry.path()).unwrap();
            let ran = std::panic::catch_unwind(|| vigil::fuzzing::run(target, &bytes));
            assert!(
                matches!(ran, Ok(true)),
                "{target} fails on {}",
                entry.path().display()
            );
            replayed += 1;
        }
    }
    assert!(replayed >= vigil::fuzzing::TARGETS.len(), "{replayed}");
    assert!(!vigil::fuzzing::run("no-such-target", b""));
}
