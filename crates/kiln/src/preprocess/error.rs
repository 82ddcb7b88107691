//! What a failed preprocessing reports: the offending file, line and columns, and why.

use std::ops::Range;
use std::path::{Path, PathBuf};

/// A place in a source file: a root-relative path, a 1-based line and a byte column range.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SourceLocation {
    /// Project-root-relative path, `/`-separated.
    pub file: PathBuf,
    /// 1-based line number in `file`.
    pub line: u32,
    /// 0-based, half-open byte offsets within the line (suitable for codespan labels once
    /// offset by the line's start).
    pub columns: Range<u32>,
}

impl std::fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}:{}",
            self.file.display(),
            self.line,
            self.columns.start + 1
        )
    }
}

/// Why an include path (or the entry path) was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PathProblem {
    /// The path is empty.
    Empty,
    /// The path is absolute (`/x`, `C:x`); includes are relative to the including file.
    Absolute,
    /// After normalisation the path climbs above the project root.
    EscapesRoot,
    /// The path uses `\`; only `/` is accepted, so that results are the same on every OS.
    Backslash,
    /// The path is not valid UTF-8.
    NotUtf8,
}

impl std::fmt::Display for PathProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Empty => "the path is empty",
            Self::Absolute => {
                "absolute paths are not allowed; use a path relative to the including file"
            }
            Self::EscapesRoot => "the path leaves the project root",
            Self::Backslash => "use '/' as the path separator, not '\\'",
            Self::NotUtf8 => "the path is not valid UTF-8",
        })
    }
}

