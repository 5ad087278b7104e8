//! What every binary shares at its door (SPEC §2): typed flag values, the input it reads (a
//! file, standard input, a hook's JSON), and how it writes to stdout and stderr. Above `sys`.

pub mod defs;
pub mod flags;
pub mod hook;
pub(crate) mod input;
pub(crate) mod loop_args;
pub(crate) mod output;
