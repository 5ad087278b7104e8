//! marker-writer: the protected writer (SPEC §5). It records what happened to exactly which
//! content, and verifies such records fail-closed.

#![no_main]

vigil::entry!(run);

fn run() -> vigil::exit::Code {
    vigil::cmd::marker_writer::main()
}
