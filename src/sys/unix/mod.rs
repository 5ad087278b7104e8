//! The platform layer on Unix (Linux and macOS): `libc` and `std::os::unix`.

pub(super) mod alarm;
pub(super) mod fs;
pub(super) mod process;
pub(super) mod replace;
pub(super) mod user;
