//! What a build reports about a place in the sources: an error or a warning, with the file,
//! line and variant it concerns. Plain data, so that it can be memoized by the engine.

use crate::compile::{CompileError, Target};
use crate::key::VariantKey;
use crate::preprocess::{PreprocessError, Preprocessed};
use std::fmt;
use std::path::PathBuf;

/// How bad it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    /// Something was repaired (a corrupt store entry was discarded and rebuilt).
    Warning,
    /// A variant could not be built.
    Error,
}

/// One message about the build, pointing at a source location when there is one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// What happened.
    pub message: String,
    /// Where: project-root-relative file (or the manifest), 1-based line, 0-based byte
    /// column range in that line.
    pub location: Option<Location>,
    /// The variant concerned: its key's display form and its digest.
    pub variant: Option<String>,
    /// The target concerned, when only one is.
    pub target: Option<Target>,
}

/// A place in a file.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Location {
    /// Path relative to the project root (or absolute for files outside it, like the store).
    pub file: PathBuf,
    /// 1-based line; 0 when only the file is known (the compiler gave no position).
    pub line: u32,
    /// 0-based byte columns within the line.
    pub columns: std::ops::Range<u32>,
}

impl Diagnostic {
    /// An error with no location yet.
    pub fn error(message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Error,
            message: message.into(),
            location: None,
            variant: None,
            target: None,
        }
    }

    /// A warning with no location.
    pub fn warning(message: impl Into<String>) -> Self {
        Self {
            severity: Severity::Warning,
            ..Self::error(message)
        }
    }

    /// Names the variant this diagnostic concerns.
    pub fn for_variant(mut self, key: &VariantKey) -> Self {
        self.variant = Some(describe_variant(key));
        self
    }

    /// Names the target this diagnostic concerns.
    pub fn for_target(mut self, target: Target) -> Self {
        self.target = Some(target);
        self
    }

    /// A preprocessing failure, at the directive that caused it.
    pub fn from_preprocess(error: &PreprocessError) -> Self {
        let mut diagnostic = Self::error(error.to_string());
        diagnostic.location = match error.span() {
            Some((file, line, columns)) => Some(Location {
                file: file.to_owned(),
                line,
                columns,
            }),
            None if !error.file().as_os_str().is_empty() => Some(Location {
                file: error.file().to_owned(),
                line: 1,
                columns: 0..0,
            }),
            None => None,
        };
        diagnostic
    }

    /// A naga failure, mapped from the preprocessed text back to the original file and line
    /// through `preprocessed`'s line map. Without a position from naga it still names the
    /// shader's source file (line 0: no line known).
    pub fn from_compile(error: &CompileError, preprocessed: Option<&Preprocessed>) -> Self {
        let mut diagnostic = Self::error(error.to_string());
        let Some(pre) = preprocessed else {
            return diagnostic;
        };
        if let Some(at) = error.location {
            if let Some(origin) = pre.origin(at.line) {
                let start = at.column.saturating_sub(1);
                diagnostic.location = Some(Location {
                    file: origin.file.to_owned(),
                    line: origin.line,
                    columns: start..start + at.length.max(1),
                });
            }
        }
        if diagnostic.location.is_none() {
            diagnostic.location = pre.files().first().map(|file| Location {
                file: file.clone(),
                line: 0,
                columns: 0..0,
            });
        }
        diagnostic
    }
}

/// `Lit/Forward[FOG;SKIN]@7 (2a876a0d5092)`: how reports name a variant.
pub fn describe_variant(key: &VariantKey) -> String {
    format!(
        "{}/{}[{}]@{:016x} ({})",
        key.shader(),
        key.pass(),
        key.keyword_text(),
        key.revision(),
        key.digest()
    )
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = match self.severity {
            Severity::Warning => "warning",
            Severity::Error => "error",
        };
        match &self.location {
            Some(at) if at.line == 0 => write!(f, "{}: ", at.file.display())?,
            Some(at) => write!(
                f,
                "{}:{}:{}: ",
                at.file.display(),
                at.line,
                at.columns.start + 1
            )?,
            None => {}
        }
        write!(f, "{level}: {}", self.message)?;
        if let Some(variant) = &self.variant {
            write!(f, " [variant {variant}")?;
            match self.target {
                Some(target) => write!(f, ", target {target}")?,
                // A variant's failure without a target: before any back end ran, or
                // writing its outputs.
                None if self.severity == Severity::Error => write!(f, ", all targets")?,
                None => {}
            }
            write!(f, "]")?;
        }
        Ok(())
    }
}
