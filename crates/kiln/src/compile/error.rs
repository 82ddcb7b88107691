//! What a failed compile reports: the phase, naga's message, and where in the text.

/// The step of compilation that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompilePhase {
    /// naga's front end rejected the text, or the entry point is missing.
    Parse,
    /// naga's validator rejected the module.
    Validate,
    /// A specialization constant has no value, or the manifest names one the shader lacks.
    Constants,
    /// A back end could not write the module for a target.
    Emit,
    /// A compiler panicked; the panic was contained.
    Panic,
    /// The compiler is not in this build, or the target cannot express the shader (e.g. a
    /// geometry stage for Metal).
    Unsupported,
}

impl std::fmt::Display for CompilePhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Parse => "parse",
            Self::Validate => "validation",
            Self::Constants => "specialization constant",
            Self::Emit => "emit",
            Self::Panic => "panic",
            Self::Unsupported => "unsupported",
        })
    }
}

/// A position in the compiled (preprocessed) text; the pipeline maps it back to a source file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TextLocation {
    /// 1-based line.
    pub line: u32,
    /// 1-based column, in bytes.
    pub column: u32,
    /// Length of the span, in bytes.
    pub length: u32,
}

impl From<naga::SourceLocation> for TextLocation {
    fn from(loc: naga::SourceLocation) -> Self {
        Self {
            line: loc.line_number,
            column: loc.line_position,
            length: loc.length,
        }
    }
}

/// A compile that did not produce an artifact. Never stored, never cached as an artifact.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{phase} error: {message}")]
pub struct CompileError {
    /// Which step failed.
    pub phase: CompilePhase,
    /// naga's message, with its cause chain.
    pub message: String,
    /// Where in the compiled text, when naga knows.
    pub location: Option<TextLocation>,
}

impl CompileError {
    pub(crate) fn new(
        phase: CompilePhase,
        message: String,
        location: Option<TextLocation>,
    ) -> Self {
        Self {
            phase,
            message,
            location,
        }
    }
}