/// Everything that can stop preprocessing. Every variant except the entry-level ones carries
/// the [`SourceLocation`] of the offending directive or text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PreprocessError {
    /// The entry path itself is not an acceptable root-relative path.
    #[error("{}: invalid entry path: {problem}", path.display())]
    InvalidEntryPath {
        /// The path as given.
        path: PathBuf,
        /// What is wrong with it.
        problem: PathProblem,
    },
    /// An include directory is not an acceptable root-relative path.
    #[error("{}: invalid include directory: {problem}", path.display())]
    InvalidIncludeDir {
        /// The path as given.
        path: PathBuf,
        /// What is wrong with it.
        problem: PathProblem,
    },
    /// The entry file could not be read.
    #[error("{}: cannot read shader source: {message}", file.display())]
    EntryUnreadable {
        /// Root-relative path of the entry.
        file: PathBuf,
        /// The loader's error, as text.
        message: String,
    },
    /// A caller-provided define (or keyword) is not a valid macro definition.
    #[error("invalid predefined macro `{name}`: {message}")]
    InvalidPredefine {
        /// The name as given.
        name: String,
        /// What is wrong with it.
        message: String,
    },
    /// `#include` names a path that is absolute, escapes the root, or is otherwise refused.
    #[error("{at}: #include \"{spec}\" refused: {problem}")]
    IncludePathRefused {
        /// The `#include` directive.
        at: SourceLocation,
        /// The path as written.
        spec: String,
        /// What is wrong with it.
        problem: PathProblem,
    },
    /// `#include` names a file that does not exist.
    #[error("{at}: included file `{}` not found", path.display())]
    IncludeNotFound {
        /// The `#include` directive.
        at: SourceLocation,
        /// The resolved root-relative path.
        path: PathBuf,
    },
    /// `#include` names a file that exists but could not be read.
    #[error("{at}: cannot read included file `{}`: {message}", path.display())]
    IncludeUnreadable {
        /// The `#include` directive.
        at: SourceLocation,
        /// The resolved root-relative path.
        path: PathBuf,
        /// The loader's error, as text.
        message: String,
    },
    /// Files include each other without a guard that stops the recursion.
    #[error("{at}: include cycle: {}", display_cycle(cycle))]
    IncludeCycle {
        /// The `#include` directive that closes the cycle.
        at: SourceLocation,
        /// The files of the cycle, the first repeated at the end.
        cycle: Vec<PathBuf>,
    },
    /// Includes nest deeper than the limit, without repeating a file.
    #[error("{at}: includes nest deeper than {limit} levels")]
    IncludeTooDeep {
        /// The `#include` directive that went over the limit.
        at: SourceLocation,
        /// The limit.
        limit: usize,
    },
    /// A directive kiln does not know.
    #[error("{at}: unknown preprocessor directive `#{name}`")]
    UnknownDirective {
        /// The directive.
        at: SourceLocation,
        /// Its name, without `#`.
        name: String,
    },
    /// A known directive that this language (or kiln) does not accept.
    #[error("{at}: `#{name}` is not supported here: {reason}")]
    UnsupportedDirective {
        /// The directive.
        at: SourceLocation,
        /// Its name, without `#`.
        name: String,
        /// Why.
        reason: String,
    },
    /// `#define NAME(args)`: function-like macros are not supported.
    #[error("{at}: function-like macro `{name}` is unsupported; only object-like `#define NAME value` is")]
    FunctionLikeMacro {
        /// The `#define` directive.
        at: SourceLocation,
        /// The macro's name.
        name: String,
    },
    /// A directive whose arguments do not parse.
    #[error("{at}: malformed `#{directive}`: {message}")]
    MalformedDirective {
        /// The directive (or the offending part of it).
        at: SourceLocation,
        /// Its name, without `#`.
        directive: String,
        /// What is wrong.
        message: String,
    },
    /// A macro defined again with a different value.
    #[error("{at}: macro `{name}` redefined with a different value (previously {})",
        previous.as_ref().map_or_else(|| "predefined by the build".to_owned(), |p| format!("defined at {p}")))]
    MacroRedefined {
        /// The second `#define`.
        at: SourceLocation,
        /// The macro's name.
        name: String,
        /// The first definition; `None` when the build predefined it (keyword or define).
        previous: Option<SourceLocation>,
    },
    /// Expanding macros nested or grew without bound.
    #[error("{at}: macro expansion of `{name}` is too deep or too large")]
    MacroExpansionTooLarge {
        /// The line being expanded.
        at: SourceLocation,
        /// The macro whose expansion went over the limit.
        name: String,
    },
    /// A function-like macro's call has no closing `)` before the end of the text or a
    /// directive.
    #[error("{at}: unterminated call of macro `{name}`: no `)` before the end of the file or the next directive")]
    MacroCallUnterminated {
        /// The macro's name in the call.
        at: SourceLocation,
        /// The macro's name.
        name: String,
    },
    /// A function-like macro called with the wrong number of arguments.
    #[error("{at}: macro `{name}` takes {expected} argument(s) but is given {found}")]
    MacroArgumentCount {
        /// The macro's name in the call.
        at: SourceLocation,
        /// The macro's name.
        name: String,
        /// Its parameter count.
        expected: usize,
        /// The arguments in the call (`F()` has none).
        found: usize,
    },
    /// `##` without an operand, or with operands that do not form one token.
    #[error("{at}: bad `##` in the expansion of `{name}`: {message}")]
    BadTokenPaste {
        /// The macro's name in the call.
        at: SourceLocation,
        /// The macro's name.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// A `#` outside a directive: in code, or from `#x` (stringizing) in a macro.
    #[error("{at}: `#` outside a directive (glslang supports no stringizing `#x`)")]
    StrayHash {
        /// Where the `#` is (or the macro call that produced it).
        at: SourceLocation,
    },
    /// The expression of `#if` / `#elif` does not parse or cannot be evaluated.
    #[error("{at}: invalid #if expression: {message}")]
    InvalidExpression {
        /// The offending part of the expression (or the whole directive).
        at: SourceLocation,
        /// What is wrong.
        message: String,
    },
    /// `#else`, `#elif` or `#endif` without an open `#if`, or after `#else`.
    #[error("{at}: `#{directive}` {message}")]
    UnbalancedConditional {
        /// The directive.
        at: SourceLocation,
        /// Its name, without `#`.
        directive: String,
        /// What is wrong.
        message: String,
    },
    /// A file ends with a conditional still open.
    #[error("{at}: `#{directive}` is not closed by `#endif` before the end of the file")]
    UnterminatedConditional {
        /// The opening `#if` / `#ifdef` / `#ifndef`.
        at: SourceLocation,
        /// Its name, without `#`.
        directive: String,
    },
    /// A `/* ... */` comment runs to the end of the file.
    #[error("{at}: unterminated block comment")]
    UnterminatedComment {
        /// Where the comment opens.
        at: SourceLocation,
    },
    /// `#error` was reached.
    #[error("{at}: #error {message}")]
    ErrorDirective {
        /// The `#error` directive.
        at: SourceLocation,
        /// Its text.
        message: String,
    },
    /// GLSL `#version` after code: it must be the first line of the output.
    #[error("{at}: #version must come before any code")]
    VersionNotFirst {
        /// The `#version` directive.
        at: SourceLocation,
    },
    /// The variant's preprocessing went over its [`super::PreprocessBudget`] (includes that
    /// multiply, a macro that expands to too much text).
    #[error("{at}: this variant's preprocessing goes over its budget of {limit} {budget} (the budgets are multiples of `max_source_bytes` in `[project]`; see the README's limits)")]
    BudgetExceeded {
        /// The `#include` that went over, or the line whose expansion did.
        at: SourceLocation,
        /// Which budget.
        budget: super::BudgetKind,
        /// Its limit.
        limit: u64,
    },
}

