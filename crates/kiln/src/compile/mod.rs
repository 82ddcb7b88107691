//! Compilation: preprocessed source text in, one module, bytes out per target.
//!
//! Two front ends: naga (WGSL, and the GLSL subset naga accepts), parsed and validated into a
//! naga module emitted by naga's back ends; and Khronos glslang (GLSL and HLSL, module
//! [`glslang`], behind the cargo feature `glslang`), compiled to SPIR-V. A pass picks one in
//! the manifest ([`FrontEnd`]); [`compile_module`] and [`emit_module`] are the pipeline's two
//! calls whichever it is.
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

mod error;
pub mod glslang;
mod target;

pub use error::{CompileError, CompilePhase, TextLocation};
pub use glslang::{GlslangOptions, Optimization};
pub use target::{Stage, Target, TargetConfig, TargetParseError};

use std::panic::{catch_unwind, AssertUnwindSafe};

/// The source language of a shader, decided by its file extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SourceLanguage {
    /// WebGPU Shading Language (`.wgsl`).
    Wgsl,
    /// GLSL, one stage per file (`.vert`, `.frag`, `.comp`, `.geom`, `.tesc`, `.tese`,
    /// `.mesh`, `.task`, the ray-tracing extensions, `.glsl`).
    Glsl,
    /// HLSL (`.hlsl`), several entry points per file.
    Hlsl,
}

impl SourceLanguage {
    /// The extensions of GLSL sources (glslc's, plus `.glsl`).
    pub const GLSL_EXTENSIONS: [&'static str; 14] = [
        "vert", "frag", "comp", "geom", "tesc", "tese", "mesh", "task", "rgen", "rint", "rahit",
        "rchit", "rmiss", "rcall",
    ];

    /// The language of a source path, from its extension.
    pub fn from_path(path: &std::path::Path) -> Option<Self> {
        match path.extension()?.to_str()? {
            "wgsl" => Some(Self::Wgsl),
            "hlsl" => Some(Self::Hlsl),
            "glsl" => Some(Self::Glsl),
            ext if Self::GLSL_EXTENSIONS.contains(&ext) => Some(Self::Glsl),
            _ => None,
        }
    }

    /// The name used in keys and messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::Wgsl => "wgsl",
            Self::Glsl => "glsl",
            Self::Hlsl => "hlsl",
        }
    }

    /// The compiler a source of this language uses when the manifest does not say: glslang
    /// for GLSL and HLSL (the reference front end: it builds 294 of 297 public Vulkan GLSL
    /// samples where naga builds 125), naga for WGSL.
    pub fn default_compiler(self) -> CompilerKind {
        match self {
            Self::Wgsl => CompilerKind::Naga,
            Self::Glsl | Self::Hlsl => CompilerKind::Glslang,
        }
    }
}

/// The compilers kiln can run, as the manifest's `compiler` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CompilerKind {
    /// naga, in-process: WGSL and its GLSL subset.
    Naga,
    /// Khronos glslang (feature `glslang`): GLSL and HLSL to SPIR-V.
    Glslang,
}

impl CompilerKind {
    /// Parses the manifest spelling.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "naga" => Some(Self::Naga),
            "glslang" => Some(Self::Glslang),
            _ => None,
        }
    }

    /// The manifest spelling.
    pub fn name(self) -> &'static str {
        match self {
            Self::Naga => "naga",
            Self::Glslang => "glslang",
        }
    }

    /// Whether this compiler reads `language`.
    pub fn reads(self, language: SourceLanguage) -> bool {
        match self {
            Self::Naga => language != SourceLanguage::Hlsl,
            Self::Glslang => language != SourceLanguage::Wgsl,
        }
    }

    /// The exact version of the compiler linked into this build.
    pub fn version(self) -> &'static str {
        match self {
            Self::Naga => NAGA_VERSION,
            Self::Glslang => glslang::VERSION,
        }
    }
}

/// A pass's compiler with its options: everything besides the text, stage and entry point
/// that decides what the front end produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrontEnd {
    /// naga.
    Naga,
    /// glslang, with the shader's `[shader.glslang]` options.
    Glslang(GlslangOptions),
}

impl FrontEnd {
    /// Which compiler.
    pub fn kind(&self) -> CompilerKind {
        match self {
            Self::Naga => CompilerKind::Naga,
            Self::Glslang(_) => CompilerKind::Glslang,
        }
    }
}

