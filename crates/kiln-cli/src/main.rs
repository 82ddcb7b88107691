//! The `kiln` command.
fn main() {}
