//! promise-matcher: does this text declare completion, or only mention it? (SPEC §3)

#![no_main]

vigil::entry!(run);

fn run() -> vigil::exit::Code {
    vigil::cmd::promise_matcher::main()
}
