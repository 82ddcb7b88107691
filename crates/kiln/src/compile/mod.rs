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

mod constants;
mod error;
mod target;

pub use constants::{ConstantValue, Constants};
pub use error::{CompileError, CompilePhase, TextLocation};
pub use naga::valid::Capabilities;
pub use target::{
    capability_names, parse_capability, supported_capabilities, Stage, Target, TargetConfig,
    TargetParseError,
};

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

/// What one variant's compile needs besides its targets.
#[derive(Clone, Copy, Debug)]
pub struct CompileRequest<'a> {
    /// The source language.
    pub language: SourceLanguage,
    /// The preprocessed text.
    pub text: &'a str,
    /// The entry point's stage.
    pub stage: Stage,
    /// The entry point.
    pub entry: &'a str,
    /// Specialization constant values from the manifest (the rest take their defaults).
    pub constants: &'a Constants,
}

/// One target's result: its bytes, or why that target alone failed.
pub type TargetResult = Result<Vec<u8>, CompileError>;

/// Compiles `request` for each of `targets` (`None` entries are skipped and answer `None`):
/// parsed once, validated once per distinct capability set, its specialization constants
/// applied once per set, then emitted per target. `Err` is a failure of the whole variant
/// (the text does not parse, the entry point is missing, a constant has no value); a
/// validation or back-end failure fails only the targets it concerns.
pub fn compile_targets(
    request: &CompileRequest<'_>,
    targets: &[Option<&TargetConfig>],
) -> Result<Vec<Option<TargetResult>>, CompileError> {
    let text = request.text;
    check_complexity(text)?;
    let module = contain(CompilePhase::Parse, || {
        parse_with_entry(request.language, text, request.stage, request.entry)
    })?;
    let table = constants::pipeline_constants(&module, request.constants)?;
    let mut results: Vec<Option<TargetResult>> = targets.iter().map(|_| None).collect();
    // Validation depends only on the capabilities: targets that share a set share it.
    let mut sets: Vec<Capabilities> = Vec::new();
    for target in targets.iter().flatten() {
        if !sets.contains(&target.capabilities()) {
            sets.push(target.capabilities());
        }
    }
    for capabilities in sets {
        let members = || {
            targets
                .iter()
                .enumerate()
                .filter_map(|(i, t)| Some((i, (*t)?)))
                .filter(move |(_, t)| t.capabilities() == capabilities)
        };
        let validated = contain(CompilePhase::Validate, || {
            let info = validate(&module, text, request.entry, capabilities)?;
            let resolved =
                constants::resolve(&module, &info, request.stage, request.entry, &table, text)?;
            Ok(match resolved {
                Some((module, info)) => (Some(module), info),
                None => (None, info),
            })
        });
        let (resolved, info) = match validated {
            Ok(done) => done,
            // A constant without a value lacks it for every target: the variant fails.
            Err(e) if e.phase == CompilePhase::Constants => return Err(e),
            Err(e) => {
                for (i, _) in members() {
                    results[i] = Some(Err(e.clone()));
                }
                continue;
            }
        };
        let validated = ValidatedModule {
            module: resolved.unwrap_or_else(|| module.clone()),
            info,
            stage: request.stage,
            entry: request.entry.to_owned(),
        };
        for (i, target) in members() {
            results[i] =
                Some(emit(&validated, target).map_err(|e| locate_emit_error(e, &validated, text)));
        }
    }
    Ok(results)
}

/// Parses and validates `text` (already preprocessed) against `capabilities`, checks that the
/// entry point exists with the expected stage, and applies the specialization constants'
/// declared defaults: a module ready for [`emit`] to any target those capabilities suit.
pub fn parse_and_validate(
    language: SourceLanguage,
    text: &str,
    stage: Stage,
    entry: &str,
    capabilities: Capabilities,
) -> Result<ValidatedModule, CompileError> {
    check_complexity(text)?;
    contain(CompilePhase::Parse, || {
        let module = parse_with_entry(language, text, stage, entry)?;
        let info = validate(&module, text, entry, capabilities)?;
        let table = naga::back::PipelineConstants::default();
        let (module, info) = match constants::resolve(&module, &info, stage, entry, &table, text)? {
            Some(resolved) => resolved,
            None => (module, info),
        };
        Ok(ValidatedModule {
            module,
            info,
            stage,
            entry: entry.to_owned(),
        })
    })
}

