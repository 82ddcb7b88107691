//! `[[shader]]`: one shader's name, defines and include directories, and the `ShaderSpec`
//! assembled from its keywords, variants, passes and constants.

use super::error::{Context, ManifestError};
use super::glslang::RawGlslang;
use super::keywords::check_keyword;
use super::pass::{PassSpec, RawPass};
use super::project::Limits;
use super::slang::RawSlang;
use crate::boundary::check_name;
use crate::compile::{Constants, TargetConfig};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use toml::Spanned;

/// One shader: its passes and its variants.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ShaderSpec {
    /// Unique name.
    pub name: String,
    /// Every keyword the shader may be compiled with (the union of its axes and `keywords`).
    pub keywords: BTreeSet<String>,
    /// Keyword sets to build, each sorted and deduplicated, without repeats, in a stable order.
    pub variants: Vec<Vec<String>>,
    /// The axes as written (`_` for "none of this axis"), for reports: `variants` is what
    /// they multiply into, so they are no part of any identity.
    pub axes: Vec<Vec<String>>,
    /// Passes, by name order.
    pub passes: Vec<PassSpec>,
    /// Extra `#define`s for every variant of this shader.
    pub defines: BTreeMap<String, String>,
    /// Include directories, root-relative and normalised, in search order: the shader's
    /// own `include_dirs`, then the project's.
    pub include_dirs: Vec<PathBuf>,
    /// Specialization constant values (by name or `constant_id`) for every variant.
    pub constants: Constants,
    /// Specialization constant values for the variants holding a keyword, by keyword; they
    /// take precedence over the shader's and the pass's.
    pub keyword_constants: BTreeMap<String, Constants>,
}

impl ShaderSpec {
    /// The specialization constants of one variant: the shader's, then the pass's, then
    /// those of the variant's keywords, each overriding the one before (the manifest refuses
    /// two keywords of one variant that disagree).
    pub fn constants_for<'k>(
        &self,
        pass: &PassSpec,
        keywords: impl IntoIterator<Item = &'k str>,
    ) -> Constants {
        let mut constants = self.constants.clone();
        constants.extend(pass.constants.iter().map(|(k, v)| (k.clone(), *v)));
        for keyword in keywords {
            if let Some(values) = self.keyword_constants.get(keyword) {
                constants.extend(values.iter().map(|(k, v)| (k.clone(), *v)));
            }
        }
        constants
    }
}

/// Why a keyword set is not one a shader may be compiled with.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeywordSetError {
    /// Not a keyword's spelling at all.
    #[error("`{keyword}` is not a keyword: it {why}")]
    Invalid {
        /// The word.
        keyword: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A keyword the shader does not declare.
    #[error("shader `{shader}` declares no keyword `{keyword}` (declared: {declared})")]
    Unknown {
        /// The shader.
        shader: String,
        /// The word.
        keyword: String,
        /// The declared keywords, comma-separated (`none` when there are none).
        declared: String,
    },
    /// Two keywords of the set give one specialization constant different values.
    #[error("shader `{shader}`: keywords `{first}` and `{second}` give constant `{constant}` different values")]
    Conflicting {
        /// The shader.
        shader: String,
        /// The keyword applied first (in canonical order).
        first: String,
        /// The keyword that disagrees with it.
        second: String,
        /// The constant.
        constant: String,
    },
}

/// Two keywords of one set that give one constant different values.
pub(super) struct ConstantConflict<'a> {
    pub first: &'a str,
    pub second: &'a str,
    pub constant: &'a str,
    pub values: (crate::compile::ConstantValue, crate::compile::ConstantValue),
}

/// The first two keywords of `set` that disagree on a constant (the result would depend on
/// the order they are applied in), if any.
pub(super) fn constant_conflict<'a>(
    by_keyword: &'a BTreeMap<String, Constants>,
    set: impl IntoIterator<Item = &'a str>,
) -> Option<ConstantConflict<'a>> {
    let mut seen: BTreeMap<&str, (&str, crate::compile::ConstantValue)> = BTreeMap::new();
    for keyword in set {
        let Some((keyword, values)) = by_keyword.get_key_value(keyword) else {
            continue;
        };
        for (constant, value) in values {
            if let Some((other, v)) = seen.insert(constant, (keyword, *value)) {
                if v != *value {
                    return Some(ConstantConflict {
                        first: other,
                        second: keyword,
                        constant,
                        values: (v, *value),
                    });
                }
            }
        }
    }
    None
}

