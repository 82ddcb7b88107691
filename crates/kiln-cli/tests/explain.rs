//! `kiln explain`: every input of a variant's identity, and the input whose change made the
//! last build rebuild it, read from the build history each `kiln build` records.

use kiln_test_support::TempProject;
use serde_json::Value;
use std::process::Output;

const KILN: &str = env!("CARGO_BIN_EXE_kiln");

const FIXTURE: &str = r#"
//- /kiln.toml
[project]
targets = ["spirv", "msl"]

[[shader]]
name = "Lit"
source = "shaders/lit.wgsl"
axes = [["_", "FOG"]]
defines = { TINT = "1" }

[shader.passes.Forward]
stage = "fragment"
entry = "fs_main"

[[shader]]
name = "Flat"
source = "shaders/flat.wgsl"

[shader.passes.Forward]
stage = "fragment"
entry = "fs_main"
//- /shaders/lit.wgsl
#include "include/common.wgsl"

@fragment
fn fs_main() -> @location(0) vec4<f32> {
    var color = base_color();
#ifdef FOG
    color = color * 0.5;
#endif
    return color;
}
//- /shaders/include/common.wgsl
fn base_color() -> vec4<f32> {
    return vec4<f32>(1.0, 0.5, 0.25, 1.0);
}
//- /shaders/flat.wgsl
@fragment
fn fs_main() -> @location(0) vec4<f32> {
    return vec4<f32>(0.0, 1.0, 0.0, 1.0);
}
"#;

fn built() -> TempProject {
    let p = TempProject::new(FIXTURE);
    let build = p.build_cli(KILN, &[]);
    assert_eq!(build.code, 0, "{}", build.stderr);
    p
}

fn explain(p: &TempProject, args: &[&str]) -> Output {
    p.command(KILN, "explain").args(args).output().unwrap()
}

/// `kiln explain --json VARIANT`, which must succeed.
fn explain_json(p: &TempProject, variant: &str) -> Value {
    let output = explain(p, &["--json", variant]);
    assert!(
        output.status.success(),
        "kiln explain {variant}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The changes of the last build that changed the variant's inputs.
fn last_changes(explained: &Value) -> &Vec<Value> {
    let rebuild = &explained["last_rebuild"];
    assert_eq!(rebuild["first_recorded"], false, "{explained:#}");
    rebuild["changes"].as_array().unwrap()
}

fn changes_of_kind<'a>(changes: &'a [Value], kind: &str) -> Vec<&'a Value> {
    changes.iter().filter(|c| c["kind"] == kind).collect()
}

#[test]
fn a_define_edited_in_kiln_toml_is_named_as_the_reason_of_the_rebuild() {
    let p = built();
    p.edit("kiln.toml", r#"TINT = "1""#, r#"TINT = "2""#);
    let build = p.build_cli(KILN, &[]);
    assert_eq!(build.code, 0, "{}", build.stderr);

    let explained = explain_json(&p, "Lit/Forward/FOG");
    assert_eq!(explained["last_rebuild"]["builds_ago"], 0, "{explained:#}");
    let changes = last_changes(&explained);
    assert_eq!(
        changes,
        &vec![serde_json::json!({"kind": "define", "name": "TINT", "before": "1", "after": "2"})],
        "exactly the define, nothing else"
    );
    // Its inputs now list the define with its new value, beside the keyword's.
    let defines = explained["defines"].as_array().unwrap();
    assert!(
        defines.contains(&serde_json::json!({"name": "TINT", "value": "2", "origin": "shader"}))
    );
    assert!(
        defines.contains(&serde_json::json!({"name": "FOG", "value": "1", "origin": "keyword"}))
    );

    // The human form says the same.
    let human = String::from_utf8(explain(&p, &["Lit/Forward/FOG"]).stdout).unwrap();
    assert!(human.contains("define `TINT` changed: 1 -> 2"), "{human}");

    // Another shader's define is no input of Flat: its last change is its first build.
    let flat = explain_json(&p, "Flat/Forward/_");
    assert_eq!(flat["last_rebuild"]["first_recorded"], true, "{flat:#}");
    assert_eq!(flat["last_rebuild"]["builds_ago"], 1, "{flat:#}");
}

#[test]
fn an_edited_included_header_is_named_with_its_old_and_new_hashes() {
    let p = built();
    let before = blake3::hash(p.read("shaders/include/common.wgsl").as_bytes()).to_hex();
    p.edit("shaders/include/common.wgsl", "0.25", "0.75");
    let after = blake3::hash(p.read("shaders/include/common.wgsl").as_bytes()).to_hex();
    let build = p.build_cli(KILN, &[]);
    assert_eq!(build.code, 0, "{}", build.stderr);
    assert_eq!(build.report["compiled"], 2, "{}", build.report);

    let explained = explain_json(&p, "Lit/Forward/_");
    let changes = last_changes(&explained);
    assert_eq!(
        changes,
        &vec![serde_json::json!({
            "kind": "file",
            "name": "shaders/include/common.wgsl",
            "before": before.as_str(),
            "after": after.as_str(),
        })],
    );
    assert!(changes_of_kind(changes, "define").is_empty());
    // The closure with each file's hash now: the source, then the header.
    let files = explained["files"].as_array().unwrap();
    let paths: Vec<&str> = files.iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["shaders/lit.wgsl", "shaders/include/common.wgsl"]);
    assert_eq!(files[1]["hash"], after.as_str());

    let human = String::from_utf8(explain(&p, &["Lit/Forward/_"]).stdout).unwrap();
    assert!(
        human.contains("file `shaders/include/common.wgsl` changed"),
        "{human}"
    );
}

