//! Slang as a pass's front end: a variant's [`SlangBundle`] becomes a [`SlangRequest`] for
//! the process-wide worker pool, one request for all the variant's targets (one front-end
//! pass). Each target takes the route that builds the most of the public Vulkan samples'
//! 345 Slang entry points (measured with `scripts/slang_corpus.sh` and
//! `scripts/slang_reference.py`, `docs/design-notes.md`):
//!
//! - SPIR-V: Slang's own (its profile from the project's spirv target);
//! - HLSL and WGSL: Slang writes them (339 and 264 of 345, where SPIRV-Cross and naga from
//!   its SPIR-V give 283 and 158); where Slang fails, the SPIR-V translator's, if it can;
//! - MSL and GLSL: translated from Slang's SPIR-V by SPIRV-Cross, as glslang's are (293
//!   MSL, where Slang's Metal back end gives 278 and segfaults on 13 ray-tracing entry
//!   points; kiln's GLSL target is OpenGL's, which Slang does not write: its GLSL is Vulkan's).

use std::sync::OnceLock;

use super::{
    PoolOptions, SlangBundle, SlangError, SlangFormat, SlangPool, SlangRequest, SlangTarget,
    WorkerCommand,
};
use crate::compile::{
    cross, CompileError, CompilePhase, CompileRequest, MatrixLayout, SlangOptions, Stage, Target,
    TargetConfig, TargetResult, TextLocation,
};

/// How the pool starts its workers, when the program says (the CLI runs itself with
/// `slang-worker`); else [`WorkerCommand::locate`].
static WORKER_COMMAND: OnceLock<WorkerCommand> = OnceLock::new();

/// The process's pool, started on the first Slang compile.
static POOL: OnceLock<Result<SlangPool, SlangError>> = OnceLock::new();

/// The version label of the library the workers load, asked once.
static VERSION: OnceLock<String> = OnceLock::new();

/// Says how to start Slang workers; only the first call before any Slang compile counts.
pub fn set_worker_command(command: WorkerCommand) {
    let _ = WORKER_COMMAND.set(command);
}

fn pool() -> Result<&'static SlangPool, SlangError> {
    POOL.get_or_init(|| {
        let command = match WORKER_COMMAND.get() {
            Some(command) => command.clone(),
            None => WorkerCommand::locate()?,
        };
        Ok(SlangPool::new(command, PoolOptions::default()))
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// The Slang library's version as the store namespace and the source revision name it:
/// `2026.12` (the build tag), or `unavailable` when no library can be loaded (nothing is
/// ever compiled under that name: every Slang compile then fails, saying why).
///
/// Read in this process (a `dlopen` and one call: 2 to 35 ms here), not from a worker (a
/// process and a Slang session: about 0.4 s, which every warm build paid before). The
/// workers are then given the library this process loaded, so the version is theirs.
pub fn version_label() -> &'static str {
    VERSION.get_or_init(|| match super::version() {
        Ok(version) => version,
        Err(_) => "unavailable".to_owned(),
    })
}

/// How a target of a Slang shader is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    /// Slang's SPIR-V itself.
    Spirv,
    /// Slang writes it; where it cannot, the SPIR-V translator.
    Slang(SlangFormat),
    /// The SPIR-V translator (`compile::cross`).
    Translated,
}

fn route(target: Target) -> Route {
    match target {
        Target::Spirv => Route::Spirv,
        Target::Hlsl => Route::Slang(SlangFormat::Hlsl),
        Target::Wgsl => Route::Slang(SlangFormat::Wgsl),
        // Reflection reads Slang's SPIR-V, as every translator does.
        Target::Msl | Target::Glsl | Target::Reflection => Route::Translated,
    }
}

/// The "unsupported by target" error of a Slang shader of `stage` for `target`, when it is
/// known without compiling: WGSL has only vertex, fragment and compute shaders; MSL and GLSL
/// follow the translator's stage table. Slang's HLSL has every stage.
pub fn refused(stage: Stage, target: Target) -> Option<CompileError> {
    match route(target) {
        Route::Spirv => None,
        Route::Slang(SlangFormat::Wgsl) => {
            (!matches!(stage, Stage::Vertex | Stage::Fragment | Stage::Compute)).then(|| {
                CompileError::new(
                    CompilePhase::Unsupported,
                    format!("{stage} shaders are unsupported by target wgsl (WGSL has only vertex, fragment and compute shaders)"),
                    None,
                )
            })
        }
        Route::Slang(_) => None,
        Route::Translated => super::super::glslang::refused(stage, target),
    }
}

/// The profile Slang writes `target` with: the spirv target's SPIR-V version (`spirv_1_x`;
/// without a spirv target, SPIR-V 1.3, which every other target can translate from) or the
/// hlsl target's shader model (`sm_6_0`); Slang's default for WGSL.
fn profile(format: SlangFormat, targets: &[Option<&TargetConfig>]) -> Option<String> {
    match format {
        SlangFormat::Spirv => {
            let (major, minor) = targets
                .iter()
                .flatten()
                .find_map(|t| t.spirv_version())
                .unwrap_or((1, 3));
            Some(format!("spirv_{major}_{minor}"))
        }
        SlangFormat::Hlsl => targets
            .iter()
            .flatten()
            .find(|t| t.target() == Target::Hlsl)
            .map(|t| format!("sm_{}_{}", t.version().0, t.version().1)),
        _ => None,
    }
}