impl ShaderSpec {
    /// `keywords` (any order, repeats and `_` allowed) as the canonical set of a variant
    /// this shader may be compiled with, listed in the manifest or not: every keyword
    /// declared, no two disagreeing on a constant.
    pub fn keyword_set<'k>(
        &self,
        keywords: impl IntoIterator<Item = &'k str>,
    ) -> Result<Vec<String>, KeywordSetError> {
        let mut words = Vec::new();
        for word in keywords {
            if word == super::NONE_KEYWORD {
                continue;
            }
            if let Err(why) = kiln_runtime::canon::check_keyword_identifier(word) {
                return Err(KeywordSetError::Invalid {
                    keyword: word.to_owned(),
                    why,
                });
            }
            if !self.keywords.contains(word) {
                return Err(KeywordSetError::Unknown {
                    shader: self.name.clone(),
                    keyword: word.to_owned(),
                    declared: super::keywords::list(&self.keywords),
                });
            }
            words.push(word);
        }
        let set = kiln_runtime::canon::canonicalize(words);
        if let Some(conflict) = constant_conflict(&self.keyword_constants, set.iter().copied()) {
            return Err(KeywordSetError::Conflicting {
                shader: self.name.clone(),
                first: conflict.first.to_owned(),
                second: conflict.second.to_owned(),
                constant: conflict.constant.to_owned(),
            });
        }
        Ok(set.into_iter().map(str::to_owned).collect())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawShader {
    pub(super) name: Spanned<String>,
    pub(super) source: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) axes: Vec<Vec<Spanned<String>>>,
    #[serde(default)]
    pub(super) keywords: Vec<Spanned<String>>,
    pub(super) variants: Option<Vec<Vec<Spanned<String>>>>,
    #[serde(default)]
    defines: BTreeMap<String, Spanned<toml::Value>>,
    #[serde(default)]
    pub(super) passes: BTreeMap<String, Spanned<RawPass>>,
    pub(super) compiler: Option<Spanned<String>>,
    /// The language of the shader's passes, where the extension does not say it.
    pub(super) language: Option<Spanned<String>>,
    pub(super) glslang: Option<Spanned<RawGlslang>>,
    pub(super) slang: Option<Spanned<RawSlang>>,
    #[serde(default)]
    include_dirs: Vec<Spanned<String>>,
    #[serde(default)]
    constants: BTreeMap<String, Spanned<toml::Value>>,
    #[serde(default)]
    pub(super) keyword_constants: BTreeMap<String, Spanned<BTreeMap<String, Spanned<toml::Value>>>>,
}

impl Context<'_> {
    pub(super) fn shader(
        &self,
        shader: &RawShader,
        limits: &Limits,
        project_dirs: &[PathBuf],
    ) -> Result<ShaderSpec, ManifestError> {
        let name = shader.name.get_ref();
        check_name(name).map_err(|why| {
            self.error(
                Some(shader.name.span()),
                format!("shader name `{name}`: {why}"),
            )
        })?;
        let keywords = self.keywords(shader)?;
        let variants = self.variants(shader, &keywords, limits)?;
        let defines = self.defines(shader)?;
        let passes = self.passes(shader)?;
        let include_dirs = self.include_dirs(&shader.include_dirs, project_dirs)?;
        let constants = self.constants(&shader.constants, &format!("shader `{name}`"))?;
        let keyword_constants = self.keyword_constants(shader, &keywords, &variants)?;
        let axes = shader
            .axes
            .iter()
            .map(|axis| axis.iter().map(|w| w.get_ref().clone()).collect())
            .collect();
        Ok(ShaderSpec {
            name: name.clone(),
            keywords,
            variants,
            axes,
            passes,
            defines,
            include_dirs,
            constants,
            keyword_constants,
        })
    }

    fn defines(&self, shader: &RawShader) -> Result<BTreeMap<String, String>, ManifestError> {
        let mut defines = BTreeMap::new();
        for (k, v) in &shader.defines {
            check_keyword(k)
                .map_err(|why| self.error(Some(v.span()), format!("define `{k}` {why}")))?;
            let value = match v.get_ref() {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) => u8::from(*b).to_string(),
                _ => {
                    return Err(self.error(
                        Some(v.span()),
                        format!("define `{k}` must be a string, number or boolean"),
                    ))
                }
            };
            defines.insert(k.clone(), value);
        }
        Ok(defines)
    }
}

impl Context<'_> {
    /// Every `[[shader]]`, each name once, the project's variants within `max_variants`.
    pub(super) fn shaders(
        &self,
        raw: &[RawShader],
        limits: &Limits,
        targets: &[TargetConfig],
        project_dirs: &[PathBuf],
    ) -> Result<Vec<Arc<ShaderSpec>>, ManifestError> {
        let mut shaders: Vec<Arc<ShaderSpec>> = Vec::new();
        let mut total: usize = 0;
        for shader in raw {
            let name = shader.name.get_ref();
            if shaders.iter().any(|s| &s.name == name) {
                return Err(self.error(
                    Some(shader.name.span()),
                    format!("shader `{name}` is defined twice"),
                ));
            }
            let spec = self.shader(shader, limits, project_dirs)?;
            self.check_target_env(shader, targets)?;
            total = self.project_total(shader, &spec, total, limits)?;
            shaders.push(Arc::new(spec));
        }
        Ok(shaders)
    }

    /// The project's variant count with this shader's added, refused past `max_variants`.
    fn project_total(
        &self,
        shader: &RawShader,
        spec: &ShaderSpec,
        total: usize,
        limits: &Limits,
    ) -> Result<usize, ManifestError> {
        let name = shader.name.get_ref();
        spec.variants
            .len()
            .checked_mul(spec.passes.len())
            .and_then(|n| n.checked_add(total))
            .filter(|n| *n <= limits.max_variants)
            .ok_or_else(|| {
                self.error(
                    Some(shader.name.span()),
                    format!(
                        "with shader `{name}` the project has more than {} variants (raise `max_variants` in `[project]`)",
                        limits.max_variants
                    ),
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use crate::manifest::test_manifests::{parse, LIT};

    #[test]
    fn names_that_are_paths_are_refused_with_the_key_s_rules() {
        for bad in ["..", ".", "a/b", "a b"] {
            let e = parse(&LIT.replace("\"Lit\"", &format!("\"{bad}\""))).unwrap_err();
            assert!(e.message.contains("shader name"), "{bad}: {e}");
            assert!(crate::key::VariantKey::new(bad, "Forward", ["FOG"], 1).is_err());
        }
    }
}
