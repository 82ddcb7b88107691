//! The bottom layer: the names and value types every other module may share, depending on
//! nothing else in the crate.
//!
//! What sits here is what more than one layer must agree on and no layer owns: kiln's
//! version (hashed by `identity`, recorded by `store` and `pipeline`), the names of kiln's
//! own files in the output directory (refused as shader names by `boundary`, written by
//! `pipeline`), and the [`ContentKey`] every hash is spelled in. Keeping them below
//! everything else is what lets the layers above depend only downward.

mod content_key;

pub(crate) use content_key::hex_lower;
pub use content_key::{ContentKey, ParseContentKeyError};

/// This crate's version: part of every artifact's identity and of every store namespace.
pub const KILN_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The name of the index file in the output directory (kiln-runtime's, which refuses it as a
/// name: the runtime will read output directories too).
pub const INDEX_FILE: &str = kiln_runtime::canon::INDEX_FILE;

/// The name of the stat file in the output directory.
pub const STAT_FILE: &str = ".kiln-stat";

/// A file in the output directory that says outputs may be being written: made by a build
/// before it writes its first output, removed once its index is written. Found by the next
/// build, it means a writer was killed and may have left temporary files anywhere under the
/// output directory.
pub const WRITING_MARKER: &str = ".kiln-writing";
