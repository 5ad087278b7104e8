//! Terminal scans: any bytes, in all three views, without a panic or unbounded work.
//! The check itself is `vigil::fuzzing::terminal`, which the tests replay on every saved input.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vigil::fuzzing::terminal(data));
