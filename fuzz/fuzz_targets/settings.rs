//! settings-merge's parser: any bytes are refused or parsed, and what parses renders to a file
//! that parses back to the same settings (the installer never writes what it cannot read).
//! The check itself is `vigil::fuzzing::settings`, which the tests replay on every saved input.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vigil::fuzzing::settings(data));
