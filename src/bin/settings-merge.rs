//! settings-merge: wire vigil's hooks into Claude Code settings or Codex hooks.json without
//! losing anything of the user's (SPEC §8).

#![no_main]

vigil::entry!(run);

fn run() -> vigil::exit::Code {
    vigil::cmd::settings_merge::main()
}
