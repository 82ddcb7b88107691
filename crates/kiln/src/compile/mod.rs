//! Compilation by naga: preprocessed source text in, one validated module, bytes out per
//! target.
//!
//! A variant is parsed and validated once and then emitted for each of its targets, because
//! parsing and validation dominate naga's cost and do not depend on the back end. Every call
//! into naga runs under `catch_unwind`: naga's back ends can panic on validated modules, and
//! one bad variant must fail alone.
//!
//! naga recurses over expressions: a 5,000-term sum overflows a worker thread's stack, and a
//! stack overflow aborts the process, which no `catch_unwind` can contain. So every call into
//! naga runs on a stack of its own of [`COMPILE_STACK_BYTES`] (memory is committed only as it
//! is used), and a text whose statements exceed [`MAX_STATEMENT_OPERATORS`] operators or
//! [`MAX_NESTING`] nested brackets is refused before naga sees it: within those bounds, the
//! stack is enough for every front end, the validator and every back end (see the tests).

pub mod cross;
mod error;
mod target;

pub use error::{CompileError, CompilePhase, TextLocation};
pub use target::{Stage, Target, TargetConfig, TargetParseError};

use std::panic::{catch_unwind, AssertUnwindSafe};

/// The source language of a shader, decided by its file extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SourceLanguage {
    /// WebGPU Shading Language (`.wgsl`).
    Wgsl,
    /// GLSL 440/450/460 core, one stage per file (`.vert`, `.frag`, `.comp`, `.glsl`).
    Glsl,
}

impl SourceLanguage {
    /// The language of a source path, from its extension.
    pub fn from_path(path: &std::path::Path) -> Option<Self> {
        match path.extension()?.to_str()? {
            "wgsl" => Some(Self::Wgsl),
            "vert" | "frag" | "comp" | "glsl" => Some(Self::Glsl),
            _ => None,
        }
    }
}

/// The stack every call into naga runs on (reserved address space; committed as used).
pub const COMPILE_STACK_BYTES: usize = 256 << 20;

/// At most this many operator characters (`+ - * / % & | ^ < > ! = ~`) in one statement
/// (text between `;`, `{` and `}`) of a text given to naga.
pub const MAX_STATEMENT_OPERATORS: usize = 10_000;

/// At most this many nested `(` and `[` in a text given to naga.
pub const MAX_NESTING: usize = 256;

/// The exact version of naga kiln links, read from `Cargo.lock` at build time; part of
/// every artifact's identity.
pub const NAGA_VERSION: &str = env!("KILN_NAGA_VERSION");

/// A parsed and validated naga module, ready to be emitted for any target.
pub struct ValidatedModule {
    module: naga::Module,
    info: naga::valid::ModuleInfo,
    stage: Stage,
    entry: String,
}

impl std::fmt::Debug for ValidatedModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValidatedModule")
            .field("stage", &self.stage)
            .field("entry", &self.entry)
            .finish_non_exhaustive()
    }
}

/// The validator capabilities kiln compiles with; part of every store namespace.
pub fn capabilities() -> naga::valid::Capabilities {
    naga::valid::Capabilities::default()
}

/// The capabilities artifacts of `target` are validated against (today the same for every
/// target); part of the target's store namespace and of every source revision.
pub fn capabilities_for(_target: &TargetConfig) -> naga::valid::Capabilities {
    capabilities()
}

/// Parses and validates `text` (already preprocessed) and checks that the entry point exists
/// with the expected stage.
pub fn parse_and_validate(
    language: SourceLanguage,
    text: &str,
    stage: Stage,
    entry: &str,
) -> Result<ValidatedModule, CompileError> {
    check_complexity(text)?;
    contain(CompilePhase::Parse, || {
        let module = parse(language, text, stage)?;
        let has_entry = module
            .entry_points
            .iter()
            .any(|ep| ep.name == entry && ep.stage == stage.to_naga());
        if !has_entry {
            return Err(CompileError::new(
                CompilePhase::Parse,
                format!("no {stage} entry point named `{entry}`"),
                definition_of(text, entry),
            ));
        }
        let mut validator =
            naga::valid::Validator::new(naga::valid::ValidationFlags::all(), capabilities());
        let info = validator.validate(&module).map_err(|e| {
            // Without a span, the entry point is the best place naga's error concerns.
            let location = e
                .location(text)
                .map(TextLocation::from)
                .or_else(|| definition_of(text, entry));
            CompileError::new(CompilePhase::Validate, error_chain(e.as_inner()), location)
        })?;
        Ok(ValidatedModule {
            module,
            info,
            stage,
            entry: entry.to_owned(),
        })
    })
}

