//! The generated benchmark project, shared by the pipeline and watch benches: WGSL surface
//! shaders sharing five includes, multiplied by keyword axes whose every keyword changes the
//! preprocessed text, written deterministically into a directory, together with the variant
//! list a Makefile would spell out.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use kiln::compile::{SourceLanguage, Stage};
use kiln::preprocess::{self, PreprocessBudget, PreprocessRequest, SourceLoader};

/// How big a project to generate.
#[derive(Clone, Copy, Debug)]
pub struct Scale {
    /// Shaders (`S0` .. `S{n-1}`), each with a vertex and a fragment pass.
    pub shaders: usize,
    /// Values of the `LIGHTS_n` axis (`LIGHTS_1` ..= `LIGHTS_{lights}`): point lights evaluated.
    pub lights: usize,
    /// Values of the `TONE_n` axis (`TONE_0` .. `TONE_{tones-1}`): tone-mapping operators.
    pub tones: usize,
}

impl Scale {
    /// The pipeline, watch, pack and remote benches' project with `--bench`: 10 shaders x 100
    /// keyword sets x 2 passes = 2,000 variants.
    pub const BENCH: Scale = Scale {
        shaders: 10,
        lights: 5,
        tones: 5,
    };

    /// Their project without `--bench` (a smoke test): 2 shaders x 16 sets x 2 passes.
    #[allow(dead_code)] // not the watch bench's, whose smoke test needs a third tone
    pub const SMOKE: Scale = Scale {
        shaders: 2,
        lights: 2,
        tones: 2,
    };

    /// Keyword sets per shader: `FOG` x `SKIN` x lights x tones.
    pub fn keyword_sets(&self) -> usize {
        2 * 2 * self.lights * self.tones
    }

    /// Variants in the whole project (two passes per shader).
    pub fn variants(&self) -> usize {
        self.shaders * self.keyword_sets() * PASSES.len()
    }
}

/// One pass of every shader: `(name, stage, entry point)`.
pub const PASSES: [(&str, Stage, &str); 2] = [
    ("Vertex", Stage::Vertex, "vs_main"),
    ("Forward", Stage::Fragment, "fs_main"),
];

/// The root-relative directory of the shared includes.
pub const INCLUDE_DIR: &str = "shaders/include";

/// At most this many point lights (the `LIGHTS_n` axis) and tone operators (`TONE_n`).
const MAX_LIGHTS: usize = 8;
const TONE_OPERATORS: usize = 5;

/// What to generate besides the shaders.
pub struct Options<'a> {
    /// The benchmark's name, for the manifest's header comment.
    pub bench: &'a str,
    /// Targets, as the manifest spells them.
    pub targets: &'a [String],
    /// Whether two includes carry the watch bench's edit points (see [`common`] and
    /// [`tonemap`]) at revision 0; otherwise they are in their plain form.
    pub edit_points: bool,
}

/// One variant as a Makefile rule would name it.
#[derive(Clone, Debug)]
pub struct Variant {
    /// Shader name.
    pub shader: String,
    /// Pass name.
    pub pass: &'static str,
    /// Stage of the pass.
    pub stage: Stage,
    /// Entry point of the pass.
    pub entry: &'static str,
    /// Root-relative source file.
    pub source: PathBuf,
    /// Keywords, sorted by byte order (kiln's canonical order).
    pub keywords: Vec<String>,
}

impl Variant {
    /// The variant's preprocessed text, as kiln's preprocessor derives it from `loader`.
    pub fn preprocess(
        &self,
        language: SourceLanguage,
        loader: &dyn SourceLoader,
    ) -> Result<String, String> {
        let keywords: Vec<&str> = self.keywords.iter().map(String::as_str).collect();
        let request = PreprocessRequest {
            entry: &self.source,
            language: language.into(),
            include_dirs: &[],
            keywords: &keywords,
            defines: &[],
            budget: PreprocessBudget::default(),
        };
        preprocess::preprocess(&request, loader)
            .map(|pre| pre.text)
            .map_err(|e| e.to_string())
    }
}

/// Reads a project's files the way the raw loop's peer (a Makefile calling a compiler per
/// variant) does: a plain read of the path, no boundary checks. kiln's own `DiskLoader`
/// resolves each path inside the project root and checks the file first, work the peer does
/// not do: timing the peer through it would flatter kiln.
pub struct PlainLoader {
    root: PathBuf,
}

impl PlainLoader {
    /// A loader for the project under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }
}

impl SourceLoader for PlainLoader {
    fn load(&self, path: &Path) -> Result<std::sync::Arc<str>, std::io::Error> {
        std::fs::read_to_string(self.root.join(path)).map(std::sync::Arc::from)
    }
}

