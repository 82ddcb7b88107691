//! Usage files: the variants a running engine asked `kiln serve` for, written by `kiln
//! usage`, and read back by `[project] variants_from`, which then builds each shader's used
//! keyword sets instead of its axes' product. A set no longer legal (a keyword removed, a
//! pass renamed, a shader gone) is an error at its line in the usage file, never dropped
//! silently: `kiln usage` reports and leaves out such sets when it merges files.
//!
//! ```toml
//! [[variant]]
//! shader = "Lit"
//! pass = "Forward"
//! keywords = ["FOG", "SKIN"]
//! target = "spirv"
//! ```

use super::error::{Context, ManifestError};
use super::shader::ShaderSpec;
use super::Limits;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use toml::Spanned;

/// One (shader, pass, keyword set, target) a client fetched.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct UsedVariant {
    /// Shader name.
    pub shader: String,
    /// Pass name.
    pub pass: String,
    /// Keywords, canonical.
    pub keywords: Vec<String>,
    /// Target name.
    pub target: String,
}

/// A usage file's entry and the 1-based line it starts at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageEntry {
    /// The variant.
    pub used: UsedVariant,
    /// Where it is in its file.
    pub line: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUsage {
    #[serde(default)]
    variant: Vec<Spanned<UsedVariant>>,
}

/// The text of a usage file holding `used`, sorted and without repeats, so that the same
/// usage always makes the same file (merges and diffs stay small).
pub fn write_usage<'a>(used: impl IntoIterator<Item = &'a UsedVariant>) -> String {
    let sorted: BTreeSet<&UsedVariant> = used.into_iter().collect();
    let mut text = String::from(
        "# Written by `kiln usage`: the variants an engine fetched from `kiln serve`.\n\
         # Name this file in kiln.toml (`[project] variants_from = [\"usage.toml\"]`) to build\n\
         # only these keyword sets, for every pass and target of their shaders.\n",
    );
    for used in sorted {
        let quoted: Vec<String> = used.keywords.iter().map(|k| toml_string(k)).collect();
        text.push_str(&format!(
            "\n[[variant]]\nshader = {}\npass = {}\nkeywords = [{}]\ntarget = {}\n",
            toml_string(&used.shader),
            toml_string(&used.pass),
            quoted.join(", "),
            toml_string(&used.target),
        ));
    }
    text
}

fn toml_string(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}

/// The entries of the usage file `path` holding `text`.
pub fn parse_usage(path: &Path, text: &str) -> Result<Vec<UsageEntry>, ManifestError> {
    let cx = Context { path, text };
    let raw: RawUsage =
        toml::from_str(text).map_err(|e| cx.error(e.span(), e.message().to_owned()))?;
    Ok(raw
        .variant
        .into_iter()
        .map(|entry| UsageEntry {
            line: cx.error(Some(entry.span()), String::new()).line,
            used: entry.into_inner(),
        })
        .collect())
}

/// Why a used variant cannot be built with this manifest, if it cannot.
pub fn check_used(shaders: &[Arc<ShaderSpec>], used: &UsedVariant) -> Result<Vec<String>, String> {
    let shader = shaders
        .iter()
        .find(|s| s.name == used.shader)
        .ok_or_else(|| format!("the manifest has no shader `{}` any more", used.shader))?;
    if !shader.passes.iter().any(|p| p.name == used.pass) {
        return Err(format!(
            "shader `{}` has no pass `{}` any more",
            used.shader, used.pass
        ));
    }
    shader
        .keyword_set(used.keywords.iter().map(String::as_str))
        .map_err(|e| e.to_string())
}

impl Context<'_> {
    /// `[project] variants_from`: each shader's variants become the keyword sets its usage
    /// files list (none for a shader no file names). Returns the files, absolute.
    pub(super) fn apply_usage(
        &self,
        files: &[Spanned<String>],
        root: &Path,
        shaders: &mut [Arc<ShaderSpec>],
        limits: &Limits,
    ) -> Result<Vec<PathBuf>, ManifestError> {
        let mut sets: Vec<BTreeSet<Vec<String>>> = vec![BTreeSet::new(); shaders.len()];
        let mut paths = Vec::new();
        for file in files {
            let relative = Path::new(file.get_ref());
            let text = crate::boundary::read_project_file(root, relative, limits.max_source_bytes)
                .map_err(|e| {
                    self.error(
                        Some(file.span()),
                        format!("`variants_from`: cannot read {}: {e}", relative.display()),
                    )
                })?;
            let path = root.join(relative);
            for entry in parse_usage(&path, &text)? {
                let set = check_used(shaders, &entry.used).map_err(|why| ManifestError {
                    path: path.clone(),
                    line: entry.line,
                    span: None,
                    message: format!(
                        "{}/{}[{}] is no longer a legal variant: {why} (remove it, or run `kiln usage` to rewrite the file without it)",
                        entry.used.shader,
                        entry.used.pass,
                        entry.used.keywords.join(";")
                    ),
                })?;
                if let Some(at) = shaders.iter().position(|s| s.name == entry.used.shader) {
                    sets[at].insert(set);
                }
            }
            paths.push(path);
        }
        let mut total = 0usize;
        for (shader, used) in shaders.iter_mut().zip(sets) {
            let spec = Arc::make_mut(shader);
            spec.variants = used.into_iter().collect();
            total = total.saturating_add(spec.variants.len() * spec.passes.len());
        }
        if total > limits.max_variants {
            return Err(self.error(
                files.first().map(Spanned::span),
                format!(
                    "the usage files list {total} variants (at most {})",
                    limits.max_variants
                ),
            ));
        }
        Ok(paths)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn used(shader: &str, keywords: &[&str]) -> UsedVariant {
        UsedVariant {
            shader: shader.into(),
            pass: "Forward".into(),
            keywords: keywords.iter().map(|k| k.to_string()).collect(),
            target: "spirv".into(),
        }
    }

    #[test]
    fn a_written_usage_file_reads_back_sorted_without_repeats() {
        let all = [
            used("Lit", &["SKIN"]),
            used("Lit", &[]),
            used("Lit", &["SKIN"]),
            used("A \"quoted\" name", &["FOG"]),
        ];
        let text = write_usage(&all);
        let entries = parse_usage(Path::new("usage.toml"), &text).unwrap();
        let back: Vec<UsedVariant> = entries.iter().map(|e| e.used.clone()).collect();
        assert_eq!(
            back,
            vec![
                used("A \"quoted\" name", &["FOG"]),
                used("Lit", &[]),
                used("Lit", &["SKIN"])
            ]
        );
        // Each entry's line is its `[[variant]]` header's.
        let lines: Vec<&str> = text.lines().collect();
        for entry in &entries {
            assert_eq!(lines[entry.line - 1], "[[variant]]", "{text}");
        }
    }

    #[test]
    fn a_malformed_usage_file_is_an_error_at_its_line() {
        let e = parse_usage(
            Path::new("u.toml"),
            "[[variant]]\nshader = \"Lit\"\npass = 3\n",
        )
        .unwrap_err();
        assert_eq!(e.path, Path::new("u.toml"));
        assert_eq!(e.line, 3, "{e}");
    }
}
