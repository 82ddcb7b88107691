//! The project manifest (`kiln.toml`): targets, shaders, passes and keyword axes, parsed and
//! checked into a [`Manifest`] whose every error points at a line of the file.
//!
//! One module per section of the file: `project` (`[project]`, `[cache]`), `shader`
//! (`[[shader]]`), `keywords` (its axes and variants), `pass` (`[shader.passes.*]`),
//! `glslang` (`[shader.glslang]`), `output` (`[output]`), `constants` (specialization constants) and `error`.

mod changes;
mod constants;
mod error;
mod glslang;
mod keywords;
mod output;
mod pass;
mod project;
mod shader;
mod slang;
#[cfg(test)]
mod test_manifests;
mod usage;

pub use changes::{changes, ManifestChange};
pub use error::ManifestError;
pub use keywords::NONE_KEYWORD;
pub use output::{OutputLayout, OutputSettings};
pub use pass::PassSpec;
pub use project::{CacheSettings, Limits, DEFAULT_MAX_VARIANTS, MAX_VARIANTS_PER_SHADER};
pub use shader::{KeywordSetError, ShaderSpec};
pub use usage::{check_used, parse_usage, write_usage, UsageEntry, UsedVariant};

use crate::compile::TargetConfig;
use error::Context;
use project::{RawCache, RawProject};
use serde::Deserialize;
use shader::RawShader;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A checked manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// The manifest file.
    pub path: PathBuf,
    /// The directory holding the manifest: sources and includes must stay inside it.
    pub root: PathBuf,
    /// Targets every variant is compiled for.
    pub targets: Vec<TargetConfig>,
    /// The shaders, in manifest order.
    pub shaders: Vec<Arc<ShaderSpec>>,
    /// Variant and source-size limits.
    pub limits: Limits,
    /// `[cache]`: the remote cache (never part of any artifact's identity).
    pub cache: CacheSettings,
    /// `[output]`: the outputs' layout (never part of any artifact's identity).
    pub output: OutputSettings,
    /// `[project] variants_from`: the usage files the shaders' variants come from, absolute
    /// (empty: from the axes and `variants`).
    pub variants_from: Vec<PathBuf>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    project: RawProject,
    #[serde(default)]
    cache: RawCache,
    #[serde(default)]
    output: output::RawOutput,
    #[serde(default)]
    shader: Vec<RawShader>,
}

/// The largest manifest kiln reads: a hand-written file, 16 MiB is a hundred times the
/// largest one seen; `--manifest /dev/zero` must not read 10 GB first.
pub const MAX_MANIFEST_BYTES: u64 = 16 << 20;

impl Manifest {
    /// Reads and checks the manifest at `path`: a regular file (a FIFO would block the build
    /// forever) of at most [`MAX_MANIFEST_BYTES`].
    pub fn load(path: &Path) -> Result<Self, ManifestError> {
        use crate::boundary::SourceReadError;
        let text = crate::boundary::read_regular_file(path, MAX_MANIFEST_BYTES).map_err(|e| {
            let message = match e {
                SourceReadError::TooLarge { .. } => format!(
                    "cannot read manifest: larger than the {} MiB a manifest may have",
                    MAX_MANIFEST_BYTES >> 20
                ),
                e => format!("cannot read manifest: {e}"),
            };
            ManifestError {
                path: path.to_owned(),
                line: 1,
                span: None,
                message,
            }
        })?;
        let parent = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        // Absolute, so that file-watcher paths and include confinement compare as paths.
        let root = std::fs::canonicalize(parent).unwrap_or_else(|_| parent.to_owned());
        Self::parse(path, &root, &text)
    }

    /// Checks manifest `text` read from `path`; sources are relative to `root`.
    ///
    /// The steps: TOML into raw tables; the limits; the targets; each shader (its name,
    /// keywords, variants, defines and passes); the project's variant count.
    pub fn parse(path: &Path, root: &Path, text: &str) -> Result<Self, ManifestError> {
        let cx = Context { path, text };
        let raw: RawManifest =
            toml::from_str(text).map_err(|e| cx.error(e.span(), e.message().to_owned()))?;
        let limits = cx.limits(&raw.project)?;
        let capabilities = cx.project_capabilities(&raw.project)?;
        let targets = cx.targets(&raw.project.targets, capabilities)?;
        let project_dirs = cx.include_dirs(&raw.project.include_dirs, &[])?;
        let mut shaders = cx.shaders(&raw.shader, &limits, &targets, &project_dirs)?;
        let variants_from = match raw.project.variants_from.as_slice() {
            [] => Vec::new(),
            files => cx.apply_usage(files, root, &mut shaders, &limits)?,
        };
        Ok(Self {
            path: path.to_owned(),
            root: root.to_owned(),
            targets,
            shaders,
            limits,
            cache: raw.cache.settings(),
            output: cx.output(&raw.output)?,
            variants_from,
        })
    }

    /// The files besides the manifest itself that its value is read from (absolute): a
    /// change to one of them means reading the manifest again.
    pub fn inputs(&self) -> Vec<PathBuf> {
        self.variants_from.clone()
    }

    /// The total number of (shader, pass, keyword set) variants.
    pub fn variant_count(&self) -> usize {
        self.shaders
            .iter()
            .map(|s| s.variants.len() * s.passes.len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::test_manifests::{parse, LIT};

    #[test]
    fn malformed_toml_reports_line() {
        let e = parse("[project]\ntargets = [\"spirv\"\n").unwrap_err();
        assert!(e.line >= 2, "{e:?}");
    }

    #[test]
    fn unknown_target_option_and_stage_are_errors() {
        let e = parse(&LIT.replace("version = \"2.0\"", "colour = \"red\"")).unwrap_err();
        assert!(e.message.contains("no option `colour`"), "{e}");
        let e = parse(&LIT.replace("\"fragment\"", "\"pixel\"")).unwrap_err();
        assert!(e.message.contains("unknown stage `pixel`"), "{e}");
    }
}
