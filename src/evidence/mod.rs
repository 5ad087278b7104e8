//! Evidence (SPEC §5): what a marker vouches for (`subject`), what it says (`payload`), where
//! it lives and how a gate verifies it (`marker`), who signed it (`signing`), how it travels
//! in git notes (`notes`), and the private copy a command runs in (`snapshot`). Above `reach`.

pub mod marker;
pub mod notes;
pub mod payload;
pub mod signing;
pub mod snapshot;
pub mod subject;
