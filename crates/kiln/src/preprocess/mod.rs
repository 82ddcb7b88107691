//! The preprocessor: turns one shader source, a language and a keyword set into the text naga
//! compiles, with includes expanded, conditionals resolved, macros substituted, comments
//! removed, and a map from every output line back to its file and line.
//!
//! # Use
//!
//! ```
//! use std::path::Path;
//! use kiln::compile::SourceLanguage;
//! use kiln::preprocess::{preprocess, MemoryLoader, PreprocessBudget, PreprocessRequest};
//!
//! let mut files = MemoryLoader::new();
//! files.insert("shaders/lit.wgsl", "#include \"common.wgsl\"\n#ifdef FOG\nconst fog = 1;\n#endif\n");
//! files.insert("shaders/common.wgsl", "// shared\nconst pi = 3.14;\n");
//! let out = preprocess(
//!     &PreprocessRequest {
//!         entry: Path::new("shaders/lit.wgsl"),
//!         language: SourceLanguage::Wgsl.into(),
//!         include_dirs: &[],
//!         keywords: &["FOG"],
//!         defines: &[],
//!         budget: PreprocessBudget::default(),
//!     },
//!     &files,
//! )
//! .unwrap();
//! assert_eq!(out.text, "const pi = 3.14;\nconst fog = 1;\n");
//! let first = out.line_map.origin(1).unwrap();
//! assert_eq!((first.file, first.line), (Path::new("shaders/common.wgsl"), 2));
//! ```
//!
//! # Language
//!
//! Each [`Dialect`] has its preprocessor.
//!
//! **GLSL and HLSL** speak the C preprocessor as glslang implements it, so that the text is
//! token for token what `glslangValidator -E` writes for the same file and defines
//! (`tests/preprocess_glslang.rs`): backslash-newline, object-like and function-like macros
//! (arguments expanded first except next to `##`; a macro never expands inside its own
//! expansion), `##` (an identifier with an identifier or number, or two operators into one
//! operator), `#define`, `#undef`, `#if` / `#ifdef` / `#ifndef` / `#elif` / `#else` /
//! `#endif` with `defined` and function-like macros, `#line N [source]`, `__LINE__`,
//! `__FILE__` (the source-string number, 0 unless `#line` sets one; the file's root-relative
//! name as a string in HLSL and once `GL_GOOGLE_include_directive` or
//! `GL_GOOGLE_cpp_style_line_directive` is enabled), `__VERSION__` (from `#version`, else
//! 100), `#error`, `#include "x"` and `#include <x>`. `#version` (first), `#extension` and
//! `#pragma` pass through (`#pragma once` is also honoured). glslang 12 refuses variadic
//! macros and `#x` stringizing, and so does kiln (typed errors). HLSL differs as glslang's
//! HLSL front end does: `##` pastes expanded arguments, and `{ }` group macro arguments.
//! Expansion is bounded (`cpp::expand`): a recursive or exponential macro is an error.
//! `#if` computes as glslang does, in 32-bit `int` (`expr.rs`).
//!
//! **WGSL** keeps kiln's smaller language: `#include "path"`, `#define NAME [value]`
//! (object-like only), `#undef`, `#ifdef`, `#ifndef`, `#if`, `#elif`, `#else`, `#endif`,
//! `#error`, `#pragma once`, and `#` alone; `#version`, `#extension`, other `#pragma`s,
//! `#line` and function-like macros are errors. `#if` takes integer literals,
//! `defined(X)` / `defined X`, identifiers (a macro's value, or 0), parentheses, `! - + ~`,
//! `* / %`, `+ -`, `<< >>`, comparisons, `== !=`, `&`, `^`, `|`, `&&` and `||`
//! (short-circuiting), with C precedence, in 64 bits. Macros are substituted at identifier boundaries in code lines (`FOG` never
//! inside `FOGGY`) and rescanned, C-style. Lines cannot be continued with `\`.
//!
//! In both, directives inside a false group are not checked, except for the nesting of
//! conditionals (as in C); conditionals must balance within each file. Includes may nest
//! [`MAX_INCLUDE_DEPTH`] deep; a file may include itself (or a cycle) only behind a guard or
//! `#pragma once`, otherwise it is an include cycle error naming the files.
//!
//! The variant's keywords are defined as `1` before the first line, then the caller's
//! defines. Defining a macro again differently is an error.
//!
//! # Paths
//!
//! All paths are project-root-relative and `/`-separated (see [`resolve_include`]): an
//! `#include "x"` is looked up relative to the including file, then in each of the
//! request's include directories in order; `#include <x>` (GLSL, HLSL) only in the include
//! directories. A path (or include directory) that is absolute, uses `\`, or leaves the root
//! is an error. Sources come only through a [`SourceLoader`], never from the disk
//! directly, so that the pipeline can record each read as a dependency.
//!
//! # Output
//!
//! Comments are removed (each becomes one space), blank lines dropped and trailing
//! whitespace trimmed, so that editing a comment's text, or adding or removing whole comment
//! or blank lines anywhere, leaves [`Preprocessed::text`] byte-identical (the line map does
//! change). GLSL and HLSL output is re-spaced from the tokens (one space where the source
//! had white space or a comment, or where two tokens would otherwise run together), one
//! output line per physical source line, a macro's expansion on the line of its name. No
//! `#line` is emitted (naga's WGSL front end rejects it, and it would move compiler line
//! numbers): use [`Preprocessed::line_map`] to map diagnostics back to the sources.
//!
//! [`include_closure`] lists every file any variant could include, for hashing into the
//! shader's source revision; [`Preprocessed::files`] lists those this variant read.
//!
//! # Cost
//!
//! Linear in the text read; no regular expressions. Within one call each file is read and
//! lexed once however often it is included. A [`Preprocessor`] also keeps lexed files across
//! calls (checked against the loader's text, so never stale), so that a shader's thousands of
//! variants lex each file once.
//!
//! A header included again while its include guard is defined (`#ifndef X` / `#if
//! !defined(X)` around the whole file, found when the file is lexed) is skipped without
//! being scanned, as is one that said `#pragma once`; a block under a false condition is
//! jumped over (its directive lines are still read). What is left is bounded by the
//! request's [`PreprocessBudget`] (lines read, includes entered, output bytes, checked as
//! macros expand): going over it is [`PreprocessError::BudgetExceeded`] at the offending
//! line. Only what the run's file views hold is counted, so an edit a variant does not see
//! never moves it over its budget.
//!
//! # Errors
//!
//! [`PreprocessError`] carries the root-relative file, 1-based line and byte columns of the
//! offending directive ([`PreprocessError::span`]), for a codespan snippet.

