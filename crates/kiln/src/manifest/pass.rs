//! `[shader.passes.<name>]`: a pass's stage, entry point and source file, the language read
//! from its extension, its compiler and its HLSL shader model.

use super::error::{Context, ManifestError};
use super::shader::RawShader;
use crate::boundary::check_name;
use crate::compile::{CompilerKind, Constants, FrontEnd, SourceLanguage, Stage};
use crate::preprocess::normalize_entry;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// One pass of a shader: an entry point of a stage in a source file.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PassSpec {
    /// Pass name (`Forward`, `Shadow`, ...).
    pub name: String,
    /// The stage.
    pub stage: Stage,
    /// Entry point name.
    pub entry: String,
    /// Source file, relative to the project root, `/`-separated.
    pub source: PathBuf,
    /// Language: the pass's `language`, else the shader's, else the source's extension.
    pub language: SourceLanguage,
    /// Specialization constant values for this pass (over the shader's).
    pub constants: Constants,
    /// The compiler and its options: the pass's `compiler`, else the shader's, else the
    /// language's default ([`SourceLanguage::default_compiler`]).
    pub front_end: FrontEnd,
    /// HLSL only: the shader model (`shader_model = "6.0"`), defined for the pass's text as
    /// `__SHADER_TARGET_MAJOR` / `__SHADER_TARGET_MINOR` (as DXC and fxc define them).
    pub shader_model: Option<(u8, u8)>,
}

