//! A shader's keywords: `axes` and `keywords`, and the variants (keyword sets) they make with
//! the explicit `variants`.

use super::error::{Context, ManifestError};
use super::project::{Limits, MAX_VARIANTS_PER_SHADER};
use super::shader::RawShader;
use std::collections::BTreeSet;
use toml::Spanned;

/// The keyword spelling meaning "no keyword from this axis" (also the file name of the empty
/// set: kiln-runtime's).
pub const NONE_KEYWORD: &str = kiln_runtime::canon::NONE_KEYWORD;

impl Context<'_> {
    pub(super) fn keywords(&self, shader: &RawShader) -> Result<BTreeSet<String>, ManifestError> {
        let mut keywords = BTreeSet::new();
        for word in shader.axes.iter().flatten().chain(&shader.keywords) {
            let w = word.get_ref();
            if w == NONE_KEYWORD {
                continue;
            }
            check_keyword(w)
                .map_err(|why| self.error(Some(word.span()), format!("keyword `{w}` {why}")))?;
            keywords.insert(w.clone());
        }
        Ok(keywords)
    }

    /// The axes' product and the explicit variants, canonical and without repeats.
    pub(super) fn variants(
        &self,
        shader: &RawShader,
        keywords: &BTreeSet<String>,
        limits: &Limits,
    ) -> Result<Vec<Vec<String>>, ManifestError> {
        let name = shader.name.get_ref();
        let cap = MAX_VARIANTS_PER_SHADER.min(limits.max_variants);
        self.check_axis_product(shader, cap)?;
        let mut variants: Vec<Vec<String>> = Vec::new();
        let mut seen = BTreeSet::new();
        let mut push = |set: Vec<String>| {
            if seen.insert(set.clone()) {
                variants.push(set);
            }
        };
        if shader.variants.is_none() || !shader.axes.is_empty() {
            for combination in axis_product(&shader.axes) {
                push(canonical(combination));
            }
        }
        for explicit in shader.variants.iter().flatten() {
            self.check_declared(shader, explicit, keywords)?;
            push(canonical(
                explicit.iter().map(|w| w.get_ref().as_str()).collect(),
            ));
        }
        if variants.len() > cap {
            return Err(self.error(
                Some(shader.name.span()),
                format!(
                    "shader `{name}` has {} variants (at most {cap})",
                    variants.len()
                ),
            ));
        }
        Ok(variants)
    }

    /// The size of the axes' product, counted with checked arithmetic before anything is
    /// built: 64 two-keyword axes must be an error, not an overflow or an exhausted machine.
    fn check_axis_product(&self, shader: &RawShader, cap: usize) -> Result<(), ManifestError> {
        let name = shader.name.get_ref();
        let product = shader
            .axes
            .iter()
            .try_fold(1usize, |n, axis| n.checked_mul(axis.len().max(1)));
        match product {
            Some(product) if product <= cap => Ok(()),
            Some(product) => Err(self.error(
                Some(shader.name.span()),
                format!("shader `{name}` has {product} variants from its axes (at most {cap})"),
            )),
            None => Err(self.error(
                Some(shader.name.span()),
                format!(
                    "shader `{name}` has more than {} variants from its axes (at most {cap})",
                    usize::MAX
                ),
            )),
        }
    }

    /// Every keyword of an explicit variant is one the shader declares.
    fn check_declared(
        &self,
        shader: &RawShader,
        variant: &[Spanned<String>],
        keywords: &BTreeSet<String>,
    ) -> Result<(), ManifestError> {
        let name = shader.name.get_ref();
        for word in variant {
            let w = word.get_ref();
            if w != NONE_KEYWORD && !keywords.contains(w) {
                return Err(self.error(
                    Some(word.span()),
                    format!(
                        "unknown keyword `{w}` in a variant of shader `{name}` (declared: {})",
                        list(keywords)
                    ),
                ));
            }
        }
        Ok(())
    }
}

fn axis_product(axes: &[Vec<Spanned<String>>]) -> Vec<Vec<&str>> {
    let mut out: Vec<Vec<&str>> = vec![Vec::new()];
    for axis in axes.iter().filter(|a| !a.is_empty()) {
        out = out
            .iter()
            .flat_map(|prefix| {
                axis.iter().map(move |choice| {
                    let mut next = prefix.clone();
                    next.push(choice.get_ref().as_str());
                    next
                })
            })
            .collect();
    }
    out
}

/// A variant's canonical keyword set: kiln-runtime's rule (distinct, byte order), without `_`.
fn canonical(mut words: Vec<&str>) -> Vec<String> {
    words.retain(|w| *w != NONE_KEYWORD);
    kiln_runtime::canon::canonicalize(words)
        .into_iter()
        .map(str::to_owned)
        .collect()
}

/// The declared keywords, for an error message.
pub(super) fn list(words: &BTreeSet<String>) -> String {
    if words.is_empty() {
        return "none".into();
    }
    words
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Keywords become preprocessor macros, so they must be identifiers (kiln-runtime's rule,
/// which the pack writer and the engine's lookup share).
pub(super) fn check_keyword(word: &str) -> Result<(), &'static str> {
    kiln_runtime::canon::check_keyword_identifier(word)
}

#[cfg(test)]
mod tests {
    use crate::manifest::test_manifests::{parse, with_axes, LIT};

    #[test]
    fn axes_product_and_explicit_variants_are_canonical_and_unique() {
        let m = parse(LIT).unwrap();
        let lit = &m.shaders[0];
        // 2 x 2 x 2 from the axes; ["FOG"] is new, [FOG, LIGHTS_1, SKIN] repeats an axis one.
        assert_eq!(lit.variants.len(), 9);
        assert!(lit.variants.contains(&vec!["FOG".to_string()]));
        assert_eq!(lit.variants[0], vec!["LIGHTS_1".to_string()]);
        assert_eq!(m.variant_count(), 18);
        assert_eq!(m.targets.len(), 2);
        assert_eq!(m.targets[1].options_string(), "version=2.0");
        assert_eq!(lit.passes[0].name, "Depth");
    }

    #[test]
    fn unknown_keyword_in_variants_names_it_and_its_line() {
        let text = LIT.replace(r#"["FOG", "FOG"]"#, r#"["FOG", "RAIN"]"#);
        let e = parse(&text).unwrap_err();
        assert!(e.message.contains("unknown keyword `RAIN`"), "{e}");
        assert_eq!(e.line, 9);
    }

    #[test]
    fn keywords_must_be_identifiers() {
        let e = parse(&LIT.replace("\"SKIN\"]", "\"SK IN\"]")).unwrap_err();
        assert!(e.message.contains("keyword `SK IN`"), "{e}");
    }

    #[test]
    fn an_overflowing_axis_product_is_an_error_not_a_crash() {
        // 2^64 overflows a usize: the count is checked before anything is built.
        let e = parse(&with_axes(64, 2)).unwrap_err();
        assert!(e.message.contains("variants from its axes"), "{e}");
        assert_eq!(e.line, 6, "{e}");
        let e = parse(&with_axes(17, 2)).unwrap_err();
        assert!(e.message.contains("131072 variants"), "{e}");
    }
}
