//! End-to-end tests of `kiln build`: each builds a temporary project with the real binary,
//! in a new process every time, and asserts on what it compiled and what reached the disk.

use kiln_test_support::TempProject;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

const MANIFEST: &str = r#"
[project]
targets = ["spirv", "msl", "hlsl"]

[[shader]]
name = "Lit"
source = "shaders/lit.wgsl"
axes = [["_", "FOG"], ["_", "SKIN"], ["LIGHTS_1", "LIGHTS_4"]]

[shader.passes.Forward]
stage = "fragment"
entry = "fs_main"

[shader.passes.Depth]
stage = "vertex"
entry = "vs_main"

[[shader]]
name = "Post"
source = "shaders/post.frag"
compiler = "naga"
axes = [["_", "VIGNETTE"], ["_", "HDR"]]

[shader.passes.Main]
stage = "fragment"
entry = "main"
"#;

const LIT: &str = r#"#include "include/common.wgsl"

struct VsOut {
    @builtin(position) position: vec4<f32>,
    @location(0) uv: vec2<f32>,
};

@vertex
fn vs_main(@location(0) position: vec3<f32>) -> VsOut {
    var out: VsOut;
    var p = position;
#ifdef SKIN
    p = p * skin_scale();
#endif
    out.position = vec4<f32>(p, 1.0);
    out.uv = p.xy;
    return out;
}

@fragment
fn fs_main(in: VsOut) -> @location(0) vec4<f32> {
    var color = base_color(in.uv);
#ifdef LIGHTS_4
    color = color * 4.0;
#else
    color = color * 1.0;
#endif
#ifdef FOG
    color = mix(color, vec4<f32>(0.5, 0.5, 0.5, 1.0), 0.25);
#endif
    return color;
}
"#;

const COMMON: &str = r#"// Shared helpers.
fn base_color(uv: vec2<f32>) -> vec4<f32> {
    return vec4<f32>(uv, 0.0, 1.0);
}

fn skin_scale() -> f32 {
    return 1.5;
}
"#;

const POST: &str = r#"#version 450
layout(location = 0) in vec2 v_uv;
layout(location = 0) out vec4 o_color;
layout(set = 0, binding = 0) uniform Params { vec4 tint; };
void main() {
    vec4 c = tint;
#ifdef VIGNETTE
    c *= 1.0 - length(v_uv - vec2(0.5));
#endif
    o_color = c;
}
"#;

const KILN: &str = env!("CARGO_BIN_EXE_kiln");

/// A temporary project: manifest and sources.
fn project() -> TempProject {
    TempProject::from_files([
        ("kiln.toml", MANIFEST),
        ("shaders/lit.wgsl", LIT),
        ("shaders/include/common.wgsl", COMMON),
        ("shaders/post.frag", POST),
    ])
}

/// `kiln build` with the human report.
fn run(p: &TempProject, extra: &[&str]) -> Output {
    p.command(KILN, "build").args(extra).output().unwrap()
}

/// Runs `kiln build --json` and returns the report and the exit code.
fn build(p: &TempProject) -> (Value, i32) {
    build_with(p, &[])
}

fn build_with(p: &TempProject, extra: &[&str]) -> (Value, i32) {
    let build = p.build_cli(KILN, extra);
    (build.report, build.code)
}

fn read_index(p: &TempProject) -> Value {
    index_in(&p.path("out"))
}

fn index_in(out: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(out.join("index.json")).unwrap()).unwrap()
}

fn count(report: &Value, field: &str) -> u64 {
    report[field]
        .as_u64()
        .unwrap_or_else(|| panic!("no {field} in {report}"))
}

fn entries(index: &Value) -> &Vec<Value> {
    index["entries"].as_array().unwrap()
}

