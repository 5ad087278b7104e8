//! The state files vigil reads back: loop state, marker payloads and handoff records. Any
//! bytes are refused or give a value that validates (or is refused by validation), never a
//! panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(state) = serde_json::from_slice::<vigil::state::loop_state::LoopState>(data) {
        let _ = state.promise();
    }
    let _ = serde_json::from_slice::<vigil::evidence::payload::Payload>(data);
    if let Ok(record) = serde_json::from_slice::<vigil::handoff::Record>(data) {
        let _ = record.validate();
        let _ = vigil::handoff::age_secs(&record);
    }
});