/// A generated project on disk.
pub struct Generated {
    /// The project root, holding the manifest and `shaders/`.
    pub root: PathBuf,
    /// The manifest, `root/kiln.toml`.
    pub manifest: PathBuf,
    /// Every variant, in shader, pass, keyword-set order.
    pub variants: Vec<Variant>,
    /// Source language of every shader.
    pub language: SourceLanguage,
}

/// Writes the project under `root` (created if missing).
pub fn generate(root: &Path, scale: Scale, options: &Options) -> std::io::Result<Generated> {
    assert!(scale.lights >= 1 && scale.lights <= MAX_LIGHTS);
    assert!(scale.tones >= 1 && scale.tones <= TONE_OPERATORS);
    let include_dir = root.join(INCLUDE_DIR);
    std::fs::create_dir_all(&include_dir)?;
    let revision = options.edit_points.then_some(0);
    std::fs::write(include_dir.join("common.wgsl"), common(revision))?;
    std::fs::write(include_dir.join("lighting.wgsl"), LIGHTING)?;
    std::fs::write(include_dir.join("fog.wgsl"), FOG)?;
    std::fs::write(include_dir.join("skin.wgsl"), SKIN)?;
    std::fs::write(
        include_dir.join("tonemap.wgsl"),
        tonemap(scale.tones, revision),
    )?;

    let quoted: Vec<String> = options.targets.iter().map(|t| format!("\"{t}\"")).collect();
    let mut manifest = format!(
        "# Generated by kiln's {} benchmark.\n[project]\ntargets = [{}]\n",
        options.bench,
        quoted.join(", ")
    );
    let lights_axis: Vec<String> = (1..=scale.lights).map(|n| format!("LIGHTS_{n}")).collect();
    let tones_axis: Vec<String> = (0..scale.tones).map(|n| format!("TONE_{n}")).collect();
    let axis = |values: &[String]| {
        let quoted: Vec<String> = values.iter().map(|v| format!("\"{v}\"")).collect();
        format!("[{}]", quoted.join(", "))
    };
    let mut variants = Vec::with_capacity(scale.variants());
    for shader in 0..scale.shaders {
        let name = format!("S{shader}");
        let source = PathBuf::from(format!("shaders/s{shader}.wgsl"));
        std::fs::write(root.join(&source), surface_shader(shader, scale.lights))?;
        let _ = write!(
            manifest,
            "\n[[shader]]\nname = \"{name}\"\nsource = \"{}\"\n\
             axes = [[\"_\", \"FOG\"], [\"_\", \"SKIN\"], {}, {}]\n",
            source.display(),
            axis(&lights_axis),
            axis(&tones_axis),
        );
        for (pass, stage, entry) in PASSES {
            let _ = write!(
                manifest,
                "\n[shader.passes.{pass}]\nstage = \"{stage}\"\nentry = \"{entry}\"\n"
            );
            for fog in [false, true] {
                for skin in [false, true] {
                    for lights in &lights_axis {
                        for tone in &tones_axis {
                            let mut keywords = vec![lights.clone(), tone.clone()];
                            if fog {
                                keywords.push("FOG".to_owned());
                            }
                            if skin {
                                keywords.push("SKIN".to_owned());
                            }
                            keywords.sort();
                            variants.push(Variant {
                                shader: name.clone(),
                                pass,
                                stage,
                                entry,
                                source: source.clone(),
                                keywords,
                            });
                        }
                    }
                }
            }
        }
    }
    let manifest_path = root.join("kiln.toml");
    std::fs::write(&manifest_path, manifest)?;
    Ok(Generated {
        root: root.to_owned(),
        manifest: manifest_path,
        variants,
        language: SourceLanguage::Wgsl,
    })
}

/// The include every shader reads first. With a `revision` (the watch bench's comment edit)
/// its first comment names it, and each revision differs from the others in that comment only.
pub fn common(revision: Option<usize>) -> String {
    let mut text = String::from("// Shared uniforms and helpers of every surface shader");
    if let Some(revision) = revision {
        let _ = write!(text, " (comment revision {revision})");
    }
    text.push_str(".\n");
    text.push_str(COMMON_BODY);
    text
}

const COMMON_BODY: &str = "\
#pragma once

struct Globals {
    view_proj: mat4x4<f32>,
    // xyz: camera position.
    camera: vec4<f32>,
    // x: seconds, y: fog density.
    time: vec4<f32>,
};

struct Object {
    model: mat4x4<f32>,
    tint: vec4<f32>,
};

@group(0) @binding(0) var<uniform> globals: Globals;
@group(0) @binding(1) var<uniform> object: Object;

fn transform_normal(n: vec3<f32>) -> vec3<f32> {
    return normalize((object.model * vec4<f32>(n, 0.0)).xyz);
}

