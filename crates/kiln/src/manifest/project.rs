//! `[project]` and `[cache]`: targets and their capabilities, limits, the project's include
//! directories and the remote cache.

use super::error::{Context, ManifestError};
use crate::compile::{parse_capability, Capabilities, TargetConfig};
use crate::preprocess::normalize_entry;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// At most this many variants per shader: a product of axes can explode, and a typo should
/// fail loudly instead of queueing millions of compiles.
pub const MAX_VARIANTS_PER_SHADER: usize = 65_536;

/// The default cap on the project's variants ((shader, pass, keyword set) triples), all
/// shaders together; `[project] max_variants` changes it.
pub const DEFAULT_MAX_VARIANTS: usize = 1 << 20;

/// Limits that keep one input from exhausting the machine; `[project]` may change them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Limits {
    /// At most this many variants in the project (`max_variants`, default
    /// [`DEFAULT_MAX_VARIANTS`]); a shader has at most [`MAX_VARIANTS_PER_SHADER`] keyword
    /// sets, or `max_variants` if lower.
    pub max_variants: usize,
    /// At most this many bytes in one source or include file (`max_source_bytes`, default
    /// [`crate::boundary::DEFAULT_MAX_SOURCE_BYTES`], 4 MiB).
    pub max_source_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_variants: DEFAULT_MAX_VARIANTS,
            max_source_bytes: crate::boundary::DEFAULT_MAX_SOURCE_BYTES,
        }
    }
}

/// `[cache]`: where the shared remote cache is (`remote = "redis://host:6379/0"`) and
/// whether this project only reads it (`read_only = true`).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct CacheSettings {
    /// The remote cache's URL (may hold a password: never printed).
    pub remote: Option<String>,
    /// Read the remote, never write it.
    pub read_only: bool,
}

impl std::fmt::Debug for CacheSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may carry a password.
        f.debug_struct("CacheSettings")
            .field("remote", &self.remote.as_ref().map(|_| "<set>"))
            .field("read_only", &self.read_only)
            .finish()
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCache {
    remote: Option<String>,
    #[serde(default)]
    read_only: bool,
}

