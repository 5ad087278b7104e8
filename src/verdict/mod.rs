//! Text judged as text (SPEC §3): whether a message declares completion or only mentions it
//! (`promise`, with `markdown` deciding which lines are in play), terminal output seen three
//! ways (`terminal`), per-task tokens (`token`), and defanging what is handed on (`defang`).
//! Pure functions of their input; above `cli`.

pub mod defang;
pub mod markdown;
pub mod promise;
pub mod terminal;
pub mod token;
