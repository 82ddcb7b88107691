//! Benchmark of a cold `kiln build` of a generated Vulkan GLSL project compiled by glslang
//! (in-process, feature `glslang`) against what users run today: a loop invoking `glslc` once
//! per variant (`glslc -DKEYWORD ... source -o out/<shader>/<pass>/<keywords>.spv`), one
//! process at a time as a Makefile does, and two at a time as `make -j2` does.
//!
//! The project: 4 shaders x 64 keyword sets x 2 passes (vertex, fragment) = 512 variants, with
//! no `#include` so that glslc reads exactly what kiln reads. Every keyword changes the
//! fragment shader; the vertex shader reads only two of them, so its 64 sets have 4 distinct
//! texts, which kiln compiles once each (deduplication) and the loop compiles 64 times.
//!
//! Printed, from this one run with the contenders alternating rep by rep (median and minimum):
//! - `glslang cold_vs_glslc ratio=<glslc loop / kiln cold>` (goal >= 5), and `ratio_j2=` for
//!   the two-process loop;
//! - `glslang outputs identical=<n>/<variants>`: kiln's outputs compared byte for byte with
//!   glslc's (so both ran with the same options: glslc's defaults, keywords as `-DK=1`);
//! - `glslang loadavg before=` / `after=`: the machine's load, which slows glslc's process
//!   starts far more than kiln.
//!
//! Each clock stops when the contender's last output is written: kiln's covers opening the
//! project, the build, the index and the store; the loops' the last glslc process.
//!
//! `KILN_BENCH_REPS` sets the reps (default 1: the loop takes about a minute);
//! `KILN_BENCH_DIR` where the project is generated. Without `--bench` (as under
//! `cargo test --benches`) it runs once on one shader of 4 keyword sets, as a smoke test.

#[path = "common/stats.rs"]
mod stats;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use kiln::pipeline::{BuildOptions, Project};
use stats::{ms, ratio, Stats};

/// Keywords of every shader: the first two reach the vertex shader too.
const KEYWORDS: [&str; 6] = [
    "SKIN",
    "INSTANCING",
    "FOG",
    "NORMAL_MAP",
    "SHADOWS",
    "EMISSION",
];

fn main() -> ExitCode {
    let full = std::env::args().any(|arg| arg == "--bench");
    match run(full) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("glslang bench failed: {message}");
            ExitCode::FAILURE
        }
    }
}

struct Variant {
    shader: String,
    pass: &'static str,
    source: PathBuf,
    keywords: Vec<&'static str>,
}

