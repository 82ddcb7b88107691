//! `[shader.slang]`: the Slang compiler's options, namespaced so that no other compiler reads
//! them, and refused on a shader none of whose passes Slang compiles.

use super::error::{Context, ManifestError};
use super::pass::PassSpec;
use super::shader::RawShader;
use crate::compile::{CompilerKind, MatrixLayout, SlangOptimization, SlangOptions};
use serde::Deserialize;
use toml::Spanned;

/// `[shader.slang]`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSlang {
    matrix_layout: Option<Spanned<String>>,
    optimization: Option<Spanned<String>>,
}

impl Context<'_> {
    /// The shader's `[shader.slang]` options, or Slang's defaults without one.
    pub(super) fn slang_options(&self, shader: &RawShader) -> Result<SlangOptions, ManifestError> {
        let Some(raw) = &shader.slang else {
            return Ok(SlangOptions::default());
        };
        // Destructured so that a new field fails to compile until it is carried over.
        let RawSlang {
            matrix_layout,
            optimization,
        } = raw.get_ref();
        let matrix_layout = match matrix_layout {
            Some(name) => MatrixLayout::from_name(name.get_ref()).ok_or_else(|| {
                self.error(
                    Some(name.span()),
                    format!(
                        "unknown matrix_layout `{}` (expected row_major or column_major)",
                        name.get_ref()
                    ),
                )
            })?,
            None => MatrixLayout::default(),
        };
        let optimization = match optimization {
            Some(name) => SlangOptimization::from_name(name.get_ref()).ok_or_else(|| {
                self.error(
                    Some(name.span()),
                    format!(
                        "unknown optimization `{}` (expected none, default, high or maximal)",
                        name.get_ref()
                    ),
                )
            })?,
            None => SlangOptimization::default(),
        };
        Ok(SlangOptions {
            matrix_layout,
            optimization,
        })
    }

    /// Options that no pass reads would be silently ignored: refused instead.
    pub(super) fn check_slang_options_used(
        &self,
        shader: &RawShader,
        passes: &[PassSpec],
    ) -> Result<(), ManifestError> {
        let Some(options) = &shader.slang else {
            return Ok(());
        };
        if passes
            .iter()
            .any(|p| p.front_end.kind() == CompilerKind::Slang)
        {
            return Ok(());
        }
        Err(self.error(
            Some(options.span()),
            format!(
                "shader `{name}` sets `[shader.slang]` options but no pass of it is Slang",
                name = shader.name.get_ref()
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use crate::compile::{FrontEnd, MatrixLayout, SlangOptimization, SlangOptions, SourceLanguage};
    use crate::manifest::test_manifests::{one_pass, parse};

    #[test]
    fn slang_passes_and_their_options_are_read_and_checked_with_their_line() {
        let m = parse(&one_pass("", "a.slang", "")).expect("a Slang pass");
        let pass = &m.shaders[0].passes[0];
        assert_eq!(pass.language, SourceLanguage::Slang);
        assert_eq!(pass.front_end, FrontEnd::Slang(SlangOptions::default()));

        let with = |options: &str| {
            one_pass("", "a.slang", "").replace(
                "\n[shader.passes.P]",
                &format!("\n[shader.slang]\n{options}\n\n[shader.passes.P]"),
            )
        };
        let m = parse(&with(
            "matrix_layout = \"column_major\"\noptimization = \"high\"",
        ))
        .expect("Slang options");
        assert_eq!(
            m.shaders[0].passes[0].front_end,
            FrontEnd::Slang(SlangOptions {
                matrix_layout: MatrixLayout::ColumnMajor,
                optimization: SlangOptimization::High,
            })
        );
        let e = parse(&with("matrix_layout = \"diagonal\"")).unwrap_err();
        assert!(
            e.message.contains("unknown matrix_layout `diagonal`"),
            "{e}"
        );
        assert!(e.line > 1, "{e:?}");
        let e = parse(&with("optimisation = \"high\"")).unwrap_err();
        assert!(e.message.contains("optimisation"), "{e}");

        // A Slang file named otherwise says its language; glslang cannot read it.
        let m = parse(&one_pass("language = \"slang\"", "a.frag", "")).expect("language slang");
        assert_eq!(m.shaders[0].passes[0].language, SourceLanguage::Slang);
        let e = parse(&one_pass("compiler = \"glslang\"", "a.slang", "")).unwrap_err();
        assert!(e.message.contains("glslang cannot compile slang"), "{e}");
        // Options no pass reads are refused.
        let stray = one_pass("", "a.frag", "").replace(
            "\n[shader.passes.P]",
            "\n[shader.slang]\noptimization = \"high\"\n\n[shader.passes.P]",
        );
        let e = parse(&stray).unwrap_err();
        assert!(e.message.contains("no pass of it is Slang"), "{e}");
    }
}