fn display_cycle(cycle: &[PathBuf]) -> String {
    let names: Vec<String> = cycle.iter().map(|p| p.display().to_string()).collect();
    names.join(" -> ")
}

impl PreprocessError {
    /// Where the error is, for a codespan snippet: `None` only for entry-level errors
    /// (invalid or unreadable entry, invalid predefined macro), which have no line.
    pub fn location(&self) -> Option<&SourceLocation> {
        match self {
            Self::InvalidEntryPath { .. }
            | Self::InvalidIncludeDir { .. }
            | Self::EntryUnreadable { .. }
            | Self::InvalidPredefine { .. } => None,
            Self::IncludePathRefused { at, .. }
            | Self::IncludeNotFound { at, .. }
            | Self::IncludeUnreadable { at, .. }
            | Self::IncludeCycle { at, .. }
            | Self::IncludeTooDeep { at, .. }
            | Self::UnknownDirective { at, .. }
            | Self::UnsupportedDirective { at, .. }
            | Self::FunctionLikeMacro { at, .. }
            | Self::MalformedDirective { at, .. }
            | Self::MacroRedefined { at, .. }
            | Self::MacroExpansionTooLarge { at, .. }
            | Self::MacroCallUnterminated { at, .. }
            | Self::MacroArgumentCount { at, .. }
            | Self::BadTokenPaste { at, .. }
            | Self::StrayHash { at }
            | Self::InvalidExpression { at, .. }
            | Self::UnbalancedConditional { at, .. }
            | Self::UnterminatedConditional { at, .. }
            | Self::UnterminatedComment { at }
            | Self::ErrorDirective { at, .. }
            | Self::VersionNotFirst { at }
            | Self::BudgetExceeded { at, .. } => Some(at),
        }
    }

    /// The file the error is in (the entry file for entry-level errors; empty for an invalid
    /// predefined macro, which belongs to no file).
    pub fn file(&self) -> &Path {
        match self {
            Self::InvalidEntryPath { path, .. } | Self::InvalidIncludeDir { path, .. } => path,
            Self::EntryUnreadable { file, .. } => file,
            Self::InvalidPredefine { .. } => Path::new(""),
            other => match other.location() {
                Some(at) => &at.file,
                None => Path::new(""),
            },
        }
    }

    /// `(file, 1-based line, byte column range)` for rendering; `None` for entry-level errors.
    pub fn span(&self) -> Option<(&Path, u32, Range<u32>)> {
        self.location()
            .map(|at| (at.file.as_path(), at.line, at.columns.clone()))
    }
}
