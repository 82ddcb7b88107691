//! `[shader.glslang]`: glslang's options, namespaced so that no other compiler reads them,
//! and checked against the passes that use glslang and the project's SPIR-V version.

use super::error::{Context, ManifestError};
use super::pass::PassSpec;
use super::shader::RawShader;
use crate::compile::{
    BindingBase, CompilerKind, GlslangOptions, Optimization, TargetConfig, VulkanVersion,
};
use serde::Deserialize;
use toml::Spanned;

/// `[shader.glslang]`: glslang's options, namespaced so that no other compiler reads them.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGlslang {
    optimization: Option<Spanned<String>>,
    #[serde(default)]
    auto_map_locations: bool,
    #[serde(default)]
    auto_bind_uniforms: bool,
    #[serde(default)]
    hlsl_iomap: bool,
    #[serde(default)]
    invert_y: bool,
    target_env: Option<Spanned<String>>,
    #[serde(default)]
    generate_debug_info: bool,
    #[serde(default)]
    hlsl_functionality1: bool,
    #[serde(default)]
    hlsl_offsets: bool,
    #[serde(default)]
    nan_clamp: bool,
    #[serde(default)]
    binding_base: RawBindingBase,
}

/// `[shader.glslang.binding_base]`: glslc's `-f<kind>-binding-base`.
#[derive(Deserialize, Default, Clone, Copy)]
#[serde(deny_unknown_fields)]
struct RawBindingBase {
    #[serde(default)]
    image: u32,
    #[serde(default)]
    sampler: u32,
    #[serde(default)]
    texture: u32,
    #[serde(default)]
    ubo: u32,
    #[serde(default)]
    ssbo: u32,
    #[serde(default)]
    uav: u32,
}

impl From<RawBindingBase> for BindingBase {
    fn from(raw: RawBindingBase) -> Self {
        // Destructured so that a new field fails to compile until it is carried over.
        let RawBindingBase {
            image,
            sampler,
            texture,
            ubo,
            ssbo,
            uav,
        } = raw;
        BindingBase {
            image,
            sampler,
            texture,
            ubo,
            ssbo,
            uav,
        }
    }
}

