//! The platform layer on Unix (Linux and macOS): `libc` and `std::os::unix`.

pub mod alarm;
pub mod fs;
pub mod process;
pub mod replace;
pub mod user;
