//! Load (issue 16): the handoff where its time goes, against SessionEnd's budget. A repository
//! of 100,000 files, and a disk busy writing back a large file. The binaries are the release
//! build (profile `dist`, release's code generation), the one the release suite packages and
//! installs (`support::release`, built once for both): the budget is the released build's.
//! install.sh's static link starts a hook 0.3 ms sooner, nothing at this scale. A test binary
//! of its own, so that its load never slows another test.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "../support/mod.rs"]
mod support;

use support::{git, isolated, ok, skip};

/// A release binary, run in `dir` with the tests' clean environment and state home.
fn vigil(binary: &str, dir: &Path) -> Command {
    let mut cmd = Command::new(support::release::built().join(binary));
    isolated(&mut cmd).current_dir(dir);
    cmd
}

/// A committed repository of `dirs` × 100 small files with a passed marker for it.
fn repository(dirs: usize) -> tempfile::TempDir {
    let repo = tempfile::tempdir().unwrap();
    for d in 0..dirs {
        let dir = repo.path().join(format!("d{d}"));
        std::fs::create_dir(&dir).unwrap();
        for f in 0..100 {
            std::fs::write(dir.join(format!("f{f}.txt")), format!("{d}/{f}\n")).unwrap();
        }
    }
    git(repo.path(), &["init", "-q", "-b", "main"]);
    git(repo.path(), &["add", "-A"]);
    git(repo.path(), &["commit", "-qm", "files"]);
    ok(vigil("marker-writer", repo.path())
        .args(["run", "--check", "tests", "--", "true"])
        .output()
        .unwrap());
    // The files just made are still being written back for half a minute, which takes both
    // cores from the walk (its stat calls wait for nothing, but the writeback's CPU is the
    // same two cores): settled first, so that each test measures only the load it makes.
    // SAFETY: sync takes no arguments and cannot fail.
    unsafe { libc::sync() };
    repo
}

/// One SessionEnd: how long it took, and the record it left.
fn handoff(dir: &Path) -> (Duration, Value) {
    let mut child = vigil("session-end-handoff", dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let payload = json!({"session_id": "ending", "cwd": dir, "hook_event_name": "SessionEnd", "reason": "exit"});
    let started = Instant::now();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(payload.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let took = started.elapsed();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let record =
        serde_json::from_slice(&std::fs::read(dir.join(".vigil/handoff/final.json")).unwrap())
            .unwrap();
    (took, record)
}

/// The facts a handoff owes the next session, all known: the tree dirty with exactly the
/// change made, and the marker no longer for it.
fn assert_facts(record: &Value) {
    assert_eq!(record["git"]["dirty"], true, "{record}");
    assert_eq!(
        record["git"]["changed_files"],
        json!(["d1/f1.txt"]),
        "{record}"
    );
    assert_eq!(record["markers"][0]["matches_worktree"], false, "{record}");
}

/// The two loads in a fixed order, one after the other: the writeback test leaves the disk
/// discarding gigabytes, which would slow the walk of 100,000 files that came after it.
#[test]
fn the_handoff_keeps_its_budget_where_the_time_goes() {
    at_100000_files_the_handoff_keeps_every_git_fact_within_its_deadline();
    a_disk_writing_back_a_large_file_does_not_hold_the_handoff_past_a_second();
}

fn at_100000_files_the_handoff_keeps_every_git_fact_within_its_deadline() {
    let repo = repository(1000);
    std::fs::write(repo.path().join("d1/f1.txt"), "changed\n").unwrap();
    // The deadline cuts what is not known by 290 ms: a fact present is a fact found in time.
    // Stat-ing 100,000 files is most of that on a 2-core machine (git status takes 220 ms
    // here), so a run may now and then lose its facts to a busy moment: after two runs that
    // warm the caches, four of five must keep every fact. Before the walk by stat
    // (git status beside a hash of every file) none did. Each run's time is printed; the
    // benchmark (bench/run.sh) is where the time is measured.
    handoff(repo.path());
    handoff(repo.path());
    let runs: Vec<(Duration, Value)> = (0..5).map(|_| handoff(repo.path())).collect();
    let times: Vec<Duration> = runs.iter().map(|(took, _)| *took).collect();
    eprintln!("handoffs at 100,000 files: {times:?}");
    // The floor: git status on the same tree. Where it alone takes more than 80% of the
    // handoff's 290 ms (it took 220 ms, 76%, where the rest was measured), the walk and the
    // handoff's other work (the marker's subject, the transcript) cannot all fit; there, what
    // is held is that each run keeps its deadline and that a fact present is right (never a
    // tree called clean, nor a marker said to match).
    let mut floor: Vec<Duration> = (0..3)
        .map(|_| {
            let start = Instant::now();
            let out = Command::new("git")
                .args(["status", "--porcelain"])
                .current_dir(repo.path())
                .output()
                .unwrap();
            assert!(out.status.success());
            start.elapsed()
        })
        .collect();
    floor.sort();
    eprintln!("git status at 100,000 files: {floor:?}");
    if floor[1] > Duration::from_millis(232) {
        for (_, record) in &runs {
            assert_ne!(record["git"]["dirty"], false, "{record}");
            assert_ne!(record["markers"][0]["matches_worktree"], true, "{record}");
        }
        assert!(
            times.iter().all(|t| *t < Duration::from_millis(600)),
            "{times:?}"
        );
        eprintln!("git status itself is past the deadline here: only the deadline is held");
        return;
    }
    let whole: Vec<&Value> = runs
        .iter()
        .map(|(_, record)| record)
        .filter(|record| {
            record["git"]["dirty"] == true
                && record["git"]["changed_files"] == json!(["d1/f1.txt"])
                && record["markers"][0]["matches_worktree"] == false
        })
        .collect();
    assert!(
        whole.len() >= 4,
        "{} of 5 runs kept every fact ({times:?}): {}",
        whole.len(),
        runs[0].1
    );
    assert!(
        times.iter().all(|t| *t < Duration::from_millis(600)),
        "{times:?}"
    );
}

fn meminfo_mb(key: &str) -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches(" kB").parse::<u64>().ok())
        .unwrap()
        / 1024
}

