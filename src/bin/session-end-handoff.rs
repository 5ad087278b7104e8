//! session-end-handoff: what one session leaves for the next (SPEC §6). Fails open: any
//! problem is one line on stderr and exit 1, never a block.

#![no_main]

vigil::entry!(run);

fn run() -> vigil::exit::Code {
    vigil::cmd::session_end_handoff::main()
}