/// Compiles a Slang variant (its text is a [`SlangBundle`]) for `targets`.
pub fn compile_targets(
    options: &SlangOptions,
    request: &CompileRequest<'_>,
    targets: &[Option<&TargetConfig>],
) -> Result<Vec<Option<TargetResult>>, CompileError> {
    let bundle = SlangBundle::decode(request.text)?;
    // SPIR-V first (every other route may need it), then each format Slang writes itself.
    let mut formats = vec![SlangFormat::Spirv];
    for target in targets.iter().flatten() {
        if let Route::Slang(format) = route(target.target()) {
            if !formats.contains(&format) {
                formats.push(format);
            }
        }
    }
    let slang = SlangRequest {
        main: bundle.main.to_owned(),
        files: bundle
            .files
            .iter()
            .map(|(path, text)| ((*path).to_owned(), std::sync::Arc::from(*text)))
            .collect(),
        search_dirs: bundle.search_dirs.iter().map(|d| (*d).to_owned()).collect(),
        defines: bundle
            .defines
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect(),
        entry: request.entry.to_owned(),
        stage: request.stage,
        targets: formats
            .iter()
            .map(|&format| SlangTarget {
                format,
                profile: profile(format, targets),
            })
            .collect(),
        matrix_layout_column_major: options.matrix_layout == MatrixLayout::ColumnMajor,
        optimization: options.optimization.level(),
    };
    let what = |message: String| CompileError::new(CompilePhase::Parse, message, None);
    let response = pool()
        .and_then(|pool| pool.compile(&slang))
        .map_err(|e| what(e.to_string()))?;
    let mut outputs = response.outputs.into_iter();
    let bytes = match outputs.next() {
        Some(Ok(bytes)) => bytes,
        Some(Err(diagnostics)) => return Err(slang_error(&diagnostics, &bundle, request.text)),
        None => return Err(what("Slang wrote no SPIR-V".into())),
    };
    let written: Vec<(SlangFormat, Result<Vec<u8>, String>)> =
        formats[1..].iter().copied().zip(outputs).collect();
    let words = spirv_words(&bytes).ok_or_else(|| what("Slang wrote malformed SPIR-V".into()))?;
    let words = cross::specialize(&words, request.constants)?;
    let specialized = !request.constants.is_empty();
    // Slang names the SPIR-V entry point `main`, as slangc does; the translators look for
    // the name the module has.
    let entry = sole_entry_point(&words).unwrap_or_else(|| request.entry.to_owned());
    let translate =
        |target: &TargetConfig| cross::from_spirv(&words, request.stage, &entry, target);
    Ok(targets
        .iter()
        .map(|target| {
            target.map(|target| match route(target.target()) {
                Route::Spirv => Ok(words.iter().flat_map(|w| w.to_le_bytes()).collect()),
                Route::Translated => translate(target),
                Route::Slang(format) => {
                    // Slang's own text keeps specialization constants as Slang wrote them;
                    // with manifest values to apply, the translator's (which applies them).
                    let direct = written.iter().find(|(f, _)| *f == format).map(|(_, r)| r);
                    match direct {
                        Some(Ok(text)) if !specialized => Ok(text.clone()),
                        Some(Err(slang)) => translate(target).map_err(|e| {
                            CompileError::new(
                                e.phase,
                                format!(
                                    "{e}; Slang's own {} failed too: {}",
                                    target.target(),
                                    slang.trim()
                                ),
                                e.location,
                            )
                        }),
                        _ => translate(target),
                    }
                }
            })
        })
        .collect())
}

/// The name of a SPIR-V module's entry point when it has exactly one (`OpEntryPoint`).
fn sole_entry_point(words: &[u32]) -> Option<String> {
    const OP_ENTRY_POINT: u32 = 15;
    let mut names = Vec::new();
    let mut at = 5;
    while let Some(&first) = words.get(at) {
        let count = (first >> 16) as usize;
        if count == 0 {
            return None;
        }
        if first & 0xffff == OP_ENTRY_POINT {
            let literal = words.get(at + 3..at + count)?;
            let bytes: Vec<u8> = literal.iter().flat_map(|w| w.to_le_bytes()).collect();
            let end = bytes.iter().position(|&b| b == 0)?;
            names.push(String::from_utf8(bytes[..end].to_vec()).ok()?);
        }
        at += count;
    }
    match names.len() {
        1 => names.pop(),
        _ => None,
    }
}

fn spirv_words(bytes: &[u8]) -> Option<Vec<u32>> {
    if !bytes.len().is_multiple_of(4) || bytes.len() < 20 {
        return None;
    }
    let words: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    (words[0] == 0x0723_0203).then_some(words)
}

/// Slang's diagnostics as a compile error, located at the first error's file and line (Slang
/// writes `--> path:line:column`, the path as kiln gave it) as a line of the bundle, which the
/// variant's line map takes back to the file; the message keeps Slang's whole text.
fn slang_error(diagnostics: &str, bundle: &SlangBundle<'_>, text: &str) -> CompileError {
    let location = diagnostics.lines().find_map(|line| {
        let place = line.trim_start().strip_prefix("--> ")?;
        let mut parts = place.rsplitn(3, ':');
        let column: u32 = parts.next()?.trim().parse().ok()?;
        let line: u32 = parts.next()?.trim().parse().ok()?;
        let path = parts.next()?;
        Some(TextLocation {
            line: bundle.bundle_line(text, path, line)?,
            column,
            length: 1,
        })
    });
    CompileError::new(CompilePhase::Parse, diagnostics.trim().to_owned(), location)
}