impl Context<'_> {
    /// The shader's `[shader.glslang]` options, or glslang's defaults without one.
    pub(super) fn glslang_options(
        &self,
        shader: &RawShader,
    ) -> Result<GlslangOptions, ManifestError> {
        let Some(raw) = &shader.glslang else {
            return Ok(GlslangOptions::default());
        };
        // Destructured so that a new field fails to compile until it is carried over.
        let RawGlslang {
            optimization,
            auto_map_locations,
            auto_bind_uniforms,
            hlsl_iomap,
            invert_y,
            target_env,
            generate_debug_info,
            hlsl_functionality1,
            hlsl_offsets,
            nan_clamp,
            binding_base,
        } = raw.get_ref();
        let target_env = match target_env {
            Some(env) => Some(self.target_env(env)?),
            None => None,
        };
        let optimization = match optimization {
            Some(level) => self.optimization(level)?,
            None => Optimization::default(),
        };
        Ok(GlslangOptions {
            optimization,
            auto_map_locations: *auto_map_locations,
            auto_bind_uniforms: *auto_bind_uniforms,
            hlsl_iomap: *hlsl_iomap,
            invert_y: *invert_y,
            target_env,
            generate_debug_info: *generate_debug_info,
            hlsl_functionality1: *hlsl_functionality1,
            hlsl_offsets: *hlsl_offsets,
            nan_clamp: *nan_clamp,
            binding_base: BindingBase::from(*binding_base),
        })
    }

    fn target_env(&self, env: &Spanned<String>) -> Result<VulkanVersion, ManifestError> {
        VulkanVersion::from_name(env.get_ref()).ok_or_else(|| {
            self.error(
                Some(env.span()),
                format!(
                    "unknown target_env `{}` (expected vulkan1.0, vulkan1.1, vulkan1.2 or vulkan1.3)",
                    env.get_ref()
                ),
            )
        })
    }

    fn optimization(&self, level: &Spanned<String>) -> Result<Optimization, ManifestError> {
        Optimization::from_name(level.get_ref()).ok_or_else(|| {
            self.error(
                Some(level.span()),
                format!(
                    "unknown optimization `{}` (expected zero, size or performance)",
                    level.get_ref()
                ),
            )
        })
    }

    /// Options that no pass reads would be silently ignored: refused instead.
    pub(super) fn check_glslang_options_used(
        &self,
        shader: &RawShader,
        passes: &[PassSpec],
    ) -> Result<(), ManifestError> {
        let Some(options) = &shader.glslang else {
            return Ok(());
        };
        if passes
            .iter()
            .any(|p| p.front_end.kind() == CompilerKind::Glslang)
        {
            return Ok(());
        }
        Err(self.error(
            Some(options.span()),
            format!(
                "shader `{name}` sets `[shader.glslang]` options but no pass of it uses glslang",
                name = shader.name.get_ref()
            ),
        ))
    }

    /// A `target_env` too old for the SPIR-V the project's spirv target asks for (glslc
    /// would write a module that Vulkan version cannot consume): refused, located.
    pub(super) fn check_target_env(
        &self,
        shader: &RawShader,
        targets: &[TargetConfig],
    ) -> Result<(), ManifestError> {
        let Some(env) = shader
            .glslang
            .as_ref()
            .and_then(|g| g.get_ref().target_env.as_ref())
        else {
            return Ok(());
        };
        let Some(version) = targets.iter().find_map(TargetConfig::spirv_version) else {
            return Ok(());
        };
        match VulkanVersion::from_name(env.get_ref()) {
            Some(vulkan) if vulkan.max_spirv() < version => Err(self.error(
                Some(env.span()),
                format!(
                    "shader `{}`: target_env {} consumes SPIR-V up to {}.{}, but the spirv target's version is {}.{}",
                    shader.name.get_ref(),
                    vulkan.name(),
                    vulkan.max_spirv().0,
                    vulkan.max_spirv().1,
                    version.0,
                    version.1
                ),
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::compile::{
        BindingBase, ConstantValue, FrontEnd, GlslangOptions, Optimization, VulkanVersion,
    };
    use crate::manifest::test_manifests::{one_pass, parse};

    #[test]
    fn glslang_options_and_shader_models_are_checked() {
        let options = "[shader.glslang]\noptimization = \"performance\"\nhlsl_iomap = true";
        let m = parse(&one_pass("", "a.hlsl", "shader_model = \"6.2\"").replace(
            "\n\n[shader.passes.P]",
            &format!("\n{options}\n\n[shader.passes.P]"),
        ))
        .unwrap();
        let pass = &m.shaders[0].passes[0];
        assert_eq!(
            pass.front_end,
            FrontEnd::Glslang(GlslangOptions {
                optimization: Optimization::Performance,
                hlsl_iomap: true,
                ..GlslangOptions::default()
            })
        );
        assert_eq!(pass.shader_model, Some((6, 2)));
        assert_eq!(
            pass.defines(),
            [
                ("__SHADER_TARGET_MAJOR", "6".to_owned()),
                ("__SHADER_TARGET_MINOR", "2".to_owned())
            ]
        );
        let e = parse(&one_pass("", "a.frag", "shader_model = \"6.0\"")).unwrap_err();
        assert!(e.message.contains("HLSL sources only"), "{e}");
        let e = parse(&one_pass("", "a.hlsl", "shader_model = \"9.9\"")).unwrap_err();
        assert!(e.message.contains("shader model `9.9`"), "{e}");
        let bad = one_pass("", "a.frag", "").replace(
            "\n\n[shader.passes.P]",
            "\n[shader.glslang]\noptimization = \"fast\"\n\n[shader.passes.P]",
        );
        let e = parse(&bad).unwrap_err();
        assert!(e.message.contains("unknown optimization `fast`"), "{e}");
        let stray = one_pass("compiler = \"naga\"", "a.frag", "").replace(
            "\n\n[shader.passes.P]",
            "\n[shader.glslang]\ninvert_y = true\n\n[shader.passes.P]",
        );
        let e = parse(&stray).unwrap_err();
        assert!(e.message.contains("no pass of it uses glslang"), "{e}");
        // Manifest constants reach glslang passes too (as the defaults of the SPIR-V's
        // specialization constants), per shader and per pass.
        let constants = one_pass("constants = { TAPS = 4 }", "a.frag", "");
        let m = parse(&constants).expect("constants for a glslang shader");
        assert_eq!(m.shaders[0].constants["TAPS"], ConstantValue(4.0));
        let on_pass = one_pass("", "a.hlsl", "constants = { TAPS = 4 }");
        let m = parse(&on_pass).expect("constants for a glslang pass");
        assert_eq!(m.shaders[0].passes[0].constants["TAPS"], ConstantValue(4.0));
    }

    #[test]
    fn glslang_compiler_options_are_read_and_checked_with_their_line() {
        let with = |options: &str, targets: &str| {
            one_pass("", "a.hlsl", "")
                .replace(
                    "\n\n[shader.passes.P]",
                    &format!("\n[shader.glslang]\n{options}\n\n[shader.passes.P]"),
                )
                .replace("targets = [\"spirv\"]", targets)
        };
        let spirv = "targets = [\"spirv\"]";
        let m = parse(&with(
            "target_env = \"vulkan1.2\"\ngenerate_debug_info = true\nhlsl_functionality1 = true\nhlsl_offsets = true\nnan_clamp = true\n[shader.glslang.binding_base]\nubo = 4\nuav = 9",
            spirv,
        ))
        .expect("options");
        assert_eq!(
            m.shaders[0].passes[0].front_end,
            FrontEnd::Glslang(GlslangOptions {
                target_env: Some(VulkanVersion::V1_2),
                generate_debug_info: true,
                hlsl_functionality1: true,
                hlsl_offsets: true,
                nan_clamp: true,
                binding_base: BindingBase {
                    ubo: 4,
                    uav: 9,
                    ..BindingBase::default()
                },
                ..GlslangOptions::default()
            })
        );
        let e = parse(&with("target_env = \"vulkan2.0\"", spirv)).unwrap_err();
        assert!(e.message.contains("unknown target_env `vulkan2.0`"), "{e}");
        assert_eq!(e.line, 9, "{e}");
        let e = parse(&with("[shader.glslang.binding_base]\nubos = 1", spirv)).unwrap_err();
        assert!(e.message.contains("ubos"), "{e}");
        let e = parse(&with("[shader.glslang.binding_base]\nubo = -1", spirv)).unwrap_err();
        assert_eq!(e.line, 10, "{e}");
        // An environment too old for the project's SPIR-V: refused at the option's line.
        let newer = "targets = [{ name = \"spirv\", version = \"1.3\" }]";
        let e = parse(&with("target_env = \"vulkan1.0\"", newer)).unwrap_err();
        assert!(
            e.message.contains("target_env vulkan1.0 consumes SPIR-V up to 1.0, but the spirv target's version is 1.3"),
            "{e}"
        );
        assert_eq!(e.line, 9, "{e}");
        assert!(parse(&with("target_env = \"vulkan1.1\"", newer)).is_ok());
    }
}
