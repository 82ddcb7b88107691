//! kiln: the shader-variant build cache library.
//!
//! Data flows one way: a manifest names shaders and their keyword axes; each variant's
//! source is preprocessed (includes expanded, keywords defined), compiled by naga for each
//! target, and kept in a checksummed, content-addressed store. The variant cache of the
//! founding document is the one in-memory cache the pipeline uses.

// A library reports through its return values and `tracing`, never by printing (only the
// CLI prints); every `unsafe` block states why it is sound.
#![deny(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::undocumented_unsafe_blocks
)]

pub mod base;
pub mod boundary;
pub mod compile;
pub mod identity;
pub mod key;
pub mod manifest;
pub mod pipeline;
pub mod preprocess;
pub mod shard;
pub mod store;
pub mod variant_cache;