/// What a front end produced for one variant, ready to be emitted for any target.
#[derive(Debug)]
pub enum Module {
    /// A validated naga module.
    Naga(ValidatedModule),
    /// glslang's SPIR-V, with the stage and entry point other targets are translated for.
    Spirv {
        /// The SPIR-V words.
        words: Vec<u32>,
        /// The stage.
        stage: Stage,
        /// The entry point.
        entry: String,
    },
}

/// Runs a pass's front end once for a variant: naga parses and validates; glslang compiles to
/// SPIR-V (of the version of the SPIR-V target in `targets`, if any).
pub fn compile_module(
    front_end: &FrontEnd,
    language: SourceLanguage,
    text: &str,
    stage: Stage,
    entry: &str,
    targets: &[TargetConfig],
) -> Result<Module, CompileError> {
    match front_end {
        FrontEnd::Naga => parse_and_validate(language, text, stage, entry).map(Module::Naga),
        FrontEnd::Glslang(options) => {
            let spirv = targets.iter().find(|t| t.target() == Target::Spirv);
            glslang::compile_to_spirv(language, text, stage, entry, options, spirv).map(|words| {
                Module::Spirv {
                    words,
                    stage,
                    entry: entry.to_owned(),
                }
            })
        }
    }
}

/// Emits a module from either front end for one target.
pub fn emit_module(module: &Module, target: &TargetConfig) -> Result<Vec<u8>, CompileError> {
    match module {
        Module::Naga(module) => emit(module, target),
        Module::Spirv {
            words,
            stage,
            entry,
        } => glslang::emit(words, *stage, entry, target),
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
    let Some(naga_stage) = stage.to_naga() else {
        return Err(CompileError::new(
            CompilePhase::Unsupported,
            format!("naga cannot compile {stage} shaders (use compiler = \"glslang\")"),
            None,
        ));
    };
    contain(CompilePhase::Parse, || {
        let module = parse(language, text, naga_stage)?;
        let has_entry = module
            .entry_points
            .iter()
            .any(|ep| ep.name == entry && ep.stage == naga_stage);
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

fn parse(
    language: SourceLanguage,
    text: &str,
    stage: naga::ShaderStage,
) -> Result<naga::Module, CompileError> {
    match language {
        SourceLanguage::Hlsl => Err(CompileError::new(
            CompilePhase::Unsupported,
            "naga cannot read HLSL (use compiler = \"glslang\")".into(),
            None,
        )),
        SourceLanguage::Wgsl => naga::front::wgsl::parse_str(text).map_err(|e| {
            CompileError::new(
                CompilePhase::Parse,
                e.message().to_owned(),
                e.location(text).map(TextLocation::from),
            )
        }),
        SourceLanguage::Glsl => {
            let options = naga::front::glsl::Options::from(stage);
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

/// Runs native compiler code on [`COMPILE_STACK_BYTES`] of stack of its own, turning a Rust
/// panic on the way (the bindings') into a [`CompileError`].
#[cfg_attr(not(feature = "glslang"), allow(dead_code))]
fn contain_native<T>(
    compiler: &str,
    f: impl FnOnce() -> Result<T, CompileError>,
) -> Result<T, CompileError> {
    match stacker::grow(COMPILE_STACK_BYTES, || catch_unwind(AssertUnwindSafe(f))) {
        Ok(result) => result,
        Err(payload) => Err(CompileError::new(
            CompilePhase::Panic,
            format!("{compiler} panicked: {}", panic_message(payload.as_ref())),
            None,
        )),
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned())
}

/// Runs `f`, turning a panic inside naga into a [`CompileError`] of the given phase.
fn contain<T>(
    phase: CompilePhase,
    f: impl FnOnce() -> Result<T, CompileError>,
) -> Result<T, CompileError> {
    match stacker::grow(COMPILE_STACK_BYTES, || catch_unwind(AssertUnwindSafe(f))) {
        Ok(result) => result,
        Err(payload) => Err(CompileError::new(
            CompilePhase::Panic,
            format!(
                "naga panicked during {phase}: {}",
                panic_message(payload.as_ref())
            ),
            None,
        )),
    }
}

/// Refuses a text whose expressions are too long or too deeply nested for naga's recursion
/// on [`COMPILE_STACK_BYTES`] of stack (see the module documentation).
pub(crate) fn check_complexity(text: &str) -> Result<(), CompileError> {
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
