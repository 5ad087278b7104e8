//! marker-writer: the protected writer (SPEC §5). It records what happened to exactly which
//! content, and verifies such records fail-closed.

#![no_main]

use std::ffi::OsString;

use vigil::Exit;
use vigil::cli::flags;
use vigil::cli::flags::help;
use vigil::cli::output::diagnostic;
use vigil::evidence::writer::Invocation;
use vigil::exit::Code as ExitCode;

const NAME: &str = "marker-writer";

const HELP: &str = "\
marker-writer: content-bound markers from a protected writer, verified fail-closed.

Usage:
  marker-writer run    --check NAME [--subject S] [--timeout SECS] [--snapshot [--keep-env NAME]...]
                       [--publish] -- CMD ARGS...
  marker-writer write  --check NAME --status STATUS [--subject S] [--note TEXT]
                       [--command CMD] [--publish]
  marker-writer verify --check NAME [--subject S] [--max-age DURATION] [--command CMD]
  marker-writer show   --check NAME [--subject S] [--all]
  marker-writer sync   [--remote NAME|URL] [--push] [--check NAME]... [--timeout SECS]
                       [--max-fetch SIZE]
  marker-writer keygen --out DIR
  marker-writer trust  KEYFILE [--global]

A marker records that a check (tests, lint, review...) ended with a status (passed, failed,
blocked, aborted) for exactly one content, named by its hash. It lives in the project's
protected state, outside the project (markers/NAME/ under $VIGIL_STATE_HOME, else
~/.local/state/vigil, projects/<name>-<hash>/): the payload KEY.json, then the empty gate file
KEY.ok, each written atomically. .vigil/markers/ is no longer read. Run it from a process the
agent cannot alter: a CI job, a git hook, a human; inside the agent's sandbox, where the state
home is read-only, run and write refuse at once.

run      runs CMD (its output passes through unchanged), records passed on exit 0, failed on
         another code, aborted on a signal or --timeout, and exits with the command's code
         (124 on a timeout, 128+N on signal N). In place, the worktree is hashed before and
         after, and a change between is recorded aborted: for writers the agent cannot reach
         (CI). With --snapshot, CMD runs in a private copy of exactly the hashed files, with a
         clean environment: for a writer on the agent's machine
write    records a status given by hand
verify   exits 0 only for a passed marker of exactly this content, younger than --max-age,
         local or published as a git note and synced (and with --command, written by that
         command); otherwise 1 with one line: missing, subject mismatch, malformed, status S,
         stale, bad signature, or command mismatch
show     prints the payload of the marker for this content; --all lists every marker for it,
         local and from notes, newest first, with the first reason each would be denied, and
         when none is for this content, which paths differ from the nearest published one
sync     fetches the notes published on a remote (refs/notes/vigil/*) into vigil's own
         repository in the protected state, merges them with those published here, and writes
         them out for the gates; --push also pushes them, merging and retrying when another
         writer pushed first. Nothing on the Stop path touches the network: only sync does
keygen   makes an Ed25519 key pair: DIR/vigil-marker.key (0600, never overwritten; keep it
         where the agent cannot read it) and DIR/vigil-marker.pub (safe to commit)
trust    trusts a public key for this project's markers (--global: for every project), in the
         protected state outside the project; keys inside the project are never trusted

Options:
  --check NAME         the check: 1 to 64 of A-Z a-z 0-9 . _ -
  --subject S          worktree (default, in a git repository): the tree of the working tree,
                       untracked non-ignored files included; file:PATH: the file's sha256;
                       stdin: the sha256 of standard input
  --status STATUS      write: passed, failed, blocked or aborted
  --note TEXT          write: a note kept in the payload
  --command CMD        write: the command this status is for, which the writer did not run
                       itself (a CI job's), recorded and signed with the payload; verify: the
                       marker must record CMD (the same shell words, bare or as sh -c '...'),
                       as stop-gate --require-marker CHECK=CMD asks
  --timeout SECS       run: kill the command's whole process group after SECS
  --snapshot           run: run CMD in a private copy of exactly the hashed content (under the
                       state home), with only PATH HOME USER LOGNAME SHELL TERM LANG LC_* TZ
                       of the environment, confined (bubblewrap): it writes only the copy and
                       a private /tmp, sees no state home, signing key, ~/.claude, ~/.codex
                       or ~/.ssh, no network, and cannot signal the writer; the payload
                       records isolation: snapshot and confinement: bubblewrap (none where no
                       confinement could be had, said on stderr). Without it the command
                       runs in place, unconfined (for CI)
  --keep-env NAME      run --snapshot, repeatable: also keep this variable (never VIGIL_*)
  --check-network      run --snapshot: the confined command may use the network
  --check-write DIR    run --snapshot, repeatable: the confined command may also write DIR
                       (an absolute path: a cache)
  --max-file-size SIZE worktree: a larger file denies at once (default 1G; bytes, or K M G T)
  --publish            run, write: also publish the payload as a git note for its content (a
                       worktree subject), to be pushed with `sync --push`
  --all                show: every marker for this content, local and from notes
  --remote NAME|URL    sync: a remote of this repository, or a URL (default origin)
  --push               sync: push the notes too
  --check NAME         sync, repeatable: take this check's notes first, whatever else the
                       remote holds (a sync takes at most 32 checks)
  --timeout SECS       sync: the deadline for all of it (default 30)
  --max-fetch SIZE     sync: refuse a remote whose notes take more (default 256M; bytes, or
                       K M G T)
  --global             trust: for every project, not only this one
  --max-age DURATION   verify: how old a marker may be (default 24h; 45s, 30m, 24h, 7d)
  --sign-key FILE      run, write: sign the payload with this secret key (or $VIGIL_SIGN_KEY)
  --verify-key FILE    verify: markers must be signed by this key (or $VIGIL_VERIFY_KEY), and
                       only by it; without it, by a key given to `marker-writer trust`; with
                       no trusted key, unsigned markers count; with one, an unsigned or
                       altered marker is `bad signature`
  --out DIR            keygen: where the key pair goes
  --state-dir DIR      where state lives (default <project>/.vigil, or $VIGIL_STATE_DIR)
  -h, --help           this text
";

vigil::entry!(real_main);

fn real_main() -> ExitCode {
    if flags::start(NAME) {
        return ExitCode::SUCCESS;
    }
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let done = Invocation::parse(args).and_then(|command| match command {
        Some(command) => command.execute(),
        None => help(HELP).map(Exit::code),
    });
    match done {
        Ok(exit) => ExitCode::from(exit),
        Err(err) => {
            diagnostic(NAME, &err.to_string());
            err.exit().into()
        }
    }
}