/// Emits a validated module for one target.
pub fn emit(module: &ValidatedModule, target: &TargetConfig) -> Result<Vec<u8>, CompileError> {
    contain(CompilePhase::Emit, || target.emit(module))
}

/// Parses, validates and emits in one call (for tools and benchmarks comparing with kiln).
pub fn compile(
    language: SourceLanguage,
    text: &str,
    stage: Stage,
    entry: &str,
    target: &TargetConfig,
) -> Result<Vec<u8>, CompileError> {
    let module = parse_and_validate(language, text, stage, entry)?;
    emit(&module, target)
}

fn parse(language: SourceLanguage, text: &str, stage: Stage) -> Result<naga::Module, CompileError> {
    match language {
        SourceLanguage::Wgsl => naga::front::wgsl::parse_str(text).map_err(|e| {
            CompileError::new(
                CompilePhase::Parse,
                e.message().to_owned(),
                e.location(text).map(TextLocation::from),
            )
        }),
        SourceLanguage::Glsl => {
            let options = naga::front::glsl::Options::from(stage.to_naga());
            naga::front::glsl::Frontend::default()
                .parse(&options, text)
                .map_err(|e| {
                    let first = e.errors.first();
                    let message = first
                        .map(|err| err.kind.to_string())
                        .unwrap_or_else(|| "GLSL parse error".to_owned());
                    let location = first
                        .and_then(|err| err.location(text))
                        .map(TextLocation::from);
                    CompileError::new(CompilePhase::Parse, message, location)
                })
        }
    }
}

/// Runs `f`, turning a panic inside naga into a [`CompileError`] of the given phase.
fn contain<T>(
    phase: CompilePhase,
    f: impl FnOnce() -> Result<T, CompileError>,
) -> Result<T, CompileError> {
    contain_named("naga", phase, f)
}

/// Runs `f` on its own stack of [`COMPILE_STACK_BYTES`], turning a panic inside `compiler`
/// into a [`CompileError`] of the given phase.
fn contain_named<T>(
    compiler: &str,
    phase: CompilePhase,
    f: impl FnOnce() -> Result<T, CompileError>,
) -> Result<T, CompileError> {
    match stacker::grow(COMPILE_STACK_BYTES, || catch_unwind(AssertUnwindSafe(f))) {
        Ok(result) => result,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            Err(CompileError::new(
                CompilePhase::Panic,
                format!("{compiler} panicked during {phase}: {what}"),
                None,
            ))
        }
    }
}

/// Refuses a text whose expressions are too long or too deeply nested for naga's recursion
/// on [`COMPILE_STACK_BYTES`] of stack (see the module documentation).
fn check_complexity(text: &str) -> Result<(), CompileError> {
    let mut line: u32 = 1;
    let mut statement_line: u32 = 1;
    let mut operators = 0usize;
    let mut depth = 0usize;
    for b in text.bytes() {
        match b {
            b'\n' => line = line.saturating_add(1),
            b';' | b'{' | b'}' => operators = 0,
            b'(' | b'[' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(too_complex(
                        line,
                        format!("brackets nest more than {MAX_NESTING} deep"),
                    ));
                }
            }
            b')' | b']' => depth = depth.saturating_sub(1),
            b'+' | b'-' | b'*' | b'/' | b'%' | b'&' | b'|' | b'^' | b'<' | b'>' | b'!' | b'='
            | b'~' => {
                if operators == 0 {
                    statement_line = line;
                }
                operators += 1;
                if operators > MAX_STATEMENT_OPERATORS {
                    return Err(too_complex(
                        statement_line,
                        format!("a statement has more than {MAX_STATEMENT_OPERATORS} operators"),
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn too_complex(line: u32, what: String) -> CompileError {
    CompileError::new(
        CompilePhase::Parse,
        format!("{what}: too complex to compile safely (split the expression)"),
        Some(TextLocation {
            line,
            column: 1,
            length: 1,
        }),
    )
}

/// The first place `name(` appears as a whole word in `text`: where a function of that name
/// is defined (or, failing that, called).
fn definition_of(text: &str, name: &str) -> Option<TextLocation> {
    if name.is_empty() {
        return None;
    }
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    for (index, line) in text.lines().enumerate() {
        let mut from = 0;
        while let Some(found) = line.get(from..).and_then(|rest| rest.find(name)) {
            let start = from + found;
            let end = start + name.len();
            let word_start = start == 0 || !is_ident(line.as_bytes()[start - 1]);
            if word_start && line[end..].trim_start().starts_with('(') {
                return Some(TextLocation {
                    line: u32::try_from(index + 1).ok()?,
                    column: u32::try_from(start + 1).ok()?,
                    length: u32::try_from(name.len()).ok()?,
                });
            }
            from = end;
        }
    }
    None
}

/// Joins an error with its `source()` chain, since naga's validation errors nest the cause.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}
