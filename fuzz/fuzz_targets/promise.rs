//! The declaration rules and defang: any promise and text get a verdict, and defanged text
//! never declares (SPEC §3: text handed on cannot declare on the agent's behalf).
//! The check itself is `vigil::fuzzing::promise`, which the tests replay on every saved input.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vigil::fuzzing::promise(data));
