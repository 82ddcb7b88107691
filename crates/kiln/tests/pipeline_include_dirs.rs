//! Include directories through the pipeline: what an include finds is part of a shader's
//! identity, so creating a file that an include would now find first rebuilds exactly the
//! variants that change, and editing a file that is shadowed rebuilds nothing. Every step is
//! compared byte for byte with a clean build.

use kiln::pipeline::{BuildOptions, Project};
use kiln_test_support::{LiveProject, TempProject};
use std::path::Path;

const MANIFEST: &str = r#"
[project]
targets = ["spirv"]
include_dirs = ["common"]

[[shader]]
name = "Fill"
source = "shaders/fill.comp"
compiler = "naga"
include_dirs = ["shaders/local"]
axes = [["_", "DOUBLE"]]

[shader.passes.Main]
stage = "compute"
entry = "main"
"#;

const FILL: &str = "#version 450
#include \"consts.glsl\"
#define SCALE(v) ((v) * K)
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer Data { float data[]; };
void main() {
#ifdef DOUBLE
    data[gl_GlobalInvocationID.x] = SCALE(2.0);
#else
    data[gl_GlobalInvocationID.x] = SCALE(1.0);
#endif
}
";

/// The project, with a [`Project`] kept open as `kiln watch` keeps it.
fn fixture() -> LiveProject {
    TempProject::from_files([
        ("kiln.toml", MANIFEST),
        ("shaders/fill.comp", FILL),
        ("common/consts.glsl", "const float K = 1.5;\n"),
    ])
    .live()
}

/// [`TempProject::assert_same_as_clean`], with both SPIR-V outputs there.
fn assert_same_as_clean(f: &LiveProject, what: &str) {
    let spirv: Vec<String> = f
        .tree()
        .into_keys()
        .filter(|p| p.ends_with(".spv"))
        .collect();
    assert_eq!(spirv.len(), 2, "{what}: {spirv:?}");
    f.assert_same_as_clean(what);
}

#[test]
fn what_an_include_finds_is_part_of_the_identity() {
    let mut f = fixture();
    assert_eq!(f.build_ok().compiled, 2);
    assert_same_as_clean(&f, "first build");

    // The shader's own include directory comes before the project's.
    f.write("shaders/local/consts.glsl", "const float K = 2.5;\n");
    assert_eq!(f.build_ok().compiled, 2);
    assert_same_as_clean(&f, "a file created in the shader's include directory");

    // The including file's directory comes first of all.
    f.write("shaders/consts.glsl", "const float K = 3.5;\n");
    assert_eq!(f.build_ok().compiled, 2);
    assert_same_as_clean(&f, "a file created beside the shader");

    // The project's file is now shadowed: editing it changes nothing.
    f.write("common/consts.glsl", "const float K = 9.5;\n");
    assert_eq!(f.build_ok().compiled, 0);
    assert_same_as_clean(&f, "a shadowed file edited");

    // Comments in the file that is found change no text, so nothing compiles.
    f.write(
        "shaders/consts.glsl",
        "// the constant\nconst float K = /* three and a half */ 3.5;\n",
    );
    assert_eq!(f.build_ok().compiled, 0);

    // Removing the nearest file falls back to the next directory.
    // (Its text was built before: the store has the artifacts.)
    f.remove("shaders/consts.glsl");
    let report = f.build_ok();
    assert_eq!((report.compiled, report.cached), (0, 2));
    assert_same_as_clean(&f, "the nearest file removed");
}

#[test]
fn an_include_directory_outside_the_root_is_refused_with_its_line() {
    let p = TempProject::from_files([
        (
            "kiln.toml",
            MANIFEST.replace(
                "include_dirs = [\"common\"]",
                "include_dirs = [\"../common\"]",
            ),
        ),
        ("shaders/fill.comp", FILL.to_owned()),
    ]);
    let err = Project::open(&BuildOptions {
        manifest: p.path("kiln.toml"),
        ..BuildOptions::default()
    })
    .err()
    .expect("a directory outside the root is refused");
    let message = err.to_string();
    assert!(
        message.contains("include directory `../common` must be inside the project root"),
        "{message}"
    );
    assert!(message.contains(":4"), "{message}");
}

#[test]
fn an_error_directive_fails_its_variant_alone_at_its_file_and_line() {
    let mut f = fixture();
    f.build_ok();
    f.write(
        "common/consts.glsl",
        "const float K = 1.5;\n#ifdef DOUBLE\n#error doubling is not supported\n#endif\n",
    );
    let report = f.project.build(&|_| {}).unwrap();
    assert_eq!(report.failed, 1, "{:?}", report.diagnostics);
    let error = report
        .diagnostics
        .iter()
        .find(|d| d.message.contains("#error doubling is not supported"))
        .expect("the #error is reported");
    let at = error.location.as_ref().expect("located");
    assert_eq!(
        (at.file.as_path(), at.line),
        (Path::new("common/consts.glsl"), 3)
    );
    let variant = error.variant.as_deref().expect("names the variant");
    assert!(variant.starts_with("Fill/Main[DOUBLE]"), "{variant}");
}
