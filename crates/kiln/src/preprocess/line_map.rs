//! The map from each line of preprocessed text back to the file and line it came from.

use std::path::{Path, PathBuf};

/// Where one output line came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LineOrigin<'a> {
    /// Root-relative path of the source file.
    pub file: &'a Path,
    /// 1-based line in that file.
    pub line: u32,
}

/// For every line of a preprocessed text, its origin; also the files that were read, in the
/// order they were first read (the entry first).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LineMap {
    files: Vec<PathBuf>,
    /// Per output line: (index into `files`, 1-based source line).
    lines: Vec<(u32, u32)>,
}

impl LineMap {
    pub(crate) fn new(files: Vec<PathBuf>, lines: Vec<(u32, u32)>) -> Self {
        Self { files, lines }
    }

    /// The heap memory this holds.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.lines.capacity() * std::mem::size_of::<(u32, u32)>()
            + self.files.capacity() * std::mem::size_of::<PathBuf>()
            + self
                .files
                .iter()
                .map(|f| f.as_os_str().len())
                .sum::<usize>()
    }

    /// The origin of 1-based output line `output_line`; `None` past the end (or for 0).
    pub fn origin(&self, output_line: u32) -> Option<LineOrigin<'_>> {
        let index = usize::try_from(output_line.checked_sub(1)?).ok()?;
        let &(file, line) = self.lines.get(index)?;
        Some(LineOrigin {
            file: self.files.get(file as usize)?,
            line,
        })
    }

    /// The files read to produce the text, entry first, each once.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// The number of output lines.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Whether the output has no lines.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The origins of all output lines, in order.
    pub fn iter(&self) -> impl Iterator<Item = LineOrigin<'_>> + '_ {
        self.lines.iter().filter_map(|&(file, line)| {
            Some(LineOrigin {
                file: self.files.get(file as usize)?,
                line,
            })
        })
    }
}
