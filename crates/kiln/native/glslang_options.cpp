// The three glslc options glslang's C interface has no switch for, set on the C interface's
// shader through glslang's C++ API (compiled into glslang-sys's static library with the rest
// of glslang; only the headers are read here).

#include <glslang/Public/ShaderLang.h>

// glslang_c_interface.cpp defines `glslang_shader_s` privately; its first member is the
// TShader it wraps. kiln pins glslang-sys exactly (`=` in the workspace Cargo.toml), and the
// tests in tests/glslang_targets.rs fail if an update moves that member, because each option
// must change the SPIR-V.
struct KilnGlslangShaderHead {
    glslang::TShader* shader;
};

// Set before glslang_shader_preprocess: each option is read while parsing (functionality1,
// nan clamp) or by glslang_program_map_io (HLSL I/O mapping) through the shader's
// intermediate, so setting them early is what glslangValidator does too.
extern "C" int kiln_glslang_shader_set_extra_options(
    void* c_shader, int hlsl_iomap, int hlsl_functionality1, int nan_clamp)
{
    if (c_shader == nullptr)
        return 0;
    glslang::TShader* shader = static_cast<KilnGlslangShaderHead*>(c_shader)->shader;
    if (shader == nullptr)
        return 0;
    if (hlsl_iomap)
        shader->setHlslIoMapping(true);
    if (hlsl_functionality1)
        shader->setEnvTargetHlslFunctionality1();
    if (nan_clamp)
        shader->setNanMinMaxClamp(true);
    return 1;
}
