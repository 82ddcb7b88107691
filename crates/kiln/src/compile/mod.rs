//! Compilation: preprocessed source text in, bytes out per target.
//!
//! Three front ends: naga (WGSL, and the GLSL subset naga accepts), parsed and validated into
//! a naga module emitted by naga's back ends; Khronos glslang (GLSL and HLSL, module
//! [`glslang`], behind the default cargo feature `glslang`), compiled to SPIR-V; and the Slang
//! compiler library (module [`slang`]), loaded at run time and run in worker processes,
//! compiled to SPIR-V. A pass picks one in
//! the manifest ([`FrontEnd`]); [`compile_with`] is the pipeline's one call whichever it is.
//!
//! A variant is parsed once, validated once per distinct capability set among its targets
//! (each target's default is what naga's back end for it can write), and then emitted for
//! each target, because parsing and validation dominate naga's cost and depend on the back
//! end only through the capabilities. Specialization constants are replaced by their values
//! before emitting (`constants.rs`). Each target's result is its own: a back end that cannot
//! write a variant fails that (variant, target) pair alone. Every call into naga runs under
//! `catch_unwind`: naga's back ends can panic on validated modules, and one bad variant must
//! fail alone.
//!
//! naga recurses over expressions: a 5,000-term sum overflows a worker thread's stack, and a
//! stack overflow aborts the process, which no `catch_unwind` can contain. So every call into
//! naga runs with [`COMPILE_STACK_BYTES`] of stack (committed only as it is used; kiln's
//! workers have that much, other threads get a stack of their own), and a text whose
//! statements exceed [`MAX_STATEMENT_OPERATORS`] operators or [`MAX_NESTING`] nested
//! brackets is refused before naga sees it: within those bounds, the
//! stack is enough for every front end, the validator and every back end (see the tests).

mod constants;
pub mod cross;
mod error;
pub mod glslang;
pub mod slang;
mod target;

pub use constants::{ConstantValue, Constants};
pub use error::{CompileError, CompilePhase, TextLocation};
pub use glslang::{BindingBase, GlslangOptions, Optimization, VulkanVersion};
pub use naga::valid::Capabilities;
pub use slang::{MatrixLayout, SlangOptimization, SlangOptions};
pub use target::{
    capability_names, parse_capability, supported_capabilities, Stage, Target, TargetConfig,
    TargetParseError,
};

use std::panic::{catch_unwind, AssertUnwindSafe};

/// The source language of a shader: the manifest's `language`, else its file extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SourceLanguage {
    /// WebGPU Shading Language (`.wgsl`).
    Wgsl,
    /// GLSL, one stage per file (`.vert`, `.frag`, `.comp`, `.geom`, `.tesc`, `.tese`,
    /// `.mesh`, `.task`, the ray-tracing extensions, `.glsl`).
    Glsl,
    /// HLSL (`.hlsl`), several entry points per file.
    Hlsl,
    /// Slang (`.slang`): modules, `import`, several entry points per file.
    Slang,
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
            "slang" => Some(Self::Slang),
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
            Self::Slang => "slang",
        }
    }

    /// Every language, by [`SourceLanguage::name`].
    pub const ALL: [SourceLanguage; 4] = [Self::Wgsl, Self::Glsl, Self::Hlsl, Self::Slang];

    /// The language the manifest's `language` names (its [`SourceLanguage::name`]).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|language| language.name() == name)
    }

    /// The compiler a source of this language uses when the manifest does not say: glslang
    /// for GLSL and HLSL (the reference front end: it builds 294 of 297 public Vulkan GLSL
    /// samples where naga builds 125), naga for WGSL, the Slang library for Slang.
    pub fn default_compiler(self) -> CompilerKind {
        match self {
            Self::Wgsl => CompilerKind::Naga,
            Self::Glsl | Self::Hlsl => CompilerKind::Glslang,
            Self::Slang => CompilerKind::Slang,
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
    /// The Slang compiler library, loaded at run time, in worker processes: Slang to SPIR-V.
    Slang,
}

impl CompilerKind {
    /// Parses the manifest spelling.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "naga" => Some(Self::Naga),
            "glslang" => Some(Self::Glslang),
            "slang" => Some(Self::Slang),
            _ => None,
        }
    }

    /// The manifest spelling.
    pub fn name(self) -> &'static str {
        match self {
            Self::Naga => "naga",
            Self::Glslang => "glslang",
            Self::Slang => "slang",
        }
    }

    /// Whether this compiler reads `language`.
    pub fn reads(self, language: SourceLanguage) -> bool {
        match self {
            Self::Naga => matches!(language, SourceLanguage::Wgsl | SourceLanguage::Glsl),
            Self::Glslang => matches!(language, SourceLanguage::Glsl | SourceLanguage::Hlsl),
            Self::Slang => language == SourceLanguage::Slang,
        }
    }

    /// The exact version of the compiler linked into this build (for Slang, of the library
    /// this process found; see [`slang::version_label`]).
    pub fn version(self) -> &'static str {
        match self {
            Self::Naga => NAGA_VERSION,
            Self::Glslang => glslang::VERSION,
            Self::Slang => slang::version_label(),
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
    /// Slang, with the shader's `[shader.slang]` options.
    Slang(SlangOptions),
}

