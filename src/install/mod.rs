//! Wiring vigil into Claude Code and Codex (SPEC §8, §9): merging hooks into settings
//! (`settings`) without losing the user's own, `--protect` (`protect`), code the engine runs
//! later (`planted`), Codex's hook trust (`codex`), git's exclude lines (`exclude`), the Stop
//! handler's flags as written (`gateflags`), and the doctor's lines (`finding`). The top layer.

pub mod codex;
pub(crate) mod exclude;
pub(crate) mod finding;
pub(crate) mod gateflags;
pub mod planted;
pub(crate) mod protect;
pub mod settings;