fn run(full: bool) -> Result<(), String> {
    if Command::new("glslc").arg("--version").output().is_err() {
        return Err("glslc is not on PATH (Debian: apt-get install glslc)".into());
    }
    let (shaders, axes) = if full { (4, 6) } else { (1, 2) };
    let reps: usize = std::env::var("KILN_BENCH_REPS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1)
        .max(1);
    let base = std::env::var_os("KILN_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::tempdir_in(base).map_err(|e| e.to_string())?;
    let variants = generate(dir.path(), shaders, axes)?;
    println!(
        "glslang project shaders={shaders} variants={} reps={reps}",
        variants.len()
    );
    // Every glslc call starts a process, which a loaded machine slows far more than kiln's
    // in-process compiles: the load is printed with the figures it inflates.
    println!("glslang loadavg before={}", load_average());

    let mut kiln_times = Vec::new();
    let mut loop_times = Vec::new();
    let mut loop2_times = Vec::new();
    let mut identical = 0;
    for rep in 0..reps {
        let out = dir.path().join(format!("kiln-out-{rep}"));
        let cache = dir.path().join(format!("kiln-cache-{rep}"));
        let started = Instant::now();
        let report = {
            let mut project = Project::open(&BuildOptions {
                manifest: dir.path().join("kiln.toml"),
                out_dir: Some(out.clone()),
                cache_dir: Some(cache),
                ..BuildOptions::default()
            })
            .map_err(|e| e.to_string())?;
            project.build(&|_| {}).map_err(|e| e.to_string())?
        };
        kiln_times.push(started.elapsed());
        if report.failed > 0 || report.variants != variants.len() {
            return Err(format!("kiln: {:?}", report.diagnostics));
        }
        if rep == 0 {
            println!(
                "glslang kiln compiled={} deduplicated={}",
                report.compiled, report.deduplicated
            );
        }

        let glslc_out = dir.path().join(format!("glslc-out-{rep}"));
        let started = Instant::now();
        glslc_loop(dir.path(), &variants, &glslc_out, 1)?;
        loop_times.push(started.elapsed());

        let glslc2_out = dir.path().join(format!("glslc2-out-{rep}"));
        let started = Instant::now();
        glslc_loop(dir.path(), &variants, &glslc2_out, 2)?;
        loop2_times.push(started.elapsed());

        if rep == 0 {
            for v in &variants {
                let relative = output(v);
                let ours = std::fs::read(out.join(&relative)).map_err(|e| e.to_string())?;
                let theirs = std::fs::read(glslc_out.join(&relative)).map_err(|e| e.to_string())?;
                identical += usize::from(ours == theirs);
            }
        }
    }
    let kiln = Stats::of(&kiln_times);
    let glslc = Stats::of(&loop_times);
    let glslc2 = Stats::of(&loop2_times);
    println!(
        "glslang cold kiln_ms={:.1} (min {:.1}) glslc_loop_ms={:.1} (min {:.1}) glslc_j2_ms={:.1} (min {:.1})",
        ms(kiln.median),
        ms(kiln.min),
        ms(glslc.median),
        ms(glslc.min),
        ms(glslc2.median),
        ms(glslc2.min)
    );
    println!(
        "glslang cold_vs_glslc ratio={:.1} (min {:.1}) ratio_j2={:.1} (min {:.1}) per_variant kiln_ms={:.2} glslc_ms={:.1}",
        ratio(glslc.median, kiln.median),
        ratio(glslc.min, kiln.min),
        ratio(glslc2.median, kiln.median),
        ratio(glslc2.min, kiln.min),
        ms(kiln.median) / variants.len() as f64,
        ms(glslc.median) / variants.len() as f64
    );
    println!("glslang outputs identical={identical}/{}", variants.len());
    println!("glslang loadavg after={}", load_average());
    Ok(())
}

/// The 1, 5 and 15 minute load averages (`/proc/loadavg`), or `unknown`.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

fn output(v: &Variant) -> PathBuf {
    let name = if v.keywords.is_empty() {
        "_".to_owned()
    } else {
        v.keywords.join("+")
    };
    PathBuf::from(&v.shader)
        .join(v.pass)
        .join(format!("{name}.spv"))
}

/// `glslc` once per variant, `parallel` processes at a time, each writing its output.
fn glslc_loop(
    root: &Path,
    variants: &[Variant],
    out: &Path,
    parallel: usize,
) -> Result<(), String> {
    let chunks: Vec<&[Variant]> = variants.chunks(variants.len().div_ceil(parallel)).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                scope.spawn(move || -> Result<(), String> {
                    for v in chunk {
                        let target = out.join(output(v));
                        if let Some(parent) = target.parent() {
                            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
                        }
                        let mut command = Command::new("glslc");
                        for keyword in &v.keywords {
                            command.arg(format!("-D{keyword}=1"));
                        }
                        let status = command
                            .arg(root.join(&v.source))
                            .arg("-o")
                            .arg(&target)
                            .status()
                            .map_err(|e| e.to_string())?;
                        if !status.success() {
                            return Err(format!("glslc failed on {}", v.source.display()));
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().map_err(|_| "glslc thread panicked".to_owned())?)
    })
}

/// Writes the project; returns its variants in a stable order.
fn generate(root: &Path, shaders: usize, axes: usize) -> Result<Vec<Variant>, String> {
    let write = |relative: &str, text: &str| -> Result<(), String> {
        let path = root.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        std::fs::write(&path, text).map_err(|e| e.to_string())
    };
    let keywords = &KEYWORDS[..axes];
    let mut manifest = String::from("[project]\ntargets = [\"spirv\"]\n");
    let mut variants = Vec::new();
    for s in 0..shaders {
        let name = format!("Surface{s}");
        let vert = format!("shaders/surface{s}.vert");
        let frag = format!("shaders/surface{s}.frag");
        write(&vert, &vertex_shader(s))?;
        write(&frag, &fragment_shader(s))?;
        let axes: Vec<String> = keywords
            .iter()
            .map(|k| format!("[\"_\", \"{k}\"]"))
            .collect();
        let _ = write!(
            manifest,
            "\n[[shader]]\nname = \"{name}\"\naxes = [{}]\n\n[shader.passes.Vertex]\nstage = \"vertex\"\nentry = \"main\"\nsource = \"{vert}\"\n\n[shader.passes.Fragment]\nstage = \"fragment\"\nentry = \"main\"\nsource = \"{frag}\"\n",
            axes.join(", ")
        );
        for (pass, source) in [("Fragment", &frag), ("Vertex", &vert)] {
            for mask in 0..(1usize << keywords.len()) {
                let mut set: Vec<&'static str> = keywords
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| mask & (1 << i) != 0)
                    .map(|(_, k)| *k)
                    .collect();
                set.sort_unstable();
                variants.push(Variant {
                    shader: name.clone(),
                    pass,
                    source: PathBuf::from(source),
                    keywords: set,
                });
            }
        }
    }
    write("kiln.toml", &manifest)?;
    Ok(variants)
}

fn vertex_shader(seed: usize) -> String {
    format!(
        r#"#version 450
// Surface {seed}: vertex stage. Only SKIN and INSTANCING reach it.
layout(set = 0, binding = 0) uniform Camera {{
    mat4 view_projection;
    vec4 time;
}} camera;

#ifdef SKIN
layout(set = 0, binding = 1) readonly buffer Bones {{ mat4 bones[]; }} skeleton;
layout(location = 3) in uvec4 in_joints;
layout(location = 4) in vec4 in_weights;
#endif
#ifdef INSTANCING
layout(set = 0, binding = 2) readonly buffer Instances {{ mat4 models[]; }} instances;
#endif

layout(push_constant) uniform Object {{ mat4 model; }} object;

layout(location = 0) in vec3 in_position;
layout(location = 1) in vec3 in_normal;
layout(location = 2) in vec2 in_uv;
layout(location = 0) out vec3 out_world;
layout(location = 1) out vec3 out_normal;
layout(location = 2) out vec2 out_uv;

void main() {{
    mat4 model = object.model;
#ifdef INSTANCING
    model = instances.models[gl_InstanceIndex];
#endif
    vec4 position = vec4(in_position, 1.0);
    vec3 normal = in_normal;
#ifdef SKIN
    mat4 skin = skeleton.bones[in_joints.x] * in_weights.x + skeleton.bones[in_joints.y] * in_weights.y
              + skeleton.bones[in_joints.z] * in_weights.z + skeleton.bones[in_joints.w] * in_weights.w;
    position = skin * position;
    normal = mat3(skin) * normal;
#endif
    vec4 world = model * position;
    world.y += sin(camera.time.x + float({seed})) * 0.01;
    out_world = world.xyz;
    out_normal = mat3(model) * normal;
    out_uv = in_uv;
    gl_Position = camera.view_projection * world;
}}
"#
    )
}

fn fragment_shader(seed: usize) -> String {
    format!(
        r#"#version 450
// Surface {seed}: fragment stage; every keyword changes it.
layout(set = 1, binding = 0) uniform sampler2D albedo_map;
layout(set = 1, binding = 1) uniform Material {{
    vec4 base_color;
    vec4 emission;
    vec4 fog_color;
    vec3 light_direction;
    float roughness;
}} material;
#ifdef NORMAL_MAP
layout(set = 1, binding = 2) uniform sampler2D normal_map;
#endif
#ifdef SHADOWS
layout(set = 1, binding = 3) uniform sampler2DShadow shadow_map;
layout(set = 1, binding = 4) uniform Shadow {{ mat4 light_view_projection; }} shadow;
#endif
layout(constant_id = 0) const float AMBIENT = 0.{seed}5;

layout(location = 0) in vec3 in_world;
layout(location = 1) in vec3 in_normal;
layout(location = 2) in vec2 in_uv;
layout(location = 0) out vec4 out_color;

float visibility() {{
#ifdef SHADOWS
    vec4 p = shadow.light_view_projection * vec4(in_world, 1.0);
    vec3 uvz = p.xyz / p.w * 0.5 + 0.5;
    float sum = 0.0;
    for (int x = -1; x <= 1; ++x) {{
        for (int y = -1; y <= 1; ++y) {{
            sum += texture(shadow_map, uvz + vec3(x, y, 0) / 2048.0);
        }}
    }}
    return sum / 9.0;
#else
    return 1.0;
#endif
}}

void main() {{
    vec3 n = normalize(in_normal);
#ifdef NORMAL_MAP
    vec3 t = texture(normal_map, in_uv).xyz * 2.0 - 1.0;
    n = normalize(n + t * (1.0 - material.roughness));
#endif
#if defined(SKIN) && defined(INSTANCING)
    n = -n;
#endif
    vec4 albedo = texture(albedo_map, in_uv) * material.base_color;
    float diffuse = max(dot(n, -material.light_direction), 0.0) * visibility();
    vec3 color = albedo.rgb * (AMBIENT + diffuse);
#ifdef EMISSION
    color += material.emission.rgb * material.emission.a;
#endif
#ifdef FOG
    float fog = clamp(length(in_world) * 0.01, 0.0, 1.0);
    color = mix(color, material.fog_color.rgb, fog);
#endif
    out_color = vec4(color, albedo.a);
}}
"#
    )
}
