//! The project boundary: what kiln may read, write and delete, checked in one place.
//!
//! - [`check_name`]: one validator for every name that becomes a path component (shader and
//!   pass names, keywords in output file names), used by the manifest and the variant key
//!   alike.
//! - [`index_path`] and [`output_file`]: a path read from `index.json`, or joined from names,
//!   must be relative and normal and stay inside the output directory.
//! - [`read_project_file`]: sources and includes are read through their real paths, inside the
//!   project root, regular files only, with a size cap.

mod name;
mod path;
mod source;

pub use name::{check_name, NameFault};
pub(crate) use path::resolved_parent_inside;
pub use path::{
    check_index_path, index_path, output_file, project_link_on, resolved_as_far_as_exists,
    UnsafePath,
};
pub use source::{read_project_file, read_regular_file, SourceReadError, DEFAULT_MAX_SOURCE_BYTES};