fn saturate3(v: vec3<f32>) -> vec3<f32> {
    return clamp(v, vec3<f32>(0.0), vec3<f32>(1.0));
}
";

const LIGHTING: &str = "\
// Sun and point lights.
#pragma once

struct PointLight {
    // xyz: position, w: range.
    position: vec4<f32>,
    color: vec4<f32>,
};

struct Lights {
    sun_direction: vec4<f32>,
    sun_color: vec4<f32>,
    points: array<PointLight, 8>,
};

@group(0) @binding(2) var<uniform> lights: Lights;

fn sun_light(n: vec3<f32>) -> vec3<f32> {
    return lights.sun_color.rgb * max(dot(n, -lights.sun_direction.xyz), 0.0);
}

fn point_light(position: vec3<f32>, n: vec3<f32>, index: u32) -> vec3<f32> {
    let light = lights.points[index];
    let to_light = light.position.xyz - position;
    let falloff = saturate(1.0 - length(to_light) / max(light.position.w, 0.001));
    return light.color.rgb * max(dot(n, normalize(to_light)), 0.0) * falloff * falloff;
}
";

const FOG: &str = "\
// Exponential distance fog.
#pragma once
#ifdef FOG
const FOG_COLOR: vec3<f32> = vec3<f32>(0.55, 0.6, 0.7);

fn fog_factor(distance_to_camera: f32) -> f32 {
    return exp(-distance_to_camera * globals.time.y);
}

fn apply_fog(color: vec3<f32>, factor: f32) -> vec3<f32> {
    return mix(FOG_COLOR, color, saturate(factor));
}
#endif
";

const SKIN: &str = "\
// Linear blend skinning with four joints per vertex.
#pragma once
#ifdef SKIN
struct Joints {
    matrices: array<mat4x4<f32>, 64>,
};

@group(2) @binding(0) var<uniform> joints: Joints;

fn skin_matrix(indices: vec4<u32>, weights: vec4<f32>) -> mat4x4<f32> {
    return joints.matrices[indices.x] * weights.x
        + joints.matrices[indices.y] * weights.y
        + joints.matrices[indices.z] * weights.z
        + joints.matrices[indices.w] * weights.w;
}
#endif
";

/// The tone-mapping include, one operator per `TONE_n` keyword. Without an `exposure`, one
/// `#if`/`#elif` chain. With one (the watch bench's edit point), one `#ifdef TONE_n` block per
/// operator, the `TONE_2` block scaling by a constant set from `exposure`: each value is a
/// different text for exactly the `TONE_2` variants.
pub fn tonemap(tones: usize, exposure: Option<usize>) -> String {
    let mut text =
        String::from("// Tone mapping, one operator per TONE_n keyword.\n#pragma once\n\n");
    let Some(exposure) = exposure else {
        let operators = [
            "    return saturate3(color);\n",
            "    return color / (color + vec3<f32>(1.0));\n",
            "    let a = color * (2.51 * color + vec3<f32>(0.03));\n    \
             let b = color * (2.43 * color + vec3<f32>(0.59)) + vec3<f32>(0.14);\n    \
             return saturate3(a / b);\n",
            "    return pow(saturate3(color), vec3<f32>(1.0 / 2.2));\n",
            "    return vec3<f32>(1.0) - exp(-color * 1.5);\n",
        ];
        text.push_str("fn tonemap(color: vec3<f32>) -> vec3<f32> {\n");
        for (n, operator) in operators.iter().take(tones).enumerate() {
            let directive = if n == 0 { "#if" } else { "#elif" };
            let _ = writeln!(text, "{directive} defined(TONE_{n})");
            text.push_str(operator);
        }
        text.push_str("#else\n    return color;\n#endif\n}\n");
        return text;
    };
    let operators = [
        "    mapped = saturate3(color);\n".to_owned(),
        "    mapped = color / (color + vec3<f32>(1.0));\n".to_owned(),
        format!(
            "    let exposed = color * {:.4};\n    \
             let a = exposed * (2.51 * exposed + vec3<f32>(0.03));\n    \
             let b = exposed * (2.43 * exposed + vec3<f32>(0.59)) + vec3<f32>(0.14);\n    \
             mapped = saturate3(a / b);\n",
            1.0 + exposure as f64 * 1e-4
        ),
        "    mapped = pow(saturate3(color), vec3<f32>(1.0 / 2.2));\n".to_owned(),
        "    mapped = vec3<f32>(1.0) - exp(-color * 1.5);\n".to_owned(),
    ];
    text.push_str("fn tonemap(color: vec3<f32>) -> vec3<f32> {\n    var mapped = color;\n");
    for (n, operator) in operators.iter().take(tones).enumerate() {
        let _ = writeln!(text, "#ifdef TONE_{n}");
        text.push_str(operator);
        text.push_str("#endif\n");
    }
    text.push_str("    return mapped;\n}\n");
    text
}

