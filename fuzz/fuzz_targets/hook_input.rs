//! Hook input as every binary reads it: any bytes give a typed input or an error, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(input) = vigil::cli::hook::HookInput::parse(data) {
        let _ = input.event();
    }
});
