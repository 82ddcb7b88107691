//! kiln-runtime: the engine's side of kiln.
//!
//! kiln builds every variant (shader, pass, keyword set) of a project ahead of time; an
//! engine asks for one at run time. This crate is what both sides share, with no heavy
//! dependency (no compiler, no database, no async runtime):
//!
//! - [`canon`]: the canonical keyword rule, the one definition kiln builds with and the
//!   runtime looks up with (validation, order, dedup, text form, file names, digests).
//! - [`pack`]: the pack format (one mmap-able file holding a build's variants), its
//!   deterministic, atomic writer and its validating reader.
//! - [`Library`]: an opened pack; [`Library::get`] finds a variant by shader, pass,
//!   keywords (any order, repeats allowed) and target, with typed errors.
//! - [`ffi`]: the same lookup for C and C++ (`include/kiln_runtime.h`).
//!
//! ```
//! use kiln_runtime::{pack::PackWriter, Library, LookupError};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut writer = PackWriter::new();
//! writer.add_target("spirv")?;
//! writer.add_shader("Lit", ["FOG", "SKIN"], ["Forward"])?;
//! writer.add_variant("Lit", "Forward", &["SKIN", "FOG"], "spirv", "2a876a0d5092", b"\x03\x02\x23\x07", b"{}")?;
//! let library = Library::from_bytes(writer.to_bytes()?)?;
//!
//! let variant = library.get("Lit", "Forward", &["FOG", "SKIN", "FOG"], "spirv")?;
//! assert_eq!(variant.bytes, b"\x03\x02\x23\x07");
//! assert_eq!(variant.digest, "2a876a0d5092");
//! assert_eq!(variant.reflection, b"{}");
//! assert!(matches!(
//!     library.get("Lit", "Forward", &["RAIN"], "spirv"),
//!     Err(LookupError::UnknownKeyword { .. })
//! ));
//! # Ok(())
//! # }
//! ```

// A library reports through its return values, never by printing; every `unsafe` block
// states why it is sound.
#![deny(
    missing_docs,
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::undocumented_unsafe_blocks
)]

pub mod canon;
pub mod ffi;
mod library;
pub mod pack;

pub use canon::{pack_file_name, PACK_EXTENSION};
pub use library::{Keywords, Library, LookupError, OpenError, Variant, Variants};