impl RawCache {
    /// A blank `remote` is no remote.
    pub(super) fn settings(&self) -> CacheSettings {
        CacheSettings {
            remote: self.remote.clone().filter(|url| !url.trim().is_empty()),
            read_only: self.read_only,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProject {
    pub(super) targets: Spanned<Vec<Spanned<RawTarget>>>,
    max_variants: Option<Spanned<u64>>,
    max_source_bytes: Option<Spanned<u64>>,
    #[serde(default)]
    pub(super) include_dirs: Vec<Spanned<String>>,
    capabilities: Option<Spanned<Vec<Spanned<String>>>>,
    /// Usage files (`kiln usage`): build the keyword sets they list instead of the axes'.
    #[serde(default)]
    pub(super) variants_from: Vec<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum RawTarget {
    Name(String),
    WithOptions(BTreeMap<String, toml::Value>),
}

impl Context<'_> {
    pub(super) fn limits(&self, project: &RawProject) -> Result<Limits, ManifestError> {
        let mut limits = Limits::default();
        if let Some(max) = &project.max_variants {
            limits.max_variants = usize::try_from(*max.get_ref())
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| {
                    self.error(
                        Some(max.span()),
                        "`max_variants` must be a positive number".into(),
                    )
                })?;
        }
        if let Some(max) = &project.max_source_bytes {
            limits.max_source_bytes = *max.get_ref();
            if limits.max_source_bytes == 0 {
                return Err(self.error(
                    Some(max.span()),
                    "`max_source_bytes` must be a positive number".into(),
                ));
            }
        }
        Ok(limits)
    }

    /// `[project] capabilities`: the validator capabilities of every target without its own.
    pub(super) fn project_capabilities(
        &self,
        project: &RawProject,
    ) -> Result<Option<Capabilities>, ManifestError> {
        let Some(names) = &project.capabilities else {
            return Ok(None);
        };
        let mut capabilities = Capabilities::empty();
        for name in names.get_ref() {
            capabilities |= parse_capability(name.get_ref())
                .map_err(|e| self.error(Some(name.span()), e.to_string()))?;
        }
        Ok(Some(capabilities))
    }

    pub(super) fn targets(
        &self,
        raw: &Spanned<Vec<Spanned<RawTarget>>>,
        project_capabilities: Option<Capabilities>,
    ) -> Result<Vec<TargetConfig>, ManifestError> {
        let mut targets = Vec::new();
        for target in raw.get_ref() {
            let config = self.target(target, project_capabilities)?;
            if targets.iter().any(|t: &TargetConfig| {
                t.target() == config.target() && t.options_string() == config.options_string()
            }) {
                return Err(self.error(
                    Some(target.span()),
                    format!("target `{}` is listed twice", config.target()),
                ));
            }
            targets.push(config);
        }
        if targets.is_empty() {
            return Err(self.error(Some(raw.span()), "`targets` is empty".into()));
        }
        // Reflection reads the spirv target's SPIR-V: its version is part of its identity.
        let spirv = targets.iter().find_map(TargetConfig::spirv_version);
        Ok(targets.into_iter().map(|t| t.reflecting(spirv)).collect())
    }

    /// One entry of `targets`, with its own capabilities, else the project's.
    fn target(
        &self,
        target: &Spanned<RawTarget>,
        project_capabilities: Option<Capabilities>,
    ) -> Result<TargetConfig, ManifestError> {
        let (config, own_capabilities) = match target.get_ref() {
            RawTarget::Name(name) => {
                let config = TargetConfig::parse(name, &BTreeMap::new())
                    .map_err(|e| self.error(Some(target.span()), e.to_string()))?;
                (config, None)
            }
            RawTarget::WithOptions(table) => self.target_table(table, target.span())?,
        };
        Ok(match own_capabilities.or(project_capabilities) {
            Some(capabilities) => config.with_capabilities(capabilities),
            None => config,
        })
    }

    /// `{ name = "msl", version = "2.0", capabilities = [...] }`: every key but `name` and
    /// `capabilities` is a target option, its value as text.
    fn target_table(
        &self,
        table: &BTreeMap<String, toml::Value>,
        span: Range<usize>,
    ) -> Result<(TargetConfig, Option<Capabilities>), ManifestError> {
        let mut own_capabilities = None;
        let mut options = BTreeMap::new();
        let mut name = None;
        for (k, v) in table {
            if k == "capabilities" {
                own_capabilities = Some(self.capability_list(v, span.clone())?);
                continue;
            }
            let value = match v {
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            if k == "name" {
                name = Some(value);
            } else {
                options.insert(k.clone(), value);
            }
        }
        let name = name
            .ok_or_else(|| self.error(Some(span.clone()), "a target table needs `name`".into()))?;
        let config = TargetConfig::parse(&name, &options)
            .map_err(|e| self.error(Some(span), e.to_string()))?;
        Ok((config, own_capabilities))
    }

    /// A target table's `capabilities = [...]` (inline tables carry no spans of their own:
    /// errors point at the target).
    fn capability_list(
        &self,
        value: &toml::Value,
        span: Range<usize>,
    ) -> Result<Capabilities, ManifestError> {
        let toml::Value::Array(names) = value else {
            return Err(self.error(
                Some(span),
                "`capabilities` must be a list of capability names".into(),
            ));
        };
        let mut capabilities = Capabilities::empty();
        for name in names {
            let toml::Value::String(name) = name else {
                return Err(self.error(
                    Some(span),
                    "`capabilities` must be a list of capability names".into(),
                ));
            };
            capabilities |= parse_capability(name)
                .map_err(|e| self.error(Some(span.clone()), e.to_string()))?;
        }
        Ok(capabilities)
    }

    /// Checks include directories: root-relative, `/`-separated, never leaving the root
    /// (the preprocessor's own normalisation). `inherited` (the project's) follow `dirs`,
    /// each directory once.
    pub(super) fn include_dirs(
        &self,
        dirs: &[Spanned<String>],
        inherited: &[PathBuf],
    ) -> Result<Vec<PathBuf>, ManifestError> {
        let mut out: Vec<PathBuf> = Vec::new();
        for dir in dirs {
            let text = dir.get_ref();
            if text.contains('\\') {
                return Err(self.error(
                    Some(dir.span()),
                    format!("include directory `{text}`: use '/' as the path separator"),
                ));
            }
            let normal = normalize_entry(Path::new(text))
                .map(PathBuf::from)
                .map_err(|why| {
                    self.error(
                        Some(dir.span()),
                        format!(
                            "include directory `{text}` must be inside the project root: {why}"
                        ),
                    )
                })?;
            if !out.contains(&normal) {
                out.push(normal);
            }
        }
        for dir in inherited {
            if !out.contains(dir) {
                out.push(dir.clone());
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use crate::manifest::test_manifests::{parse, with_axes, LIT};
    use std::path::PathBuf;

    #[test]
    fn include_dirs_are_normalised_shader_first_and_stay_inside_the_root() {
        let with_dirs = |project: &str, shader: &str| {
            LIT.replace(
                "targets = [",
                &format!("include_dirs = {project}\ntargets = ["),
            )
            .replace(
                "source = \"shaders/lit.wgsl\"",
                &format!("source = \"shaders/lit.wgsl\"\ninclude_dirs = {shader}"),
            )
        };
        let m = parse(&with_dirs(
            r#"["shaders/include", "common/./x/.."]"#,
            r#"["shaders/lit", "common"]"#,
        ))
        .unwrap();
        assert_eq!(
            m.shaders[0].include_dirs,
            ["shaders/lit", "common", "shaders/include"].map(PathBuf::from)
        );
        assert!(parse(LIT).unwrap().shaders[0].include_dirs.is_empty());
        for (project, shader, line) in [
            (r#"["../outside"]"#, "[]", 3),
            ("[]", r#"["/usr/include"]"#, 9),
            ("[]", r#"["a/../../b"]"#, 9),
            (r#"["a\\b"]"#, "[]", 3),
        ] {
            let e = parse(&with_dirs(project, shader)).unwrap_err();
            assert!(e.message.contains("include directory"), "{e}");
            assert_eq!(e.line, line, "{e}");
        }
    }

    #[test]
    fn the_project_variant_limit_is_configurable() {
        // 2 passes x 2^10 keyword sets.
        let text = with_axes(10, 2);
        assert_eq!(parse(&text).unwrap().variant_count(), 2048);
        let limited = text.replace("[project]", "[project]\nmax_variants = 2000");
        let e = parse(&limited).unwrap_err();
        assert!(e.message.contains("more than 2000 variants"), "{e}");
        assert!(e.message.contains("max_variants"), "{e}");
        let m = parse(&text.replace("[project]", "[project]\nmax_variants = 2048")).unwrap();
        assert_eq!(m.limits.max_variants, 2048);
        let e = parse(&text.replace("[project]", "[project]\nmax_variants = 0")).unwrap_err();
        assert!(e.message.contains("positive"), "{e}");
    }

    #[test]
    fn reflection_is_a_target_that_records_the_spirv_target_s_version() {
        use crate::compile::Target;
        let listed = |targets: &str| {
            let text = LIT.replace(
                "targets = [\"spirv\", { name = \"msl\", version = \"2.0\" }]",
                &format!("targets = {targets}"),
            );
            parse(&text).map(|m| m.targets)
        };
        let targets = listed(r#"["reflection", { name = "spirv", version = "1.3" }]"#).unwrap();
        assert_eq!(targets[0].target(), Target::Reflection);
        assert_eq!(targets[0].options_string(), "spirv=1.3");
        assert_eq!(targets[0].reflected_spirv(), Some((1, 3)));
        let alone = listed(r#"["msl", "reflection"]"#).unwrap();
        assert_eq!(alone[1].options_string(), "spirv=none");
        let e = listed(r#"[{ name = "reflection", version = "1.3" }]"#).unwrap_err();
        assert!(e.message.contains("no option `version`"), "{e}");
        let e = listed(r#"["reflections"]"#).unwrap_err();
        assert!(
            e.message
                .contains("one of spirv, msl, hlsl, glsl, wgsl, reflection"),
            "{e}"
        );
    }

    #[test]
    fn capabilities_default_per_target_and_are_set_per_project_and_per_target() {
        use crate::compile::{supported_capabilities, Capabilities, Target};
        let m = parse(LIT).unwrap();
        assert_eq!(
            m.targets[1].capabilities(),
            supported_capabilities(Target::Msl)
        );
        let text = LIT.replace(
            "[project]\ntargets = [\"spirv\", { name = \"msl\", version = \"2.0\" }]",
            "[project]\ncapabilities = [\"push_constant\", \"FLOAT64\"]\ntargets = [\"spirv\", { name = \"msl\", version = \"2.0\", capabilities = [\"immediates\"] }]",
        );
        let m = parse(&text).unwrap();
        assert_eq!(
            m.targets[0].capabilities(),
            Capabilities::IMMEDIATES | Capabilities::FLOAT64
        );
        assert_eq!(m.targets[1].capabilities(), Capabilities::IMMEDIATES);
        let e = parse(&text.replace("\"FLOAT64\"", "\"FLOAT65\"")).unwrap_err();
        assert!(e.message.contains("unknown capability `FLOAT65`"), "{e}");
        assert_eq!(e.line, 3, "{e}");
        let e = parse(&text.replace("[\"immediates\"]", "[\"telepathy\"]")).unwrap_err();
        assert!(e.message.contains("unknown capability `telepathy`"), "{e}");
        assert_eq!(e.line, 4, "{e}");
    }
}
