//! The state files vigil reads back: loop state, marker payloads and handoff records. Any
//! bytes are refused or give a value that validates (or is refused by validation), never a
//! panic.
//! The check itself is `vigil::fuzzing::records`, which the tests replay on every saved input.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vigil::fuzzing::records(data));