/// Shader `index`: the shared includes, a vertex and a fragment entry point, and
/// `index % 4 + 1` detail layers whose constants depend on `index` (so no two shaders share a
/// preprocessed text).
fn surface_shader(index: usize, lights: usize) -> String {
    let layers = index % 4 + 1;
    let frequency = 0.5 + index as f32 * 0.25;
    let mut text = format!(
        "// Generated surface shader {index}: {layers} detail layers.\n\
         #include \"include/common.wgsl\"\n\
         #include \"include/lighting.wgsl\"\n\
         #include \"include/fog.wgsl\"\n\
         #include \"include/skin.wgsl\"\n\
         #include \"include/tonemap.wgsl\"\n\n"
    );
    text.push_str(
        "\
struct VertexInput {
    @location(0) position: vec3<f32>,
    @location(1) normal: vec3<f32>,
    @location(2) uv: vec2<f32>,
#ifdef SKIN
    @location(3) joint_indices: vec4<u32>,
    @location(4) joint_weights: vec4<f32>,
#endif
};

struct VertexOutput {
    @builtin(position) clip_position: vec4<f32>,
    @location(0) world_position: vec3<f32>,
    @location(1) world_normal: vec3<f32>,
    @location(2) uv: vec2<f32>,
#ifdef FOG
    @location(3) fog: f32,
#endif
};

@group(1) @binding(0) var albedo_texture: texture_2d<f32>;
@group(1) @binding(1) var detail_texture: texture_2d<f32>;
@group(1) @binding(2) var surface_sampler: sampler;

",
    );
    let _ = write!(
        text,
        "\
@vertex
fn vs_main(input: VertexInput) -> VertexOutput {{
#ifdef SKIN
    let skin = skin_matrix(input.joint_indices, input.joint_weights);
    let local_position = (skin * vec4<f32>(input.position, 1.0)).xyz;
    let local_normal = (skin * vec4<f32>(input.normal, 0.0)).xyz;
#else
    let local_position = input.position;
    let local_normal = input.normal;
#endif
    let sway = sin(globals.time.x * {frequency:.2} + local_position.x) * {amplitude:.3};
    let world_position = (object.model * vec4<f32>(local_position, 1.0)).xyz + vec3<f32>(0.0, sway, 0.0);
    var out: VertexOutput;
    out.clip_position = globals.view_proj * vec4<f32>(world_position, 1.0);
    out.world_position = world_position;
    out.world_normal = transform_normal(local_normal);
    out.uv = input.uv;
#ifdef FOG
    out.fog = fog_factor(distance(world_position, globals.camera.xyz));
#endif
    return out;
}}

",
        amplitude = 0.01 * (index + 1) as f32,
    );
    for layer in 0..layers {
        let _ = write!(
            text,
            "\
fn detail_layer_{layer}(uv: vec2<f32>, color: vec3<f32>) -> vec3<f32> {{
    let scale = {scale:.1};
    let detail = textureSample(detail_texture, surface_sampler, uv * scale + vec2<f32>({offset:.2}, 0.0)).rgb;
    return mix(color, color * detail * 2.0, {weight:.2});
}}

",
            scale = 2.0 + (index * 3 + layer) as f32,
            offset = 0.1 * layer as f32,
            weight = 0.2 + 0.05 * layer as f32,
        );
    }
    text.push_str(
        "\
@fragment
fn fs_main(input: VertexOutput) -> @location(0) vec4<f32> {
    let base = textureSample(albedo_texture, surface_sampler, input.uv) * object.tint;
    var albedo = base.rgb;
",
    );
    for layer in 0..layers {
        let _ = writeln!(text, "    albedo = detail_layer_{layer}(input.uv, albedo);");
    }
    text.push_str("    let n = normalize(input.world_normal);\n    var light = sun_light(n);\n");
    // Light k is evaluated unless a LIGHTS_n with n <= k is defined: LIGHTS_n evaluates n.
    for light in 0..lights {
        if light == 0 {
            text.push_str("    light += point_light(input.world_position, n, 0u);\n");
            continue;
        }
        let excluded: Vec<String> = (1..=light)
            .map(|n| format!("!defined(LIGHTS_{n})"))
            .collect();
        let _ = write!(
            text,
            "#if {}\n    light += point_light(input.world_position, n, {light}u);\n#endif\n",
            excluded.join(" && ")
        );
    }
    text.push_str(
        "\
    var color = albedo * light;
#ifdef FOG
    color = apply_fog(color, input.fog);
#endif
    return vec4<f32>(tonemap(color), base.a);
}
",
    );
    text
}