mod budget;
mod cache;
mod closure;
mod cpp;
mod directive;
mod driver;
mod error;
mod expr;
mod guard;
pub(crate) mod include_stack;
mod lexer;
mod line_map;
mod loader;
mod macros;
mod path;

pub use crate::compile::SourceLanguage;
pub use budget::{
    BudgetKind, PreprocessBudget, Spent, BYTES_READ_PER_SOURCE_BYTE, MIN_INCLUDES,
    OUTPUT_BYTES_PER_SOURCE_BYTE, SOURCE_BYTES_PER_INCLUDE,
};
pub use cache::{CacheStats, Preprocessor};
pub use closure::{include_closure, IncludeClosure, MissingInclude};
pub use error::{PathProblem, PreprocessError, SourceLocation};
pub use line_map::{LineMap, LineOrigin};
pub use loader::{DiskLoader, FileView, MemoryLoader, SourceLoader};
pub use path::{normalize_entry, resolve_include};

use std::path::{Path, PathBuf};

/// How deeply includes may nest. A file that includes itself (or a cycle) without a guard
/// reaches this limit and is reported as an include cycle.
pub const MAX_INCLUDE_DEPTH: usize = 64;

/// Which preprocessor a source language speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dialect {
    /// kiln's own small directive language for WGSL (object-like macros, no `#line`).
    Wgsl,
    /// The C preprocessor of GLSL, as glslang implements it.
    Glsl,
    /// The C preprocessor of HLSL, as glslang's HLSL front end implements it (`##` pastes
    /// expanded arguments, `{ }` group macro arguments, `__FILE__` is always the file name).
    Hlsl,
    /// Slang: its C preprocessor is Slang's own (kiln never expands Slang), but kiln reads
    /// its `#include`s and its `import`s to know every file a Slang shader can reach.
    Slang,
}

impl Dialect {
    /// Whether this is a C preprocessor (GLSL, HLSL, Slang).
    pub fn is_c(self) -> bool {
        matches!(self, Self::Glsl | Self::Hlsl | Self::Slang)
    }
}

impl From<SourceLanguage> for Dialect {
    fn from(language: SourceLanguage) -> Self {
        match language {
            SourceLanguage::Wgsl => Self::Wgsl,
            SourceLanguage::Glsl => Self::Glsl,
            SourceLanguage::Hlsl => Self::Hlsl,
            SourceLanguage::Slang => Self::Slang,
        }
    }
}

