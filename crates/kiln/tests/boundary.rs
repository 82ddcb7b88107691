//! The project boundary (issue 9): kiln writes, deletes and reads only where it should,
//! whatever `index.json`, a name or a symbolic link says.

use kiln::key::VariantKey;
use kiln::manifest::Manifest;
use kiln::pipeline::{BuildOptions, BuildReport, Project, Severity};
use kiln_test_support::TempProject;
use std::path::{Path, PathBuf};

const MANIFEST: &str = r#"
[project]
targets = ["spirv"]

[[shader]]
name = "Lit"
source = "shaders/lit.wgsl"
axes = [["_", "FOG"]]

[shader.passes.Forward]
stage = "fragment"
entry = "fs_main"
"#;

const LIT: &str = r#"#include "fog.wgsl"
@fragment
fn fs_main() -> @location(0) vec4<f32> {
    return fog(vec4<f32>(1.0));
}
"#;

const FOG: &str = r#"fn fog(c: vec4<f32>) -> vec4<f32> {
#ifdef FOG
    return c * 0.5;
#else
    return c;
#endif
}
"#;

/// A project in `<tmp>/project`, with `<tmp>/outside` beside it.
fn fixture() -> TempProject {
    TempProject::from_files([
        ("project/kiln.toml", MANIFEST),
        ("project/shaders/lit.wgsl", LIT),
        ("project/shaders/fog.wgsl", FOG),
        ("outside/secret.wgsl", "root:x:0:0:root:/root:/bin/bash\n"),
    ])
    .with_options(|o| o.manifest = o.manifest.with_file_name("project/kiln.toml"))
}

fn messages(report: &BuildReport, severity: Severity) -> Vec<String> {
    report
        .diagnostics
        .iter()
        .filter(|d| d.severity == severity)
        .map(|d| d.to_string())
        .collect()
}

/// Item 1: entries of `index.json` pointing outside `out/` are never deleted.
#[test]
fn index_entries_outside_the_output_directory_are_ignored() {
    let f = fixture();
    let first = f.build();
    assert_eq!(first.failed, 0, "{:?}", first.diagnostics);
    let index_path = f.path("project/out/index.json");
    let mut index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&index_path).unwrap()).unwrap();
    let template = index["entries"][0].clone();
    let victims = [
        "../shaders/lit.wgsl".to_owned(),
        f.path("outside/secret.wgsl").display().to_string(),
        "Lit/../../shaders/fog.wgsl".to_owned(),
    ];
    for victim in &victims {
        let mut entry = template.clone();
        entry["shader"] = "Gone".into();
        entry["path"] = victim.as_str().into();
        index["entries"].as_array_mut().unwrap().push(entry);
    }
    std::fs::write(&index_path, index.to_string()).unwrap();

    let report = f.build();
    assert!(f.path("project/shaders/lit.wgsl").is_file());
    assert!(f.path("project/shaders/fog.wgsl").is_file());
    assert!(f.path("outside/secret.wgsl").is_file());
    assert!(f.path("project/shaders").is_dir());
    assert_eq!(report.outputs_removed, 0);
    let warnings = messages(&report, Severity::Warning);
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert!(warnings[0].contains("ignored an entry"), "{warnings:?}");
}

/// Item 1: a retired output that kiln did not write as recorded (edited by someone, or a
/// link put in its place) is left alone.
#[cfg(unix)]
#[test]
fn only_provably_written_outputs_are_removed() {
    let f = fixture();
    f.build();
    let out = f.path("project/out/Lit/Forward");
    assert!(out.join("FOG.spv").is_file());
    // Replace one output with a link to a file outside.
    std::fs::remove_file(out.join("_.spv")).unwrap();
    std::os::unix::fs::symlink(f.path("outside/secret.wgsl"), out.join("_.spv")).unwrap();
    // Retire the shader: both outputs leave the manifest.
    f.write(
        "project/kiln.toml",
        MANIFEST.replace("name = \"Lit\"", "name = \"Lit2\""),
    );
    let report = f.build();
    assert_eq!(report.failed, 0, "{:?}", report.diagnostics);
    assert!(!out.join("FOG.spv").exists(), "a real output is removed");
    assert!(out.join("_.spv").is_symlink(), "the link is not kiln's");
    assert!(f.path("outside/secret.wgsl").is_file());
    assert_eq!(report.outputs_removed, 1);
}