fn free_bytes(dir: &Path) -> u64 {
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: a NUL-terminated path and room for the answer, read only on success.
    assert_eq!(
        unsafe { libc::statvfs(path.as_ptr(), stat.as_mut_ptr()) },
        0
    );
    // SAFETY: statvfs filled it.
    let stat = unsafe { stat.assume_init() };
    stat.f_bavail * stat.f_frsize
}

fn a_disk_writing_back_a_large_file_does_not_hold_the_handoff_past_a_second() {
    let repo = repository(10);
    std::fs::write(repo.path().join("d1/f1.txt"), "changed\n").unwrap();
    handoff(repo.path());
    // A large file on the same disk as the project, written, then its writeback started and
    // waited for on a thread while the handoff runs. The file is sized to the disk: a virtual
    // disk's cache can swallow a few GB in well under a second, so while its writeback takes
    // less than 300 ms (the handoff's whole budget) the test goes on with a file twice as
    // large.
    let scratch = tempfile::tempdir_in(repo.path().parent().unwrap()).unwrap();
    let most = (free_bytes(scratch.path()) / 4).min(4 << 30);
    let big = scratch.path().join("big.bin");
    let chunk: Vec<u8> = (0..1u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let mut size: u64 = 1 << 30;
    loop {
        if size > most {
            // A disk (or tmpfs) this fast cannot be made busy for the handoff's budget with
            // what may be written here: the condition cannot be made, so nothing is proved.
            skip(&format!(
                "the disk wrote back {} MB in under 300 ms: it cannot be made busy",
                size >> 21
            ));
            return;
        }
        let mut file = std::fs::File::create(&big).unwrap();
        for _ in 0..size >> 20 {
            file.write_all(&chunk).unwrap();
        }
        let syncing = std::thread::spawn(move || {
            let started = Instant::now();
            file.sync_data().unwrap();
            started.elapsed()
        });
        std::thread::sleep(Duration::from_millis(20));
        let writing = meminfo_mb("Writeback");
        let (took, record) = handoff(repo.path());
        let busy = !syncing.is_finished();
        let synced = syncing.join().unwrap();
        std::fs::remove_file(&big).unwrap();
        eprintln!(
            "{} MB file, written back in {synced:?} ({writing} MB under writeback as the handoff began): the handoff took {took:?}",
            size >> 20
        );
        if synced < Duration::from_millis(300) || writing < 64 {
            size *= 2;
            continue;
        }
        assert!(
            busy,
            "the handoff ended only after the disk's writeback ({synced:?}) did: it waited for the disk"
        );
        // The handoff never syncs, and frees no block (a rename over its last record did, and
        // on a disk mounted with `discard` freeing a block waits for a discard queued behind
        // this writeback: the handoff took 2.2 s of a 2.26 s writeback on a slow virtual disk). What the writeback
        // still costs it is the stalls of its own exec and reads behind it, within the 1 s
        // the issue set.
        assert!(took < Duration::from_secs(1), "{took:?}");
        assert_facts(&record);
        break;
    }
}
