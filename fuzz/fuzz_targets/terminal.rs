//! Terminal scans: any bytes, in all three views, without a panic or unbounded work.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = vigil::verdict::terminal::scan(data, "VIGIL-DONE-0123", 80, true);
});
