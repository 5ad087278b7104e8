//! What each fuzz target (`fuzz/fuzz_targets/`) checks, by name: the targets call these, and
//! `tests/integration/fuzz_regressions.rs` replays every input a run found
//! (`fuzz/regressions/<target>/`) through the same function under plain `cargo test` (issue 44).
//! Each panics where its rule breaks.

/// The targets, by the names of their binaries.
pub const TARGETS: [&str; 5] = ["hook_input", "promise", "records", "settings", "terminal"];

/// Runs target `name` on `data`; false for a name that is none of [`TARGETS`].
pub fn run(name: &str, data: &[u8]) -> bool {
    match name {
        "hook_input" => hook_input(data),
        "promise" => promise(data),
        "records" => records(data),
        "settings" => settings(data),
        "terminal" => terminal(data),
        _ => return false,
    }
    true
}

/// Hook input as every binary reads it: any bytes give a typed input or an error, never a panic.
pub fn hook_input(data: &[u8]) {
    if let Ok(input) = crate::cli::hook::HookInput::parse(data) {
        let _ = input.event();
    }
}

/// The declaration rules and defang: any promise and text get a verdict, and defanged text
/// never declares (SPEC §3: text handed on cannot declare on the agent's behalf).
pub fn promise(data: &[u8]) {
    use crate::verdict::promise::{Promise, Verdict, assess};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (promise, text) = text.split_once('\u{0}').unwrap_or(("DONE", text));
    let Ok(promise) = Promise::new(promise) else {
        return;
    };
    let _ = assess(text, &promise);
    let defanged = crate::verdict::defang::defang(text);
    assert_ne!(
        assess(&defanged, &promise).verdict,
        Verdict::Declared,
        "defanged text declared: {defanged:?}"
    );
}

/// The state files vigil reads back: loop state, marker payloads and handoff records. Any bytes
/// are refused or give a value that validates (or is refused by validation), never a panic.
pub fn records(data: &[u8]) {
    if let Ok(state) = serde_json::from_slice::<crate::state::loop_state::LoopState>(data) {
        let _ = state.promise();
    }
    let _ = serde_json::from_slice::<crate::evidence::payload::Payload>(data);
    if let Ok(record) = serde_json::from_slice::<crate::handoff::Record>(data) {
        let _ = record.validate();
        let _ = crate::handoff::age_secs(&record);
    }
}

/// settings-merge's parser: any bytes are refused or parsed, and what parses renders to a file
/// that parses back to the same settings (the installer never writes what it cannot read).
pub fn settings(data: &[u8]) {
    let path = std::path::Path::new("settings.json");
    if let Ok(root) = crate::install::settings::parse(data, path) {
        let rendered = crate::install::settings::render(&root);
        let again =
            crate::install::settings::parse(&rendered, path).expect("a rendered file parses");
        assert_eq!(again, root, "render then parse is the identity");
    }
}

/// Terminal scans: any bytes, in all three views, without a panic or unbounded work.
pub fn terminal(data: &[u8]) {
    let _ = crate::verdict::terminal::scan(data, "VIGIL-DONE-0123", 80, true);
}
