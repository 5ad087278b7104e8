//! stop-gate: the Stop hook (SPEC §4), and `stop-gate loop` to start, inspect and cancel a
//! Ralph loop.

#![no_main]

vigil::entry!(run);

fn run() -> vigil::exit::Code {
    vigil::cmd::stop_gate::main()
}
