//! session-start-loader: tell a new session what the last ones left (SPEC §7). Fails open:
//! on any problem it prints nothing, exits 0, and says why in one line on stderr.

#![no_main]

vigil::entry!(run);

fn run() -> vigil::exit::Code {
    vigil::cmd::session_start_loader::main()
}