/// Item 2: names that are paths are refused by the manifest and by the key alike.
#[test]
fn path_like_names_are_refused_everywhere() {
    for bad in ["..", ".", "a/b", "a\\\\b", "a\\u0000b"] {
        let shader = MANIFEST.replace("name = \"Lit\"", &format!("name = \"{bad}\""));
        let e = Manifest::parse(Path::new("kiln.toml"), Path::new("."), &shader).unwrap_err();
        assert!(e.message.contains("shader name"), "{bad}: {e}");
        let pass = MANIFEST.replace(
            "[shader.passes.Forward]",
            &format!("[shader.passes.\"{bad}\"]"),
        );
        let e = Manifest::parse(Path::new("kiln.toml"), Path::new("."), &pass).unwrap_err();
        assert!(e.message.contains("pass name"), "{bad}: {e}");
    }
    for bad in ["..", ".", "a/b", "a\\b", "a\0b"] {
        assert!(
            VariantKey::new(bad, "Forward", ["FOG"], 1).is_err(),
            "{bad:?}"
        );
        assert!(VariantKey::new("Lit", bad, ["FOG"], 1).is_err(), "{bad:?}");
        assert!(
            VariantKey::new("Lit", "Forward", [bad], 1).is_err(),
            "{bad:?}"
        );
    }
}

/// Item 3: a source linked to a file outside the root is refused, and its contents never
/// reach an output or a message.
#[cfg(unix)]
#[test]
fn symlinks_leading_outside_the_root_are_not_followed() {
    let f = fixture();
    std::fs::remove_file(f.path("project/shaders/fog.wgsl")).unwrap();
    std::os::unix::fs::symlink(
        f.path("outside/secret.wgsl"),
        f.path("project/shaders/fog.wgsl"),
    )
    .unwrap();
    let report = f.build();
    assert_eq!(report.failed, 2);
    let errors = messages(&report, Severity::Error);
    assert!(
        errors
            .iter()
            .all(|e| e.contains("outside the project root")),
        "{errors:?}"
    );
    assert!(errors.iter().all(|e| !e.contains("root:x")), "{errors:?}");
}

/// Item 3: a FIFO as an include fails that shader at once instead of hanging the build; a
/// source that is not UTF-8 says so instead of "no such file".
#[cfg(unix)]
#[test]
fn fifos_and_non_utf8_sources_fail_with_the_real_reason() {
    let f = fixture();
    let fifo = f.path("project/shaders/fog.wgsl");
    std::fs::remove_file(&fifo).unwrap();
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let (done, wait) = std::sync::mpsc::channel();
    let dir = f.path("project/kiln.toml");
    std::thread::spawn(move || {
        let mut project = Project::open(&BuildOptions {
            manifest: dir,
            jobs: Some(2),
            ..BuildOptions::default()
        })
        .unwrap();
        let _ = done.send(project.build(&|_| {}).unwrap());
    });
    let report = wait
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("a FIFO include must not hang the build");
    let errors = messages(&report, Severity::Error);
    assert!(errors.iter().any(|e| e.contains("FIFO")), "{errors:?}");

    let f = fixture();
    std::fs::write(f.path("project/shaders/fog.wgsl"), b"fn caf\xe9() {}\n").unwrap();
    let report = f.build();
    let errors = messages(&report, Severity::Error);
    assert!(errors.iter().any(|e| e.contains("UTF-8")), "{errors:?}");
    assert!(
        errors.iter().all(|e| !e.contains("no such file")),
        "{errors:?}"
    );
}

/// Item 3: the source size cap is configurable in `[project]`.
#[test]
fn sources_above_the_size_cap_fail_with_a_clear_error() {
    let f = fixture();
    f.write(
        "project/kiln.toml",
        MANIFEST.replace(
            "targets = [\"spirv\"]",
            "targets = [\"spirv\"]\nmax_source_bytes = 100",
        ),
    );
    let report = f.build();
    assert_eq!(report.failed, 2);
    let errors = messages(&report, Severity::Error);
    assert!(
        errors.iter().all(|e| e.contains("max_source_bytes")),
        "{errors:?}"
    );
}

/// Item 8: outputs and `index.json` honour the umask (0666 narrowed by it), like the store's
/// entries, instead of tempfile's 0600.
#[cfg(unix)]
#[test]
fn outputs_and_the_index_honour_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: umask only sets the process's file-mode mask; 022 is the usual default.
    unsafe { libc::umask(0o022) };
    let f = fixture();
    f.build();
    for file in ["project/out/index.json", "project/out/Lit/Forward/FOG.spv"] {
        let mode = std::fs::metadata(f.path(file))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o644, "{file}: {mode:o}");
    }
}

/// Item 8: temporary files a killed writer left in `out/` are removed by a later build:
/// every one of them, however young, because the build holds the directory's lock and so
/// no live writer can own one; a user's file that merely looks similar is left alone.
#[test]
fn stale_temporary_files_in_the_output_directory_are_removed() {
    let f = fixture();
    f.build();
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for name in [".kiln-tmp-a1b2c3", ".tmpA1b2C3", ".kiln-tmp-fresh"] {
        let path = f.path(&format!("project/out/{name}"));
        std::fs::write(&path, b"half an output").unwrap();
        if name != ".kiln-tmp-fresh" {
            let file = std::fs::File::options().write(true).open(&path).unwrap();
            file.set_modified(hour_ago).unwrap();
        }
    }
    f.write("project/out/.tmpnotours", "a user's file");
    f.build();
    assert!(!f.path("project/out/.kiln-tmp-a1b2c3").exists());
    assert!(!f.path("project/out/.tmpA1b2C3").exists());
    assert!(!f.path("project/out/.kiln-tmp-fresh").exists());
    assert!(f.path("project/out/.tmpnotours").exists());
}