/// The capabilities every one of `targets` allows: one validation that suits them all (for
/// tools and benchmarks that validate once and emit for a list).
pub fn common_capabilities<'a>(
    targets: impl IntoIterator<Item = &'a TargetConfig>,
) -> Capabilities {
    targets
        .into_iter()
        .fold(Capabilities::all(), |all, t| all & t.capabilities())
}

/// Emits a validated module for one target.
pub fn emit(module: &ValidatedModule, target: &TargetConfig) -> Result<Vec<u8>, CompileError> {
    contain(CompilePhase::Emit, || target.emit(module))
}

/// Compiles for one target (for tools and benchmarks comparing with kiln).
pub fn compile(
    language: SourceLanguage,
    text: &str,
    stage: Stage,
    entry: &str,
    target: &TargetConfig,
) -> Result<Vec<u8>, CompileError> {
    let constants = Constants::new();
    let request = CompileRequest {
        language,
        text,
        stage,
        entry,
        constants: &constants,
    };
    match compile_targets(&request, &[Some(target)])?.pop().flatten() {
        Some(result) => result,
        None => Err(CompileError::new(
            CompilePhase::Emit,
            "no result for the target".into(),
            None,
        )),
    }
}

fn parse_with_entry(
    language: SourceLanguage,
    text: &str,
    stage: Stage,
    entry: &str,
) -> Result<naga::Module, CompileError> {
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
    Ok(module)
}

fn validate(
    module: &naga::Module,
    text: &str,
    entry: &str,
    capabilities: Capabilities,
) -> Result<naga::valid::ModuleInfo, CompileError> {
    let mut validator =
        naga::valid::Validator::new(naga::valid::ValidationFlags::all(), capabilities);
    validator.validate(module).map_err(|e| {
        // Without a span, the entry point is the best place naga's error concerns.
        let location = e
            .location(text)
            .map(TextLocation::from)
            .or_else(|| definition_of(text, entry));
        CompileError::new(CompilePhase::Validate, error_chain(e.as_inner()), location)
    })
}

/// Where in `text` a span is, when it is defined and inside the text.
pub(crate) fn span_location(span: naga::Span, text: &str) -> Option<TextLocation> {
    let range = span.to_range()?;
    if range.start > text.len() || !text.is_char_boundary(range.start) {
        return None;
    }
    Some(TextLocation::from(span.location(text)))
}

/// naga's back ends report no position: point at the first use of what the message names
/// (a math function such as `Inverse`, a built-in such as `PointSize`), else at the entry
/// point's definition, so that the failure has a file and line.
fn locate_emit_error(mut error: CompileError, m: &ValidatedModule, text: &str) -> CompileError {
    if error.location.is_some() {
        return error;
    }
    let names_word = |word: &str| {
        error
            .message
            .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .any(|w| w == word)
    };
    let functions = m
        .module
        .functions
        .iter()
        .map(|(_, f)| f)
        .chain(m.module.entry_points.iter().map(|ep| &ep.function));
    let mut found = None;
    'search: for function in functions {
        for (handle, expression) in function.expressions.iter() {
            if let naga::Expression::Math { fun, .. } = expression {
                if names_word(&format!("{fun:?}")) {
                    found = span_location(function.expressions.get_span(handle), text);
                    if found.is_some() {
                        break 'search;
                    }
                }
            }
        }
    }
    error.location = found.or_else(|| definition_of(text, &m.entry));
    error
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
                format!("naga panicked during {phase}: {what}"),
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