/// content hash per output path.
fn hashes(index: &Value) -> std::collections::BTreeMap<String, String> {
    entries(index)
        .iter()
        .map(|e| {
            (
                e["path"].as_str().unwrap().to_owned(),
                e["content_hash"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

// Lit: 2 x 2 x 2 = 8 keyword sets x 2 passes; Post: 4 sets x 1 pass, of which HDR (unused
// by its code) gives 2 texts identical to others.
const VARIANTS: u64 = 20;
const TARGETS: usize = 3;

#[test]
fn cold_build_compiles_everything_and_a_new_process_compiles_nothing() {
    let p = project();
    let (cold, code) = build(&p);
    assert_eq!(code, 0, "{cold}");
    assert_eq!(count(&cold, "variants"), VARIANTS);
    assert_eq!(count(&cold, "failed"), 0);
    assert_eq!(count(&cold, "compiled"), VARIANTS - 2, "{cold}");
    assert_eq!(count(&cold, "deduplicated"), 2, "{cold}");
    let index = read_index(&p);
    assert_eq!(entries(&index).len(), VARIANTS as usize * TARGETS);
    for entry in entries(&index) {
        let file = p.path("out").join(entry["path"].as_str().unwrap());
        let bytes = std::fs::read(&file).unwrap();
        assert_eq!(bytes.len() as u64, entry["bytes"].as_u64().unwrap());
        assert_eq!(
            blake3::hash(&bytes).to_hex().as_str(),
            entry["content_hash"].as_str().unwrap()
        );
        assert_eq!(entry["digest"].as_str().unwrap().len(), 12);
    }

    let (warm, code) = build(&p);
    assert_eq!(code, 0);
    assert_eq!(count(&warm, "compiled"), 0, "{warm}");
    assert_eq!(count(&warm, "cached"), VARIANTS);
    assert_eq!(count(&warm, "outputs_written"), 0);
    assert_eq!(read_index(&p), index);
}

#[test]
fn a_comment_edited_in_an_include_recompiles_nothing() {
    let p = project();
    build(&p);
    let before = read_index(&p);
    p.edit(
        "shaders/include/common.wgsl",
        "// Shared helpers.",
        "// Shared helpers, reworded.\n// And a second comment line.\n/* a block\n   comment */",
    );
    let (report, code) = build(&p);
    assert_eq!(code, 0);
    assert_eq!(count(&report, "compiled"), 0, "{report}");
    assert_eq!(count(&report, "outputs_written"), 0);
    // The revision (a hash of the include closure) moved; the outputs did not.
    assert_eq!(hashes(&read_index(&p)), hashes(&before));
}

#[test]
fn code_edited_under_ifdef_fog_recompiles_only_fog_variants() {
    let p = project();
    build(&p);
    let before = hashes(&read_index(&p));
    p.edit("shaders/lit.wgsl", "0.25);", "0.75);");
    let (report, code) = build(&p);
    assert_eq!(code, 0);
    // The 4 FOG keyword sets x 2 passes have a new text; nothing else compiles.
    assert_eq!(count(&report, "compiled"), 8, "{report}");
    let after = hashes(&read_index(&p));
    let changed: Vec<&String> = after
        .iter()
        .filter(|(path, hash)| before.get(*path) != Some(hash))
        .map(|(path, _)| path)
        .collect();
    assert_eq!(changed.len(), 4 * TARGETS, "{changed:?}");
    assert!(changed
        .iter()
        .all(|p| p.starts_with("Lit/Forward/") && p.contains("FOG")));
}

#[test]
fn a_corrupt_store_entry_is_detected_reported_and_rebuilt() {
    let p = project();
    build(&p);
    let before = hashes(&read_index(&p));
    // Two rows changed behind kiln's back through a second SQLite connection: one byte
    // flipped at the end of a payload, one payload truncated.
    let db = store_db(&p);
    let ids: Vec<i64> = db
        .prepare("SELECT id FROM entries ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(ids.len() >= 10);
    let mut payload: Vec<u8> = db
        .query_row("SELECT payload FROM entries WHERE id = ?1", [ids[0]], |r| {
            r.get(0)
        })
        .unwrap();
    let last = payload.len() - 1;
    payload[last] ^= 0xff;
    db.execute(
        "UPDATE entries SET payload = ?2 WHERE id = ?1",
        (ids[0], &payload),
    )
    .unwrap();
    db.execute(
        "UPDATE entries SET payload = substr(payload, 1, length(payload) / 2) WHERE id = ?1",
        [ids[1]],
    )
    .unwrap();
    drop(db);

    let (report, code) = build_with(&p, &["--out", p.path("out2").to_str().unwrap()]);
    assert_eq!(code, 0, "{report}");
    let warnings: Vec<&Value> = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| {
            d["severity"] == "warning" && d["message"].as_str().unwrap().contains("corrupt")
        })
        .collect();
    assert_eq!(warnings.len(), 2, "{report}");
    assert!(count(&report, "compiled") >= 1, "{report}");
    // Rebuilt identically, and the store holds valid entries again.
    assert_eq!(hashes(&index_in(&p.path("out2"))), before);
    let (again, _) = build_with(&p, &["--out", p.path("out3").to_str().unwrap()]);
    assert_eq!(count(&again, "compiled"), 0, "{again}");
    assert!(
        again["diagnostics"].as_array().unwrap().is_empty(),
        "{again}"
    );
}

#[test]
fn an_include_escaping_the_root_is_an_error_naming_file_and_line() {
    let p = project();
    p.edit(
        "shaders/lit.wgsl",
        "#include \"include/common.wgsl\"",
        "#include \"include/common.wgsl\"\n#include \"../../../etc/passwd\"",
    );
    let (report, code) = build(&p);
    assert_eq!(code, 1, "{report}");
    assert_eq!(count(&report, "failed"), 16, "{report}");
    let d = &report["diagnostics"][0];
    assert_eq!(d["file"], "shaders/lit.wgsl", "{d}");
    assert_eq!(d["line"], 2, "{d}");
    assert!(d["variant"].as_str().unwrap().starts_with("Lit/"), "{d}");
    // The other shader was still built.
    assert!(p.path("out/Post/Main/VIGNETTE.spv").exists());
    let human = run(&p, &[]);
    let stderr = String::from_utf8_lossy(&human.stderr);
    assert!(stderr.contains("shaders/lit.wgsl:2"), "{stderr}");
    assert!(stderr.contains("root"), "{stderr}");
    // One problem shared by 16 variants is one error naming a few of them.
    let errors = stderr.lines().filter(|l| l.starts_with("error")).count();
    assert_eq!(errors, 1, "{stderr}");
    assert!(stderr.contains("and 12 more"), "{stderr}");
}

#[test]
fn an_unknown_keyword_is_an_error_naming_it() {
    let p = project();
    p.edit(
        "kiln.toml",
        "axes = [[\"_\", \"VIGNETTE\"], [\"_\", \"HDR\"]]",
        "axes = [[\"_\", \"VIGNETTE\"], [\"_\", \"HDR\"]]\nvariants = [[\"GRAIN\"]]",
    );
    let out = run(&p, &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unknown keyword `GRAIN`"), "{stderr}");
    assert!(stderr.contains("kiln.toml:"), "{stderr}");
}

#[test]
fn a_shader_that_fails_to_compile_fails_alone() {
    let p = project();
    p.edit(
        "shaders/post.frag",
        "o_color = c;",
        "o_color = c + undefined_thing;",
    );
    let (report, code) = build(&p);
    assert_eq!(code, 1);
    assert_eq!(count(&report, "failed"), 4, "{report}");
    assert_eq!(count(&report, "variants"), VARIANTS);
    let d = &report["diagnostics"][0];
    assert_eq!(d["file"], "shaders/post.frag", "{d}");
    assert_eq!(d["line"], 10, "{d}");
    assert!(
        d["variant"].as_str().unwrap().starts_with("Post/Main"),
        "{d}"
    );
    // Every Lit output was written.
    assert_eq!(
        entries(&read_index(&p)).len(),
        16 * TARGETS,
        "only Lit's outputs are in the index"
    );
    // Fixing it builds its variants (two texts), and nothing else.
    p.edit("shaders/post.frag", "c + undefined_thing;", "c;");
    let (report, code) = build(&p);
    assert_eq!(code, 0, "{report}");
    assert_eq!(count(&report, "compiled"), 2, "{report}");
    assert_eq!(count(&report, "deduplicated"), 2, "{report}");
}

#[test]
fn two_concurrent_builds_on_one_cache_succeed_with_identical_outputs() {
    let p = project();
    let spawn = |out: &str| {
        Command::new(env!("CARGO_BIN_EXE_kiln"))
            .args(["build", "--json", "--manifest"])
            .arg(p.path("kiln.toml"))
            .arg("--out")
            .arg(p.path(out))
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let a = spawn("out-a");
    let b = spawn("out-b");
    assert!(a.wait_with_output().unwrap().status.success());
    assert!(b.wait_with_output().unwrap().status.success());
    let ia = hashes(&index_in(&p.path("out-a")));
    assert_eq!(ia, hashes(&index_in(&p.path("out-b"))));
    for path in ia.keys() {
        assert_eq!(
            std::fs::read(p.path("out-a").join(path)).unwrap(),
            std::fs::read(p.path("out-b").join(path)).unwrap()
        );
    }
}

#[test]
fn every_spirv_output_passes_spirv_val() {
    let p = project();
    let (report, code) = build(&p);
    assert_eq!(code, 0, "{report}");
    let available = Command::new("spirv-val").arg("--version").output().is_ok();
    if !available {
        assert_ne!(
            std::env::var("KILN_REQUIRE_SPIRV_VAL").as_deref(),
            Ok("1"),
            "KILN_REQUIRE_SPIRV_VAL=1 but spirv-val is not installed"
        );
        eprintln!("spirv-val not installed: skipping validation");
        return;
    }
    let mut checked = 0;
    for entry in entries(&read_index(&p)) {
        if entry["target"] != "spirv" {
            continue;
        }
        let file = p.path("out").join(entry["path"].as_str().unwrap());
        let out = Command::new("spirv-val").arg(&file).output().unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        checked += 1;
    }
    assert_eq!(checked, VARIANTS);
}

#[test]
fn removed_variants_retire_their_outputs() {
    let p = project();
    build(&p);
    p.edit(
        "kiln.toml",
        "axes = [[\"_\", \"VIGNETTE\"], [\"_\", \"HDR\"]]",
        "axes = [[\"_\", \"HDR\"]]",
    );
    let (report, code) = build(&p);
    assert_eq!(code, 0, "{report}");
    assert_eq!(count(&report, "compiled"), 0, "{report}");
    assert_eq!(
        count(&report, "outputs_removed"),
        2 * TARGETS as u64,
        "{report}"
    );
    assert!(!p.path("out/Post/Main/VIGNETTE.spv").exists());
    assert!(p.path("out/Post/Main/_.spv").exists());
}

/// A second connection to the project's store database.
fn store_db(p: &TempProject) -> rusqlite::Connection {
    rusqlite::Connection::open(p.path(".kiln/store.sqlite")).unwrap()
}

fn store_entries(p: &TempProject) -> i64 {
    store_db(p)
        .query_row("SELECT count(*) FROM entries", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn a_deleted_output_is_restored_from_the_store_without_compiling() {
    let p = project();
    build(&p);
    let deleted = p.path("out/Lit/Forward/FOG+LIGHTS_1.spv");
    let bytes = std::fs::read(&deleted).unwrap();
    std::fs::remove_file(&deleted).unwrap();
    let (report, code) = build(&p);
    assert_eq!(code, 0, "{report}");
    assert_eq!(count(&report, "compiled"), 0, "{report}");
    assert_eq!(count(&report, "outputs_written"), 1, "{report}");
    assert_eq!(std::fs::read(&deleted).unwrap(), bytes);
}

#[test]
fn a_manifest_change_with_unchanged_sources_is_not_mistaken_for_up_to_date() {
    let p = project();
    build(&p);
    // Same sources and revision; a different target option changes every MSL output.
    p.edit(
        "kiln.toml",
        "targets = [\"spirv\", \"msl\", \"hlsl\"]",
        "targets = [\"spirv\", { name = \"msl\", version = \"1.2\" }, \"hlsl\"]",
    );
    let (report, code) = build(&p);
    assert_eq!(code, 0, "{report}");
    assert_eq!(count(&report, "cached"), 0, "{report}");
    // Every variant went through the engine again; naga ran for the new MSL namespace.
    assert_eq!(
        count(&report, "compiled") + count(&report, "deduplicated"),
        VARIANTS,
        "{report}"
    );
}

#[test]
fn gc_bounds_the_store_and_the_next_build_refills_it() {
    let p = project();
    build(&p);
    let entries_before = store_entries(&p);
    assert!(entries_before > 0);
    let out = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["gc", "--max-bytes", "0", "--manifest"])
        .arg(p.path("kiln.toml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!("removed {entries_before}")),
        "{said}"
    );
    let entries_after = store_entries(&p);
    assert_eq!(entries_after, 0);
    // Outputs are untouched; a build into a new directory recompiles from sources.
    let (report, code) = build_with(&p, &["--out", p.path("out2").to_str().unwrap()]);
    assert_eq!(code, 0);
    assert_eq!(
        count(&report, "compiled") + count(&report, "deduplicated"),
        VARIANTS
    );
}

fn gc(p: &TempProject, max_bytes: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(["gc", "--max-bytes", max_bytes, "--manifest"])
        .arg(p.path("kiln.toml"))
        .output()
        .unwrap()
}

#[test]
fn gc_takes_sizes_with_suffixes_and_rejects_others_clearly() {
    let p = project();
    build(&p);
    let entries = store_entries(&p);
    let bytes: i64 = store_db(&p)
        .query_row("SELECT sum(size) FROM entries", [], |r| r.get(0))
        .unwrap();
    assert!(bytes < 500 << 20);
    for size in ["500M", "2G", "2g", "1T"] {
        let out = gc(&p, size);
        assert!(
            out.status.success(),
            "{size}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("removed 0 "), "{size}: {said}");
        assert!(
            said.contains(&format!("{bytes} bytes remain")),
            "{size}: {said}"
        );
    }
    assert_eq!(store_entries(&p), entries);
    for bad in ["2X", "1.5G", "12MBs", "lots"] {
        let out = gc(&p, bad);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("invalid size \"{bad}\"")),
            "{bad}: {err}"
        );
        assert!(err.contains("500M or 2G"), "{bad}: {err}");
    }
    assert_eq!(store_entries(&p), entries);
    // One entry's worth of room in plain bytes keeps at most that.
    let out = gc(&p, "1");
    assert!(out.status.success());
    assert_eq!(store_entries(&p), 0);
}
