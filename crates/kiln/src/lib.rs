//! kiln: the shader-variant build cache library.
//!
//! Data flows one way: a manifest names shaders and their keyword axes; each variant's
//! source is preprocessed (includes expanded, keywords defined), compiled for each target
//! (naga in-process; GLSL and HLSL through Khronos glslang), and kept in a checksummed, content-addressed store. The variant cache of the
//! founding document is the one in-memory cache the pipeline uses.
//!
//! A tool that builds a project opens it once and builds; a second build in the same
//! process (as `kiln watch` does) re-executes only what changed:
//!
//! ```
//! use kiln::pipeline::{BuildOptions, Project};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # let root = dir.path();
//! std::fs::write(
//!     root.join("kiln.toml"),
//!     r#"
//!         [project]
//!         targets = ["spirv"]
//!
//!         [[shader]]
//!         name = "Flat"
//!         source = "flat.wgsl"
//!         axes = [["_", "RED"]]
//!
//!         [shader.passes.Forward]
//!         stage = "fragment"
//!         entry = "main"
//!     "#,
//! )?;
//! std::fs::write(
//!     root.join("flat.wgsl"),
//!     "@fragment fn main() -> @location(0) vec4<f32> {
//!     #ifdef RED
//!         return vec4<f32>(1.0, 0.0, 0.0, 1.0);
//!     #else
//!         return vec4<f32>(0.5);
//!     #endif
//!     }",
//! )?;
//! let options = BuildOptions {
//!     manifest: root.join("kiln.toml"),
//!     ..BuildOptions::default()
//! };
//! let mut project = Project::open(&options)?;
//! let report = project.build(&|_progress| {})?;
//! assert_eq!((report.variants, report.compiled, report.failed), (2, 2, 0));
//! assert!(root.join("out/Flat/Forward/RED.spv").is_file());
//!
//! // Nothing changed: nothing runs again.
//! let again = project.build(&|_progress| {})?;
//! assert_eq!(again.compiled, 0);
//! # Ok(())
//! # }
//! ```

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
