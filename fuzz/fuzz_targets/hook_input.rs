//! Hook input as every binary reads it: any bytes give a typed input or an error, never a panic.
//! The check itself is `vigil::fuzzing::hook_input`, which the tests replay on every saved input.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vigil::fuzzing::hook_input(data));