/// What to preprocess.
#[derive(Clone, Copy, Debug)]
pub struct PreprocessRequest<'a> {
    /// The shader's source file, project-root-relative.
    pub entry: &'a Path,
    /// Which preprocessor (from the source language: `SourceLanguage::Glsl.into()`).
    pub language: Dialect,
    /// Include directories, project-root-relative, searched in order after the including
    /// file's directory for `#include "x"`, and alone for `#include <x>` (GLSL, HLSL).
    pub include_dirs: &'a [PathBuf],
    /// The variant's keywords, each defined as `1`.
    pub keywords: &'a [&'a str],
    /// Further macros `(name, value)`, defined after the keywords.
    pub defines: &'a [(&'a str, &'a str)],
    /// What the run may cost (`PreprocessBudget::default()`, or
    /// [`PreprocessBudget::for_max_source_bytes`] of the project's cap).
    pub budget: PreprocessBudget,
}

/// The text naga compiles, and where each of its lines came from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Preprocessed {
    /// The preprocessed text; every line ends with `\n`.
    pub text: String,
    /// The origin of each line of `text`, and the files read.
    pub line_map: LineMap,
}

impl Preprocessed {
    /// The heap memory this holds (text and line map), for byte-bounded caches.
    pub fn heap_bytes(&self) -> usize {
        self.text.capacity() + self.line_map.heap_bytes()
    }

    /// The files read for this variant (entry first, each once, in first-read order).
    pub fn files(&self) -> &[PathBuf] {
        self.line_map.files()
    }

    /// Where 1-based output line `output_line` (as in naga's diagnostics) came from.
    pub fn origin(&self, output_line: u32) -> Option<LineOrigin<'_>> {
        self.line_map.origin(output_line)
    }

    /// Where byte `offset` of [`Self::text`] came from, with its 0-based byte column in the
    /// output line (the same as in the source unless comments or macros before it on that
    /// line changed its length).
    pub fn origin_of_offset(&self, offset: usize) -> Option<(LineOrigin<'_>, u32)> {
        let before = self.text.get(..offset)?;
        let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
        let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
        let origin = self.origin(u32::try_from(line).ok()?)?;
        Some((origin, u32::try_from(offset - line_start).ok()?))
    }
}

/// Preprocesses one variant of a shader. See the module documentation for the language;
/// [`Preprocessor::preprocess`] does the same, reusing lexed files across calls.
pub fn preprocess(
    request: &PreprocessRequest<'_>,
    loader: &dyn SourceLoader,
) -> Result<Preprocessed, PreprocessError> {
    preprocess_with(request, loader, None).0
}

/// [`preprocess`], also saying what the run spent of its budget: the entry point of the
/// tests and fuzz targets that check a run's work (a guarded header included again is not
/// entered, no run spends more than its budget).
#[doc(hidden)]
pub fn preprocess_spent(
    request: &PreprocessRequest<'_>,
    loader: &dyn SourceLoader,
) -> (Result<Preprocessed, PreprocessError>, Spent) {
    preprocess_with(request, loader, None)
}

fn preprocess_with(
    request: &PreprocessRequest<'_>,
    loader: &dyn SourceLoader,
    cache: Option<&Preprocessor>,
) -> (Result<Preprocessed, PreprocessError>, Spent) {
    let entry = match normalize_entry(request.entry) {
        Ok(entry) => entry,
        Err(problem) => {
            let error = PreprocessError::InvalidEntryPath {
                path: request.entry.to_path_buf(),
                problem,
            };
            return (Err(error), Spent::default());
        }
    };
    let include_dirs = match normalize_include_dirs(request.include_dirs) {
        Ok(dirs) => dirs,
        Err(error) => return (Err(error), Spent::default()),
    };
    // Each keyword is defined as `1`, then the shader's `defines`.
    let predefines = || {
        let keywords = request.keywords.iter().map(|keyword| (*keyword, "1"));
        keywords.chain(request.defines.iter().copied())
    };
    let failed = |error| (Err(error), Spent::default());
    if request.language.is_c() {
        let mut driver = cpp::CDriver::new(
            request.language,
            include_dirs,
            loader,
            cache,
            request.budget,
        );
        if let Err(error) = predefines().try_for_each(|(n, v)| driver.predefine(n, v)) {
            return failed(error);
        }
        return driver.run(entry);
    }
    let mut driver = driver::Driver::new(
        request.language,
        include_dirs,
        loader,
        cache,
        request.budget,
    );
    if let Err(error) = predefines().try_for_each(|(n, v)| driver.predefine(n, v)) {
        return failed(error);
    }
    driver.run(entry)
}

/// Include directories as normalised root-relative paths; one that is absolute or leaves
/// the root is refused.
pub(crate) fn normalize_include_dirs(dirs: &[PathBuf]) -> Result<Vec<String>, PreprocessError> {
    dirs.iter()
        .map(|dir| {
            normalize_entry(dir).map_err(|problem| PreprocessError::InvalidIncludeDir {
                path: dir.clone(),
                problem,
            })
        })
        .collect()
}