impl PassSpec {
    /// The defines this pass adds to its shader's for every variant.
    pub fn defines(&self) -> Vec<(&'static str, String)> {
        match self.shader_model {
            Some((major, minor)) => vec![
                ("__SHADER_TARGET_MAJOR", major.to_string()),
                ("__SHADER_TARGET_MINOR", minor.to_string()),
            ],
            None => Vec::new(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPass {
    stage: Spanned<String>,
    entry: Spanned<String>,
    source: Option<Spanned<String>>,
    #[serde(default)]
    constants: BTreeMap<String, Spanned<toml::Value>>,
    compiler: Option<Spanned<String>>,
    shader_model: Option<Spanned<String>>,
    language: Option<Spanned<String>>,
}

impl Context<'_> {
    pub(super) fn passes(&self, shader: &RawShader) -> Result<Vec<PassSpec>, ManifestError> {
        let name = shader.name.get_ref();
        if shader.passes.is_empty() {
            return Err(self.error(
                Some(shader.name.span()),
                format!("shader `{name}` has no passes"),
            ));
        }
        let mut passes = Vec::new();
        for (pass_name, pass) in &shader.passes {
            passes.push(self.pass(shader, pass_name, pass)?);
        }
        self.check_glslang_options_used(shader, &passes)?;
        self.check_slang_options_used(shader, &passes)?;
        Ok(passes)
    }

    fn pass(
        &self,
        shader: &RawShader,
        pass_name: &str,
        pass: &Spanned<RawPass>,
    ) -> Result<PassSpec, ManifestError> {
        let name = shader.name.get_ref();
        let span = pass.span();
        let pass = pass.get_ref();
        check_name(pass_name).map_err(|why| {
            self.error(
                Some(span.clone()),
                format!("pass name `{pass_name}`: {why}"),
            )
        })?;
        let stage = self.stage(pass)?;
        let (source, language) = self.source(shader, pass, pass_name, span)?;
        let front_end = self.front_end(shader, pass, pass_name, language, stage)?;
        let shader_model = self.shader_model(pass, pass_name, language)?;
        let constants = self.constants(
            &pass.constants,
            &format!("pass `{pass_name}` of shader `{name}`"),
        )?;
        Ok(PassSpec {
            name: pass_name.to_owned(),
            stage,
            entry: pass.entry.get_ref().clone(),
            source,
            language,
            front_end,
            shader_model,
            constants,
        })
    }

    fn stage(&self, pass: &RawPass) -> Result<Stage, ManifestError> {
        Stage::from_name(pass.stage.get_ref()).ok_or_else(|| {
            let known: Vec<&str> = Stage::ALL.iter().map(|s| s.name()).collect();
            self.error(
                Some(pass.stage.span()),
                format!(
                    "unknown stage `{}` (expected one of {})",
                    pass.stage.get_ref(),
                    known.join(", ")
                ),
            )
        })
    }

    /// The pass's `source`, else the shader's, normalised and inside the root, with the
    /// language its extension names.
    fn source(
        &self,
        shader: &RawShader,
        pass: &RawPass,
        pass_name: &str,
        span: Range<usize>,
    ) -> Result<(PathBuf, SourceLanguage), ManifestError> {
        let name = shader.name.get_ref();
        let source = pass.source.as_ref().or(shader.source.as_ref()).ok_or_else(|| {
            self.error(Some(span), format!("pass `{pass_name}` of shader `{name}` has no source (set `source` on the shader or the pass)"))
        })?;
        // The preprocessor's own normalisation, so that the pipeline and the
        // preprocessor name every file the same way.
        let relative = normalize_entry(Path::new(source.get_ref()))
            .map(PathBuf::from)
            .map_err(|why| {
                self.error(
                    Some(source.span()),
                    format!("source `{}`: {why}", source.get_ref()),
                )
            })?;
        // The manifest's word first: projects name HLSL files by stage (`mesh.vert`).
        if let Some(language) = pass.language.as_ref().or(shader.language.as_ref()) {
            return Ok((relative, self.language(language)?));
        }
        let language = SourceLanguage::from_path(&relative).ok_or_else(|| {
            self.error(
                Some(source.span()),
                format!("cannot tell the language of `{}` (expected .wgsl, .hlsl, .slang, .glsl or a GLSL stage extension: .{}; or say it with `language = \"hlsl\"`)", source.get_ref(), SourceLanguage::GLSL_EXTENSIONS.join(", .")),
            )
        })?;
        Ok((relative, language))
    }

    /// A `language` field's language.
    fn language(&self, language: &Spanned<String>) -> Result<SourceLanguage, ManifestError> {
        let name = language.get_ref();
        SourceLanguage::from_name(name).ok_or_else(|| {
            let known: Vec<&str> = SourceLanguage::ALL.iter().map(|l| l.name()).collect();
            self.error(
                Some(language.span()),
                format!(
                    "unknown language `{name}` (expected one of {})",
                    known.join(", ")
                ),
            )
        })
    }

    /// The pass's compiler (the pass's `compiler`, else the shader's, else the language's
    /// default), checked against its language and stage, with the shader's glslang options.
    fn front_end(
        &self,
        shader: &RawShader,
        pass: &RawPass,
        pass_name: &str,
        language: SourceLanguage,
        stage: Stage,
    ) -> Result<FrontEnd, ManifestError> {
        let written = pass.compiler.as_ref().or(shader.compiler.as_ref());
        let kind = match written {
            Some(name) => CompilerKind::from_name(name.get_ref()).ok_or_else(|| {
                self.error(
                    Some(name.span()),
                    format!(
                        "unknown compiler `{}` (expected naga, glslang or slang)",
                        name.get_ref()
                    ),
                )
            })?,
            None => language.default_compiler(),
        };
        let span = written
            .map(|w| w.span())
            .unwrap_or_else(|| pass.stage.span());
        if !kind.reads(language) {
            return Err(self.error(
                Some(span),
                format!(
                    "pass `{pass_name}`: {} cannot compile {} (use compiler = \"{}\")",
                    kind.name(),
                    language.name(),
                    language.default_compiler().name()
                ),
            ));
        }
        if kind == CompilerKind::Naga && !stage.naga_supports() {
            return Err(self.error(
                Some(pass.stage.span()),
                format!(
                    "pass `{pass_name}`: naga has no {stage} stage (use compiler = \"glslang\")"
                ),
            ));
        }
        Ok(match kind {
            CompilerKind::Naga => FrontEnd::Naga,
            CompilerKind::Glslang => FrontEnd::Glslang(self.glslang_options(shader)?),
            CompilerKind::Slang => FrontEnd::Slang(self.slang_options(shader)?),
        })
    }

    /// `shader_model = "6.0"` on an HLSL pass.
    fn shader_model(
        &self,
        pass: &RawPass,
        pass_name: &str,
        language: SourceLanguage,
    ) -> Result<Option<(u8, u8)>, ManifestError> {
        let Some(model) = &pass.shader_model else {
            return Ok(None);
        };
        if language != SourceLanguage::Hlsl {
            return Err(self.error(
                Some(model.span()),
                format!("pass `{pass_name}`: `shader_model` applies to HLSL sources only"),
            ));
        }
        let parsed = model
            .get_ref()
            .replace('_', ".")
            .split_once('.')
            .and_then(|(major, minor)| Some((major.parse::<u8>().ok()?, minor.parse::<u8>().ok()?)))
            .filter(|&(major, minor)| (major == 5 && minor <= 1) || (major == 6 && minor <= 8));
        parsed.map(Some).ok_or_else(|| {
            self.error(
                Some(model.span()),
                format!(
                    "pass `{pass_name}`: shader model `{}` (expected 5.0, 5.1 or 6.0 ..= 6.8)",
                    model.get_ref()
                ),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::compile::{FrontEnd, GlslangOptions, SourceLanguage, Stage};
    use crate::manifest::test_manifests::{one_pass, parse, LIT};
    use std::path::PathBuf;

    #[test]
    fn the_compiler_defaults_by_extension_and_can_be_chosen() {
        let compiler = |text: &str| parse(text).map(|m| m.shaders[0].passes[0].front_end);
        let glslang = Ok(FrontEnd::Glslang(GlslangOptions::default()));
        assert_eq!(compiler(&one_pass("", "a.wgsl", "")), Ok(FrontEnd::Naga));
        for source in ["a.frag", "a.glsl", "a.hlsl", "a.comp"] {
            assert_eq!(compiler(&one_pass("", source, "")), glslang, "{source}");
        }
        let naga = "compiler = \"naga\"";
        assert_eq!(compiler(&one_pass(naga, "a.frag", "")), Ok(FrontEnd::Naga));
        // A pass's choice wins over its shader's.
        assert_eq!(
            compiler(&one_pass(naga, "a.frag", "compiler = \"glslang\"")),
            glslang
        );
        let m = parse(&one_pass("", "a.hlsl", "")).unwrap();
        assert_eq!(m.shaders[0].passes[0].language, SourceLanguage::Hlsl);
    }

    /// Issue 26: HLSL named by stage (`mesh.vert`, as the public Vulkan samples name 308
    /// files) is HLSL when the manifest says so, on the shader or on the pass.
    #[test]
    fn the_language_field_overrides_the_extension() {
        let language = |shader: &str, source: &str, pass: &str| {
            parse(&one_pass(shader, source, pass)).map(|m| m.shaders[0].passes[0].language)
        };
        let hlsl = "language = \"hlsl\"";
        assert_eq!(language("", "mesh.vert", ""), Ok(SourceLanguage::Glsl));
        assert_eq!(language(hlsl, "mesh.vert", ""), Ok(SourceLanguage::Hlsl));
        assert_eq!(language("", "mesh.frag", hlsl), Ok(SourceLanguage::Hlsl));
        // The pass's word wins over its shader's; the default compiler follows the language.
        let m = parse(&one_pass(hlsl, "mesh.vert", "language = \"glsl\"")).unwrap();
        assert_eq!(m.shaders[0].passes[0].language, SourceLanguage::Glsl);
        // An extension nobody knows is fine once the language is said.
        assert_eq!(
            language(hlsl, "shaders/mesh.fx", ""),
            Ok(SourceLanguage::Hlsl)
        );
        assert_eq!(
            language("language = \"wgsl\"", "a.shader", ""),
            Ok(SourceLanguage::Wgsl)
        );
        let e = parse(&one_pass("", "shaders/mesh.fx", "")).unwrap_err();
        assert!(e.message.contains("language = \"hlsl\""), "{e}");
        // Unknown languages are errors at their line.
        let e = parse(&one_pass("language = \"cg\"", "a.vert", "")).unwrap_err();
        assert!(
            e.message
                .contains("unknown language `cg` (expected one of wgsl, glsl, hlsl, slang)"),
            "{e}"
        );
        assert_eq!(e.line, 7, "{e}");
        // `shader_model` follows the language, not the extension.
        assert!(parse(&one_pass(hlsl, "a.frag", "shader_model = \"6.0\"")).is_ok());
    }

    #[test]
    fn a_compiler_that_cannot_read_the_source_is_a_located_error() {
        let e = parse(&one_pass("compiler = \"naga\"", "a.hlsl", "")).unwrap_err();
        assert!(e.message.contains("naga cannot compile hlsl"), "{e}");
        assert_eq!(e.line, 7, "{e}");
        let e = parse(&one_pass("compiler = \"glslang\"", "a.wgsl", "")).unwrap_err();
        assert!(e.message.contains("glslang cannot compile wgsl"), "{e}");
        let e = parse(&one_pass("compiler = \"dxc\"", "a.hlsl", "")).unwrap_err();
        assert!(e.message.contains("unknown compiler `dxc`"), "{e}");
        let geometry = one_pass("compiler = \"naga\"", "a.geom", "")
            .replace("stage = \"fragment\"", "stage = \"geometry\"");
        let e = parse(&geometry).unwrap_err();
        assert!(e.message.contains("naga has no geometry stage"), "{e}");
        let geometry = geometry.replace("compiler = \"naga\"", "");
        assert_eq!(
            parse(&geometry).unwrap().shaders[0].passes[0].stage,
            Stage::Geometry
        );
    }

    #[test]
    fn sources_must_stay_inside_the_root() {
        let e = parse(&LIT.replace("shaders/lit.wgsl", "../../etc/passwd.wgsl")).unwrap_err();
        assert!(e.message.contains("leaves the project root"), "{e}");
        let m = parse(&LIT.replace("shaders/lit.wgsl", "shaders/./x/../lit.wgsl")).unwrap();
        assert_eq!(
            m.shaders[0].passes[0].source,
            PathBuf::from("shaders/lit.wgsl")
        );
    }
}
