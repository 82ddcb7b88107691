//! The stack of open files shared by both preprocessors (kiln's WGSL directives and the C
//! preprocessor), and the one error both give when it is full.

use super::{PreprocessError, SourceLocation, MAX_INCLUDE_DEPTH};
use rustc_hash::FxHashMap;
use std::path::PathBuf;

/// One open file of a variant's include stack.
pub(crate) struct Frame {
    /// The file's index in the driver's file table.
    pub(crate) file: u32,
    /// The `#include` that opened it (`None` for the entry).
    pub(crate) included_at: Option<SourceLocation>,
}

/// The include stack is full when `child` is included at `at`: a cycle if some file repeats
/// on it (a guard would have stopped a legitimate re-inclusion long before), otherwise just
/// too deep. `path` names a file of the driver's table.
pub(crate) fn too_deep(
    stack: &[Frame],
    child: u32,
    at: SourceLocation,
    path: impl Fn(u32) -> PathBuf,
) -> PreprocessError {
    let chain: Vec<u32> = stack.iter().map(|f| f.file).chain([child]).collect();
    let mut first_seen: FxHashMap<u32, usize> = FxHashMap::default();
    for (index, &file) in chain.iter().enumerate() {
        if let Some(&start) = first_seen.get(&file) {
            let closing = stack
                .get(index)
                .and_then(|frame| frame.included_at.clone())
                .unwrap_or(at);
            return PreprocessError::IncludeCycle {
                at: closing,
                cycle: chain[start..=index].iter().map(|&f| path(f)).collect(),
            };
        }
        first_seen.insert(file, index);
    }
    PreprocessError::IncludeTooDeep {
        at,
        limit: MAX_INCLUDE_DEPTH,
    }
}