#[test]
fn an_edit_not_yet_built_is_shown_apart_from_the_last_rebuild() {
    let p = built();
    p.edit("shaders/include/common.wgsl", "0.25", "0.5");
    let explained = explain_json(&p, "Lit/Forward/FOG");
    let pending = explained["since_last_build"].as_array().unwrap();
    assert_eq!(changes_of_kind(pending, "file").len(), 1, "{explained:#}");
    assert_eq!(pending[0]["name"], "shaders/include/common.wgsl");
    assert_eq!(explained["last_rebuild"]["first_recorded"], true);
    // The digest moves with the sources; the one built is still the index's.
    assert_ne!(explained["digest"], explained["built_digest"]);
}

#[test]
fn an_unknown_digest_or_variant_is_an_error_saying_so() {
    let p = built();
    let output = explain(&p, &["000000000000"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no variant has the digest `000000000000`"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());

    let output = explain(&p, &["Lit/Forward/NOPE"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no variant `Lit/Forward/NOPE`"), "{stderr}");

    let output = explain(&p, &["Lit-Forward"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("neither a 12-hex-digit"), "{stderr}");
}

#[test]
fn explaining_by_digest_and_by_path_agree_with_the_index_and_the_store() {
    let p = built();
    let by_path = explain_json(&p, "Lit/Forward/FOG");
    let digest = by_path["digest"].as_str().unwrap().to_owned();
    let by_digest = explain_json(&p, &digest);
    assert_eq!(by_path, by_digest);

    // The digest is the one index.json gives the variant's outputs.
    let index: Value =
        serde_json::from_str(&std::fs::read_to_string(p.out_dir().join("index.json")).unwrap())
            .unwrap();
    let entries = index["entries"].as_array().unwrap();
    let mine: Vec<&Value> = entries
        .iter()
        .filter(|e| e["shader"] == "Lit" && e["keywords"] == serde_json::json!(["FOG"]))
        .collect();
    assert_eq!(mine.len(), 2, "one per target");
    for entry in &mine {
        assert_eq!(entry["digest"], digest.as_str());
    }

    // Each store entry it names is in the store, under that namespace and compile key.
    let store = rusqlite::Connection::open(p.root().join(".kiln/store.sqlite")).unwrap();
    let stored = by_path["store"].as_array().unwrap();
    assert_eq!(stored.len(), 2);
    for entry in stored {
        let key = hex_bytes(entry["compile_key"].as_str().unwrap());
        let found: i64 = store
            .query_row(
                "SELECT count(*) FROM entries JOIN namespaces ON namespaces.id = entries.namespace \
                 WHERE namespaces.name = ?1 AND entries.key = ?2",
                rusqlite::params![entry["namespace"].as_str().unwrap(), key],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(found, 1, "{entry}");
        let output = entry["output"].as_str().unwrap();
        assert!(mine.iter().any(|e| e["path"] == output), "{output}");
    }
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn a_pass_added_to_a_built_shader_is_named_as_new_and_not_its_shader() {
    let p = built();
    p.edit(
        "kiln.toml",
        "[[shader]]\nname = \"Flat\"",
        "[shader.passes.Shadow]\nstage = \"fragment\"\nentry = \"fs_main\"\n\n[[shader]]\nname = \"Flat\"",
    );
    let build = p.build_cli(KILN, &[]);
    assert_eq!(build.code, 0, "{}", build.stderr);
    let explained = explain_json(&p, "Lit/Shadow/FOG");
    assert_eq!(
        last_changes(&explained),
        &vec![
            serde_json::json!({"kind": "new_pass", "name": "Shadow", "before": null, "after": null})
        ],
        "{explained:#}"
    );
}