/// While another process holds the output directory's lock (a build writing into it), a
/// build waits for it and says so; once it holds the directory, the temporary file the
/// other writer left is a dead writer's and goes.
#[cfg(unix)]
#[test]
fn a_build_waits_for_another_writer_of_its_output_directory() {
    let f = fixture();
    f.build();
    let out = f.path("project/out");
    let holder = std::fs::File::open(&out).unwrap();
    holder.lock().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let worker = {
        let manifest = f.path("project/kiln.toml");
        std::thread::spawn(move || {
            let mut project = Project::open(&BuildOptions {
                manifest,
                ..BuildOptions::default()
            })
            .unwrap();
            let report = project.build(&|_| {}).unwrap();
            tx.send(report).unwrap();
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        rx.try_recv().is_err(),
        "the build did not wait for the lock"
    );
    std::fs::write(out.join(".kiln-tmp-live"), b"the holder's").unwrap();
    drop(holder);
    let report = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the build finished once the lock was released");
    worker.join().unwrap();
    assert!(
        report
            .diagnostics
            .iter()
            .any(|d| d.message.contains("waited for another kiln process")),
        "{:?}",
        report.diagnostics
    );
    assert!(!out.join(".kiln-tmp-live").exists());
}

/// A store whose every save fails.
struct ReadOnlyStore;

impl kiln::store::ArtifactStore for ReadOnlyStore {
    fn load(
        &self,
        _: &kiln::store::Namespace,
        _: &kiln::store::ContentKey,
    ) -> Result<kiln::store::Lookup, kiln::store::StoreError> {
        Ok(kiln::store::Lookup::Miss)
    }

    fn save(
        &self,
        _: &kiln::store::Namespace,
        _: &kiln::store::ContentKey,
        _: &[u8],
    ) -> Result<(), kiln::store::StoreError> {
        Err(kiln::store::StoreError::CreateDir {
            path: PathBuf::from("/read-only/store"),
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        })
    }
}

/// Item 8: a store that cannot be written is one warning with the count, not one per entry.
#[test]
fn a_read_only_store_is_one_warning_with_a_count() {
    let f = fixture();
    f.write(
        "project/kiln.toml",
        MANIFEST.replace("[\"_\", \"FOG\"]", "[\"_\", \"FOG\"], [\"_\", \"SKIN\"]"),
    );
    f.write(
        "project/shaders/lit.wgsl",
        format!("{LIT}#ifdef SKIN\nfn skin() {{}}\n#endif\n"),
    );
    let manifest = Manifest::load(&f.path("project/kiln.toml")).unwrap();
    let mut project = Project::with_store(
        manifest,
        &BuildOptions {
            jobs: Some(2),
            ..BuildOptions::default()
        },
        std::sync::Arc::new(ReadOnlyStore),
        f.path("project/.kiln"),
    )
    .unwrap();
    let report = project.build(&|_| {}).unwrap();
    assert_eq!(report.failed, 0, "{:?}", report.diagnostics);
    assert_eq!(report.compiled, 4);
    let warnings = messages(&report, Severity::Warning);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("could not save 4 artifacts"),
        "{warnings:?}"
    );
}

/// Item 9: entry-point and validation errors name the file, the variant and the target(s),
/// and a line where there is one.
#[test]
fn compile_errors_without_a_span_still_name_file_variant_and_targets() {
    let f = fixture();
    // The function exists, for another stage: the error points at its definition.
    f.write(
        "project/shaders/lit.wgsl",
        LIT.replace("@fragment", "@vertex"),
    );
    let report = f.build();
    assert_eq!(report.failed, 2);
    for d in report
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
    {
        let at = d.location.as_ref().expect("located");
        assert_eq!(at.file, Path::new("shaders/lit.wgsl"), "{d}");
        assert_eq!(at.line, 3, "{d}");
        assert!(
            d.variant
                .as_deref()
                .unwrap_or("")
                .starts_with("Lit/Forward"),
            "{d}"
        );
        assert!(d.to_string().contains("all targets"), "{d}");
    }
    // No such function at all: the file is still named.
    f.write(
        "project/kiln.toml",
        MANIFEST.replace("entry = \"fs_main\"", "entry = \"main\""),
    );
    let report = f.build();
    assert_eq!(report.failed, 2);
    for d in report
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
    {
        let at = d.location.as_ref().expect("located");
        assert_eq!(at.file, Path::new("shaders/lit.wgsl"), "{d}");
        assert!(
            d.to_string().starts_with("shaders/lit.wgsl: error: "),
            "{d}"
        );
        assert!(d.message.contains("entry point named `main`"), "{d}");
    }
}
