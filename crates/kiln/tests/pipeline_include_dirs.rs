//! Include directories through the pipeline: what an include finds is part of a shader's
//! identity, so creating a file that an include would now find first rebuilds exactly the
//! variants that change, and editing a file that is shadowed rebuilds nothing. Every step is
//! compared byte for byte with a clean build.

use kiln::pipeline::{BuildOptions, Project};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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

struct Fixture {
    dir: tempfile::TempDir,
    project: Project,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let fixture_files = [
            ("kiln.toml", MANIFEST),
            ("shaders/fill.comp", FILL),
            ("common/consts.glsl", "const float K = 1.5;\n"),
        ];
        for (path, text) in fixture_files {
            write(dir.path(), path, text);
        }
        let project = Project::open(&BuildOptions {
            manifest: dir.path().join("kiln.toml"),
            jobs: Some(2),
            ..BuildOptions::default()
        })
        .unwrap();
        Self { dir, project }
    }

    /// Writes a file and tells the project, as `kiln watch` does on a file event.
    fn edit(&mut self, path: &str, text: Option<&str>) {
        let full = self.dir.path().join(path);
        match text {
            Some(text) => write(self.dir.path(), path, text),
            None => std::fs::remove_file(&full).unwrap(),
        }
        self.project.refresh_files(&[full]);
    }

    fn build(&mut self) -> kiln::pipeline::BuildReport {
        let report = self.project.build(&|_| {}).unwrap();
        assert_eq!(report.failed, 0, "{:?}", report.diagnostics);
        report
    }

    fn assert_same_as_clean(&self, what: &str) {
        let fresh = tempfile::tempdir().unwrap();
        let mut clean = Project::open(&BuildOptions {
            manifest: self.dir.path().join("kiln.toml"),
            out_dir: Some(fresh.path().join("out")),
            cache_dir: Some(fresh.path().join("cache")),
            ..BuildOptions::default()
        })
        .unwrap();
        clean.build(&|_| {}).unwrap();
        assert_eq!(
            files(&self.dir.path().join("out")),
            files(&fresh.path().join("out")),
            "{what}"
        );
    }
}

fn write(root: &Path, path: &str, text: &str) {
    let path = root.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The SPIR-V outputs, by relative path.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "spv") {
                let bytes = std::fs::read(&path).unwrap();
                out.insert(path.strip_prefix(dir).unwrap().to_owned(), bytes);
            }
        }
    }
    assert_eq!(out.len(), 2, "{out:?}");
    out
}

#[test]
fn what_an_include_finds_is_part_of_the_identity() {
    let mut f = Fixture::new();
    assert_eq!(f.build().compiled, 2);
    f.assert_same_as_clean("first build");

    // The shader's own include directory comes before the project's.
    f.edit("shaders/local/consts.glsl", Some("const float K = 2.5;\n"));
    assert_eq!(f.build().compiled, 2);
    f.assert_same_as_clean("a file created in the shader's include directory");

    // The including file's directory comes first of all.
    f.edit("shaders/consts.glsl", Some("const float K = 3.5;\n"));
    assert_eq!(f.build().compiled, 2);
    f.assert_same_as_clean("a file created beside the shader");

    // The project's file is now shadowed: editing it changes nothing.
    f.edit("common/consts.glsl", Some("const float K = 9.5;\n"));
    assert_eq!(f.build().compiled, 0);
    f.assert_same_as_clean("a shadowed file edited");

    // Comments in the file that is found change no text, so nothing compiles.
    f.edit(
        "shaders/consts.glsl",
        Some("// the constant\nconst float K = /* three and a half */ 3.5;\n"),
    );
    assert_eq!(f.build().compiled, 0);

    // Removing the nearest file falls back to the next directory.
    // (Its text was built before: the store has the artifacts.)
    f.edit("shaders/consts.glsl", None);
    let report = f.build();
    assert_eq!((report.compiled, report.cached), (0, 2));
    f.assert_same_as_clean("the nearest file removed");
}

#[test]
fn an_include_directory_outside_the_root_is_refused_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "kiln.toml",
        &MANIFEST.replace(
            "include_dirs = [\"common\"]",
            "include_dirs = [\"../common\"]",
        ),
    );
    write(dir.path(), "shaders/fill.comp", FILL);
    let err = Project::open(&BuildOptions {
        manifest: dir.path().join("kiln.toml"),
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
    let mut f = Fixture::new();
    f.build();
    f.edit(
        "common/consts.glsl",
        Some("const float K = 1.5;\n#ifdef DOUBLE\n#error doubling is not supported\n#endif\n"),
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
