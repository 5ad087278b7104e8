//! Evidence (SPEC §5): what a marker vouches for (`subject`), what it says (`payload`), where
//! it lives and how a gate verifies it (`marker`), who signed it (`signing`), how it travels
//! in git notes (`notes`), the private copy a command runs in (`snapshot`), and the copy a check runs in under a human's
//! hold on the tests (`held`). Above `reach`.

pub(crate) mod held;
pub(crate) mod marker;
pub(crate) mod notes;
pub mod payload;
pub(crate) mod results;
pub(crate) mod signing;
pub(crate) mod snapshot;
pub(crate) mod subject;
