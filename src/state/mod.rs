//! Where vigil keeps what it trusts (SPEC §2, §4, §9): the project and its state directories
//! (`project`), the protected state home out of the agent's reach (`protected`), each
//! session's record (`session`), and the Ralph loop: its state (`loop_state`) and what happens
//! to it (`loops`); the human's hold on the tests (`hold`); the wakes a settled loop leaves for its commander (`wakes`). Above
//! `transcript`.

pub(crate) mod hold;
pub mod loop_state;
pub(crate) mod loops;
pub(crate) mod project;
pub mod protected;
pub(crate) mod session;
pub(crate) mod wakes;
