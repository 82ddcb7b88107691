//! `ManifestError`, and the checking context that points every error at a line of the file.

use std::ops::Range;
use std::path::{Path, PathBuf};

/// A manifest that does not parse or does not make sense, with the place in the file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}:{line}: {message}", path = path.display())]
pub struct ManifestError {
    /// The manifest file.
    pub path: PathBuf,
    /// 1-based line of the offending text (1 when unknown).
    pub line: usize,
    /// Byte range of the offending text, when known.
    pub span: Option<Range<usize>>,
    /// What is wrong.
    pub message: String,
}

/// The manifest being checked: where errors point.
pub(super) struct Context<'a> {
    pub(super) path: &'a Path,
    pub(super) text: &'a str,
}

impl Context<'_> {
    pub(super) fn error(&self, span: Option<Range<usize>>, message: String) -> ManifestError {
        let line = span
            .as_ref()
            .map(|s| line_of(self.text, s.start))
            .unwrap_or(1);
        ManifestError {
            path: self.path.to_owned(),
            line,
            span,
            message,
        }
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}