impl FrontEnd {
    /// Which compiler.
    pub fn kind(&self) -> CompilerKind {
        match self {
            Self::Naga => CompilerKind::Naga,
            Self::Glslang(_) => CompilerKind::Glslang,
            Self::Slang(_) => CompilerKind::Slang,
        }
    }
}

/// The stack every call into naga runs on (reserved address space; committed as used).
pub const COMPILE_STACK_BYTES: usize = 256 << 20;

/// The stack of kiln's worker threads: [`COMPILE_STACK_BYTES`] for the compiler plus room for
/// the engine and the pipeline above it, so that compiles run in place (see
/// [`on_compile_stack`]).
pub const WORKER_STACK_BYTES: usize = COMPILE_STACK_BYTES + (16 << 20);

/// Runs `f` with at least [`COMPILE_STACK_BYTES`] of stack: in place on a thread that has that
/// much left (kiln's workers, created with [`WORKER_STACK_BYTES`]), else on a stack of its
/// own. A new stack per call costs an mmap, a munmap that shoots down TLBs, and a zero-filled
/// page fault for every stack page touched, several times per variant; a worker's stack pages
/// stay mapped from one compile to the next.
fn on_compile_stack<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(COMPILE_STACK_BYTES, COMPILE_STACK_BYTES, f)
}

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
    naga_stage(request.stage)?;
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
    // naga's capabilities only permit: a module valid under a set is valid under every
    // larger one, with the same `ModuleInfo`. So a module that validates under what all the
    // sets share (the common case: it uses nothing target-specific) is validated once for
    // every target; otherwise once per distinct set, so that each target fails or not alone.
    let common = sets.iter().fold(Capabilities::all(), |all, set| all & *set);
    let shared = if sets.len() > 1 {
        contain(CompilePhase::Validate, || {
            validate(&module, text, request.entry, common)
        })
        .ok()
    } else {
        None
    };
    // One group of targets per validation: all of them when the shared one passed, else one
    // per capability set. Each group gets its own module only when it must: the last one
    // (the only one, usually) takes the parsed module itself.
    let groups: Vec<Option<Capabilities>> = match shared {
        Some(_) => vec![None],
        None => sets.into_iter().map(Some).collect(),
    };
    let mut shared = shared;
    let mut module = Some(module);
    let last = groups.len().saturating_sub(1);
    for (g, group) in groups.into_iter().enumerate() {
        let members = || {
            targets
                .iter()
                .enumerate()
                .filter_map(|(i, t)| Some((i, (*t)?)))
                .filter(move |(_, t)| group.is_none_or(|set| t.capabilities() == set))
        };
        let Some(parsed) = module.as_ref() else {
            break;
        };
        let validated = contain(CompilePhase::Validate, || {
            let info = match (shared.take(), group) {
                (Some(info), _) => info,
                (None, Some(set)) => validate(parsed, text, request.entry, set)?,
                (None, None) => validate(parsed, text, request.entry, common)?,
            };
            let resolved =
                constants::resolve(parsed, &info, request.stage, request.entry, &table, text)?;
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
        let module = match resolved {
            Some(resolved) => resolved,
            None if g == last => match module.take() {
                Some(parsed) => parsed,
                None => break,
            },
            None => parsed.clone(),
        };
        let validated = ValidatedModule {
            module,
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

/// Compiles `request` with a pass's front end for each of `targets`, as [`compile_targets`]
/// does for naga: glslang compiles once to SPIR-V and answers every target from it
/// ([`glslang::compile_targets`]). `Err` fails the whole variant; a target's own failure is in
/// its slot.
pub fn compile_with(
    front_end: &FrontEnd,
    request: &CompileRequest<'_>,
    targets: &[Option<&TargetConfig>],
) -> Result<Vec<Option<TargetResult>>, CompileError> {
    match front_end {
        FrontEnd::Naga => compile_targets(request, targets),
        FrontEnd::Glslang(options) => glslang::compile_targets(options, request, targets),
        FrontEnd::Slang(options) => slang::compile_targets(options, request, targets),
    }
}

/// Why a pass's front end cannot give `target` for a shader of `stage`, when that is known
/// without compiling (the stage table of `cross`): the pair fails alone, as
/// [`CompilePhase::Unsupported`]. naga passes have only naga's stages (the manifest checks).
pub fn refused(front_end: &FrontEnd, stage: Stage, target: Target) -> Option<CompileError> {
    match front_end {
        FrontEnd::Naga => None,
        FrontEnd::Glslang(_) => glslang::refused(stage, target),
        FrontEnd::Slang(_) => slang::refused(stage, target),
    }
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
    let naga_stage = naga_stage(stage)?;
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
    Ok(module)
}

#[cfg(test)]
thread_local! {
    /// Validations run on this thread (tests count them: one per distinct capability set).
    static VALIDATIONS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

fn validate(
    module: &naga::Module,
    text: &str,
    entry: &str,
    capabilities: Capabilities,
) -> Result<naga::valid::ModuleInfo, CompileError> {
    #[cfg(test)]
    VALIDATIONS.with(|n| n.set(n.get() + 1));
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
    let words: Vec<&str> = error
        .message
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .filter(|w| !w.is_empty())
        .collect();
    let named = |debug: &str| {
        let name = debug.split([' ', '(', '{']).next().unwrap_or(debug);
        words.contains(&name).then(|| name.to_owned())
    };
    let module = &m.module;
    let functions: Vec<&naga::Function> = module
        .functions
        .iter()
        .map(|(_, f)| f)
        .chain(module.entry_points.iter().map(|ep| &ep.function))
        .collect();
    // A math function the message names: its span when the front end kept one.
    let mut names = Vec::new();
    for function in &functions {
        for (handle, expression) in function.expressions.iter() {
            if let naga::Expression::Math { fun, .. } = expression {
                if let Some(name) = named(&format!("{fun:?}")) {
                    if let Some(at) = span_location(function.expressions.get_span(handle), text) {
                        error.location = Some(at);
                        return error;
                    }
                    names.push(name);
                }
            }
        }
    }
    // A built-in the message names, among the entry point's inputs and outputs.
    let mut ends: Vec<(naga::Handle<naga::Type>, Option<&naga::Binding>)> = Vec::new();
    for ep in &module.entry_points {
        for argument in &ep.function.arguments {
            ends.push((argument.ty, argument.binding.as_ref()));
        }
        if let Some(result) = &ep.function.result {
            ends.push((result.ty, result.binding.as_ref()));
        }
    }
    let mut bindings: Vec<&naga::Binding> = Vec::new();
    for (ty, binding) in ends {
        match binding {
            Some(b) => bindings.push(b),
            None => {
                if let Some(naga::TypeInner::Struct { members, .. }) =
                    module.types.get_handle(ty).ok().map(|t| &t.inner)
                {
                    bindings.extend(members.iter().filter_map(|m| m.binding.as_ref()));
                }
            }
        }
    }
    for binding in bindings {
        if let naga::Binding::BuiltIn(builtin) = binding {
            if let Some(name) = named(&format!("{builtin:?}")) {
                names.push(name);
            }
        }
    }
    // Its spelling in the text: `inverse` (GLSL), `inverseSqrt` (WGSL), `gl_PointSize`.
    for name in names {
        let mut lower_camel = name.clone();
        if let Some(first) = lower_camel.get_mut(..1) {
            first.make_ascii_lowercase();
        }
        let spellings = [
            lower_camel,
            name.to_ascii_lowercase(),
            format!("gl_{name}"),
            name.clone(),
        ];
        if let Some(at) = spellings.iter().find_map(|s| first_word(text, s)) {
            error.location = Some(at);
            return error;
        }
    }
    error.location = definition_of(text, &m.entry);
    error
}

/// The first whole-word occurrence of `word` in `text`.
fn first_word(text: &str, word: &str) -> Option<TextLocation> {
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    for (index, line) in text.lines().enumerate() {
        let bytes = line.as_bytes();
        let mut from = 0;
        while let Some(found) = line.get(from..).and_then(|rest| rest.find(word)) {
            let start = from + found;
            let end = start + word.len();
            let before = start == 0 || !is_ident(bytes[start - 1]);
            let after = end >= bytes.len() || !is_ident(bytes[end]);
            if before && after {
                return Some(TextLocation {
                    line: u32::try_from(index + 1).ok()?,
                    column: u32::try_from(start + 1).ok()?,
                    length: u32::try_from(word.len()).ok()?,
                });
            }
            from = end;
        }
    }
    None
}

/// naga's stage for `stage`; an error for the stages only glslang compiles.
fn naga_stage(stage: Stage) -> Result<naga::ShaderStage, CompileError> {
    stage.to_naga().ok_or_else(|| {
        CompileError::new(
            CompilePhase::Unsupported,
            format!("naga cannot compile {stage} shaders (use compiler = \"glslang\")"),
            None,
        )
    })
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
        SourceLanguage::Slang => Err(CompileError::new(
            CompilePhase::Unsupported,
            "naga cannot read Slang (use compiler = \"slang\")".into(),
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
    match on_compile_stack(|| catch_unwind(AssertUnwindSafe(f))) {
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
    contain_named("naga", phase, f)
}

/// Runs `f` on its own stack of [`COMPILE_STACK_BYTES`], turning a panic inside `compiler`
/// into a [`CompileError`] of the given phase.
fn contain_named<T>(
    compiler: &str,
    phase: CompilePhase,
    f: impl FnOnce() -> Result<T, CompileError>,
) -> Result<T, CompileError> {
    match on_compile_stack(|| catch_unwind(AssertUnwindSafe(f))) {
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

#[cfg(test)]
mod tests {
    use super::*;

    const PUSH: &str = "#version 450
layout(push_constant) uniform Push { mat4 mvp; vec4 tint; } pc;
layout(location = 0) in vec3 a_pos;
layout(location = 0) out vec4 v_tint;
void main() {
    v_tint = pc.tint;
    gl_Position = pc.mvp * vec4(a_pos, 1.0);
}
";

    const SPEC: &str = "#version 450
layout(constant_id = 0) const int TAPS = 4;
layout(constant_id = 1) const float STRENGTH = 0.75;
layout(location = 0) in vec2 v_uv;
layout(location = 0) out vec4 o_color;
void main() {
    vec4 c = vec4(0.0);
    for (int i = 0; i < TAPS; i++) {
        c += vec4(v_uv * float(i), STRENGTH, 1.0);
    }
    o_color = c / float(TAPS);
}
";

    const NO_DEFAULT: &str = "override fog_density: f32;
@id(7) override steps: u32 = 3u;

@fragment
fn fs_main() -> @location(0) vec4<f32> {
    var c = vec4<f32>(0.0);
    for (var i = 0u; i < steps; i++) {
        c += vec4<f32>(fog_density);
    }
    return c;
}
";

    const INVERSE: &str = "#version 450
layout(location = 0) in vec3 a_x;
layout(location = 1) in vec3 a_y;
void main() {
    mat3 back = inverse(mat3(a_x, a_y, cross(a_x, a_y)));
    gl_Position = vec4(back * a_x, 1.0);
}
";

    fn all_targets() -> Vec<TargetConfig> {
        Target::ALL.into_iter().map(TargetConfig::new).collect()
    }

    fn run(
        language: SourceLanguage,
        text: &str,
        stage: Stage,
        entry: &str,
        constants: &Constants,
        targets: &[TargetConfig],
    ) -> Result<Vec<TargetResult>, CompileError> {
        let request = CompileRequest {
            language,
            text,
            stage,
            entry,
            constants,
        };
        let targets: Vec<Option<&TargetConfig>> = targets.iter().map(Some).collect();
        Ok(compile_targets(&request, &targets)?
            .into_iter()
            .map(|r| r.expect("every target was asked for"))
            .collect())
    }

    fn text_of(result: &TargetResult) -> String {
        String::from_utf8(result.clone().expect("target built")).expect("text target")
    }

    #[test]
    fn push_constants_build_for_every_target_by_default() {
        let targets = all_targets();
        let results = run(
            SourceLanguage::Glsl,
            PUSH,
            Stage::Vertex,
            "main",
            &Constants::new(),
            &targets,
        )
        .unwrap();
        for (target, result) in targets.iter().zip(&results) {
            assert!(result.is_ok(), "{}: {result:?}", target.target());
        }
        // naga's old default set refuses them: that is what kiln used to validate with.
        let narrow = TargetConfig::new(Target::Spirv).with_capabilities(Capabilities::default());
        let results = run(
            SourceLanguage::Glsl,
            PUSH,
            Stage::Vertex,
            "main",
            &Constants::new(),
            &[narrow],
        )
        .unwrap();
        let error = results[0].clone().unwrap_err();
        assert_eq!(error.phase, CompilePhase::Validate, "{error}");
        assert!(error.message.contains("IMMEDIATES"), "{error}");
    }

    #[test]
    fn validation_runs_once_per_distinct_capability_set() {
        let count = |targets: &[TargetConfig]| {
            VALIDATIONS.with(|n| n.set(0));
            run(
                SourceLanguage::Glsl,
                PUSH,
                Stage::Vertex,
                "main",
                &Constants::new(),
                targets,
            )
            .unwrap();
            VALIDATIONS.with(|n| n.get())
        };
        let same = Capabilities::IMMEDIATES;
        let targets: Vec<TargetConfig> = Target::ALL
            .into_iter()
            .map(|t| TargetConfig::new(t).with_capabilities(same))
            .collect();
        assert_eq!(count(&targets), 1);
        // The defaults: SPIR-V, MSL, HLSL, GLSL and WGSL support five different sets, which
        // all hold push constants: one validation, under what they share, serves them all.
        assert_eq!(count(&all_targets()), 1);
        // A module using more than the sets share (no `IMMEDIATES` in one set): one try
        // under what they share, then one per distinct set, each target failing or not alone.
        let mut two = targets.clone();
        two[1] = two[1].clone().with_capabilities(Capabilities::FLOAT64);
        assert_eq!(count(&two), 3);
    }

    #[test]
    fn a_capability_outside_one_target_s_set_fails_that_target_alone() {
        let doubles = "#version 450
layout(location = 0) out vec4 o_color;
void main() {
    double d = 0.5;
    o_color = vec4(float(d * 2.0));
}
";
        let targets = [
            TargetConfig::new(Target::Spirv),
            TargetConfig::new(Target::Msl),
        ];
        let results = run(
            SourceLanguage::Glsl,
            doubles,
            Stage::Fragment,
            "main",
            &Constants::new(),
            &targets,
        )
        .unwrap();
        assert!(results[0].is_ok(), "{:?}", results[0]);
        let error = results[1].clone().unwrap_err();
        assert_eq!(error.phase, CompilePhase::Validate, "{error}");
        assert!(error.message.contains("FLOAT64"), "{error}");
    }

    #[test]
    fn specialization_constants_take_their_defaults_or_the_manifest_s_values() {
        let targets = all_targets();
        let defaults = run(
            SourceLanguage::Glsl,
            SPEC,
            Stage::Fragment,
            "main",
            &Constants::new(),
            &targets,
        )
        .unwrap();
        for (target, result) in targets.iter().zip(&defaults) {
            assert!(result.is_ok(), "{}: {result:?}", target.target());
        }
        assert!(
            text_of(&defaults[2]).contains("0.75"),
            "HLSL lacks the default"
        );
        // By id and by name.
        let constants = Constants::from([
            ("1".to_owned(), ConstantValue(0.125)),
            ("TAPS".to_owned(), ConstantValue(9.0)),
        ]);
        let set = run(
            SourceLanguage::Glsl,
            SPEC,
            Stage::Fragment,
            "main",
            &constants,
            &targets,
        )
        .unwrap();
        let msl = text_of(&set[1]);
        assert!(msl.contains("0.125"), "{msl}");
        assert!(msl.contains('9'), "{msl}");
        assert!(!msl.contains("0.75"), "{msl}");
        assert_ne!(defaults[0], set[0], "SPIR-V ignores the values");
    }

    #[test]
    fn a_constant_without_value_or_default_is_an_error_naming_it_at_its_line() {
        let targets = all_targets();
        let error = run(
            SourceLanguage::Wgsl,
            NO_DEFAULT,
            Stage::Fragment,
            "fs_main",
            &Constants::new(),
            &targets,
        )
        .unwrap_err();
        assert_eq!(error.phase, CompilePhase::Constants, "{error}");
        assert!(error.message.contains("`fog_density`"), "{error}");
        assert_eq!(error.location.map(|l| l.line), Some(1), "{error:?}");
        let given = Constants::from([("fog_density".to_owned(), ConstantValue(0.5))]);
        let results = run(
            SourceLanguage::Wgsl,
            NO_DEFAULT,
            Stage::Fragment,
            "fs_main",
            &given,
            &targets,
        )
        .unwrap();
        for (target, result) in targets.iter().zip(&results) {
            assert!(result.is_ok(), "{}: {result:?}", target.target());
        }
        assert!(text_of(&results[4]).contains("0.5"), "WGSL lacks the value");
        // A constant the shader does not declare is an error listing those it does.
        let unknown = Constants::from([
            ("fog_density".to_owned(), ConstantValue(0.5)),
            ("fog_colour".to_owned(), ConstantValue(1.0)),
        ]);
        let error = run(
            SourceLanguage::Wgsl,
            NO_DEFAULT,
            Stage::Fragment,
            "fs_main",
            &unknown,
            &targets,
        )
        .unwrap_err();
        assert!(error.message.contains("`fog_colour`"), "{error}");
        assert!(error.message.contains("`steps` (constant_id 7)"), "{error}");
    }

    #[test]
    fn a_back_end_failure_fails_its_target_alone_and_points_at_the_call() {
        let targets = all_targets();
        let results = run(
            SourceLanguage::Glsl,
            INVERSE,
            Stage::Vertex,
            "main",
            &Constants::new(),
            &targets,
        )
        .unwrap();
        assert!(results[0].is_ok(), "SPIR-V: {:?}", results[0]);
        assert!(results[3].is_ok(), "GLSL: {:?}", results[3]);
        for failed in [&results[1], &results[2]] {
            let error = failed.clone().unwrap_err();
            assert_eq!(error.phase, CompilePhase::Emit, "{error}");
            assert!(error.message.contains("Inverse"), "{error}");
            assert_eq!(error.location.map(|l| l.line), Some(5), "{error:?}");
            assert_eq!(error.location.map(|l| l.column), Some(17), "{error:?}");
        }
    }

    #[test]
    fn a_built_in_one_back_end_lacks_fails_that_target_at_its_use() {
        let point = "#version 450
layout(location = 0) in vec3 a_pos;
void main() {
    gl_Position = vec4(a_pos, 1.0);
    gl_PointSize = 4.0;
}
";
        let targets = all_targets();
        let results = run(
            SourceLanguage::Glsl,
            point,
            Stage::Vertex,
            "main",
            &Constants::new(),
            &targets,
        )
        .unwrap();
        assert!(results[0].is_ok(), "SPIR-V: {:?}", results[0]);
        let error = results[2].clone().unwrap_err();
        assert!(error.message.contains("PointSize"), "{error}");
        assert_eq!(error.location.map(|l| l.line), Some(5), "{error:?}");
    }
}
