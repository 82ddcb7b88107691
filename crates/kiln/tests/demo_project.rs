//! The bundled example project `examples/demo/` builds: every (shader, pass, keyword set)
//! variant preprocesses and compiles for every target of its manifest, every SPIR-V output
//! passes `spirv-val`, every keyword changes some code, and an edit inside `#ifdef FOG` or
//! `#ifdef SKIN` in a shared include reaches exactly the variants with that keyword.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use kiln::compile::{self, CompileError, Target, TargetConfig};
use kiln::manifest::{Manifest, PassSpec, ShaderSpec};
use kiln::preprocess::{
    preprocess, DiskLoader, PreprocessBudget, PreprocessRequest, Preprocessed, SourceLoader,
};

/// The floor for the demo's size.
const MIN_VARIANTS: usize = 200;

fn demo_manifest() -> Manifest {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/demo/kiln.toml");
    Manifest::load(&path).unwrap_or_else(|e| panic!("the demo manifest must load: {e}"))
}

fn run_preprocess(
    shader: &ShaderSpec,
    pass: &PassSpec,
    keywords: &[String],
    loader: &dyn SourceLoader,
) -> Result<Preprocessed, kiln::preprocess::PreprocessError> {
    let keywords: Vec<&str> = keywords.iter().map(String::as_str).collect();
    let defines: Vec<(&str, &str)> = shader
        .defines
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    preprocess(
        &PreprocessRequest {
            entry: &pass.source,
            language: pass.language.into(),
            include_dirs: &shader.include_dirs,
            keywords: &keywords,
            defines: &defines,
            budget: PreprocessBudget::default(),
        },
        loader,
    )
}

/// naga's message, with the source file and line its text position came from.
fn describe(error: &CompileError, text: &Preprocessed) -> String {
    match error.location {
        Some(at) => match text.origin(at.line) {
            Some(origin) => format!(
                "{error} (at {}:{}, output line {})",
                origin.file.display(),
                origin.line,
                at.line
            ),
            None => format!("{error} (output line {})", at.line),
        },
        None => error.to_string(),
    }
}

/// `spirv-val`, if installed, with the Vulkan environment matching the target's SPIR-V
/// version; `None` means it is missing and validation is skipped (unless required).
struct SpirvVal {
    target_env: &'static str,
}

impl SpirvVal {
    fn find(config: &TargetConfig) -> Option<Self> {
        match Command::new("spirv-val").arg("--version").output() {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                assert!(
                    std::env::var("KILN_REQUIRE_SPIRV_VAL").as_deref() != Ok("1"),
                    "KILN_REQUIRE_SPIRV_VAL=1 but spirv-val is not on PATH (Debian: spirv-tools)"
                );
                eprintln!("spirv-val not found: SPIR-V outputs are not validated");
                return None;
            }
            Err(e) => panic!("cannot run spirv-val: {e}"),
        }
        let target_env = match config.options_string().as_str() {
            "version=1.0" => "vulkan1.0",
            "version=1.1" | "version=1.2" | "version=1.3" => "vulkan1.1",
            "version=1.4" => "vulkan1.1spv1.4",
            "version=1.5" => "vulkan1.2",
            _ => "vulkan1.3",
        };
        Some(Self { target_env })
    }

    /// `Err` with spirv-val's report when it rejects `words`.
    fn check(&self, dir: &Path, words: &[u8]) -> Result<(), String> {
        let file = dir.join("variant.spv");
        std::fs::write(&file, words)
            .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
        let output = Command::new("spirv-val")
            .arg("--target-env")
            .arg(self.target_env)
            .arg(&file)
            .output()
            .map_err(|e| format!("cannot run spirv-val: {e}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "spirv-val ({}): {}{}",
                self.target_env,
                String::from_utf8_lossy(&output.stdout).trim(),
                String::from_utf8_lossy(&output.stderr).trim()
            ))
        }
    }
}

#[test]
fn every_demo_variant_compiles_for_every_target() {
    let manifest = demo_manifest();
    let loader = DiskLoader::new(&manifest.root);
    let spirv_val = manifest
        .targets
        .iter()
        .find(|t| t.target() == Target::Spirv)
        .and_then(SpirvVal::find);
    let scratch = tempfile::tempdir().unwrap();

    let mut failures: Vec<String> = Vec::new();
    let mut variants = 0usize;
    let mut artifacts = 0usize;
    let mut validated = 0usize;
    let mut distinct_texts = BTreeSet::new();
    let mut per_shader: BTreeMap<&str, usize> = BTreeMap::new();

    for shader in &manifest.shaders {
        for pass in &shader.passes {
            for keywords in &shader.variants {
                variants += 1;
                *per_shader.entry(&shader.name).or_default() += 1;
                let label = format!("{}/{} [{}]", shader.name, pass.name, keywords.join(";"));
                let text = match run_preprocess(shader, pass, keywords, &loader) {
                    Ok(text) => text,
                    Err(e) => {
                        failures.push(format!("{label}: preprocess: {e}"));
                        continue;
                    }
                };
                distinct_texts.insert((pass.language, pass.stage, text.text.clone()));
                // Each pass through its own compiler (naga or glslang), as a build runs it.
                let targets: Vec<Option<&TargetConfig>> =
                    manifest.targets.iter().map(Some).collect();
                let constants = shader.constants_for(pass, keywords.iter().map(String::as_str));
                let request = compile::CompileRequest {
                    language: pass.language,
                    text: &text.text,
                    stage: pass.stage,
                    entry: &pass.entry,
                    constants: &constants,
                };
                let results = match compile::compile_with(&pass.front_end, &request, &targets) {
                    Ok(results) => results,
                    Err(e) => {
                        failures.push(format!("{label}: {}", describe(&e, &text)));
                        continue;
                    }
                };
                for (target, result) in manifest.targets.iter().zip(results) {
                    let bytes = match result {
                        Some(Ok(bytes)) => bytes,
                        Some(Err(e)) => {
                            failures.push(format!("{label} -> {}: {e}", target.target()));
                            continue;
                        }
                        None => {
                            failures.push(format!("{label} -> {}: no result", target.target()));
                            continue;
                        }
                    };
                    assert!(
                        !bytes.is_empty(),
                        "{label} -> {}: empty output",
                        target.target()
                    );
                    artifacts += 1;
                    if let (Target::Spirv, Some(val)) = (target.target(), &spirv_val) {
                        match val.check(scratch.path(), &bytes) {
                            Ok(()) => validated += 1,
                            Err(report) => failures.push(format!("{label} -> spirv: {report}")),
                        }
                    }
                }
            }
        }
    }

    println!(
        "demo: {variants} variants ({} distinct preprocessed texts), {artifacts} artifacts for {} targets, {validated} validated by spirv-val",
        distinct_texts.len(),
        manifest.targets.len()
    );
    for (shader, count) in &per_shader {
        println!("  {shader}: {count}");
    }
    assert!(
        failures.is_empty(),
        "{} of the demo's compiles failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(variants, manifest.variant_count());
    assert!(
        variants >= MIN_VARIANTS,
        "the demo has {variants} variants, fewer than {MIN_VARIANTS}"
    );
    assert_eq!(artifacts, variants * manifest.targets.len());
    if spirv_val.is_some() {
        assert_eq!(validated, variants, "every variant's SPIR-V is validated");
    }
}

/// Every preprocessed text of the demo, by (shader, pass, keyword set).
fn all_texts(
    manifest: &Manifest,
    loader: &dyn SourceLoader,
) -> BTreeMap<(String, String, Vec<String>), String> {
    let mut texts = BTreeMap::new();
    for shader in &manifest.shaders {
        for pass in &shader.passes {
            for keywords in &shader.variants {
                let text = run_preprocess(shader, pass, keywords, loader).unwrap_or_else(|e| {
                    panic!(
                        "{}/{} [{}]: {e}",
                        shader.name,
                        pass.name,
                        keywords.join(";")
                    )
                });
                texts.insert(
                    (shader.name.clone(), pass.name.clone(), keywords.clone()),
                    text.text,
                );
            }
        }
    }
    texts
}

#[test]
fn every_demo_keyword_changes_some_code() {
    let manifest = demo_manifest();
    let texts = all_texts(&manifest, &DiskLoader::new(&manifest.root));
    for shader in &manifest.shaders {
        let of_shader = || texts.iter().filter(|((s, _, _), _)| *s == shader.name);
        for keyword in &shader.keywords {
            let without: BTreeSet<(&str, &str)> = of_shader()
                .filter(|((_, _, k), _)| !k.contains(keyword))
                .map(|((_, pass, _), text)| (pass.as_str(), text.as_str()))
                .collect();
            let changes_code = of_shader()
                .filter(|((_, _, k), _)| k.contains(keyword))
                .any(|((_, pass, _), text)| !without.contains(&(pass.as_str(), text.as_str())));
            assert!(
                changes_code,
                "keyword {keyword} of shader {} changes no preprocessed text",
                shader.name
            );
        }
    }
}

/// Serves the demo's files from disk, except `path`, whose text is `edit` applied to the
/// file on disk.
fn with_edit(
    root: &Path,
    path: &'static str,
    edit: impl Fn(&str) -> String,
) -> impl Fn(&Path) -> Result<Arc<str>, io::Error> {
    let disk = DiskLoader::new(root);
    let edited: Arc<str> = edit(&std::fs::read_to_string(root.join(path)).unwrap()).into();
    move |p: &Path| {
        if p == Path::new(path) {
            Ok(edited.clone())
        } else {
            disk.load(p)
        }
    }
}

/// Inserts `line` right after the first line that is exactly `marker`.
fn insert_after(text: &str, marker: &str, line: &str) -> String {
    let at = text
        .find(&format!("\n{marker}\n"))
        .unwrap_or_else(|| panic!("`{marker}` not found"))
        + marker.len()
        + 2;
    format!("{}{line}\n{}", &text[..at], &text[at..])
}

/// The (shader, pass, keyword set) triples whose preprocessed text differs between two runs.
fn changed(
    before: &BTreeMap<(String, String, Vec<String>), String>,
    after: &BTreeMap<(String, String, Vec<String>), String>,
) -> BTreeSet<(String, String, Vec<String>)> {
    before
        .iter()
        .filter(|(key, text)| after.get(*key) != Some(*text))
        .map(|(key, _)| key.clone())
        .collect()
}

#[test]
fn an_edit_inside_ifdef_in_an_include_reaches_exactly_those_variants() {
    let manifest = demo_manifest();
    let root = &manifest.root;
    let before = all_texts(&manifest, &DiskLoader::new(root));
    // Every shader whose passes read `include`, by the variants' own file lists.
    let readers = |include: &str| -> BTreeSet<String> {
        let loader = DiskLoader::new(root);
        let mut names = BTreeSet::new();
        for shader in &manifest.shaders {
            for pass in &shader.passes {
                for keywords in &shader.variants {
                    let text = run_preprocess(shader, pass, keywords, &loader).unwrap();
                    if text.files().iter().any(|f| f == Path::new(include)) {
                        names.insert(shader.name.clone());
                    }
                }
            }
        }
        names
    };

    let cases = [
        (
            "shaders/include/fog.wgsl",
            "#ifdef FOG",
            "const FOG_EDIT_PROBE: f32 = 1.0;",
            "FOG",
        ),
        (
            "shaders/include/fog.glsl",
            "#ifdef FOG",
            "const float FOG_EDIT_PROBE = 1.0;",
            "FOG",
        ),
        (
            "shaders/include/skinning.wgsl",
            "#ifdef SKIN",
            "const SKIN_EDIT_PROBE: f32 = 1.0;",
            "SKIN",
        ),
    ];
    for (include, marker, code, keyword) in cases {
        let shaders = readers(include);
        assert!(!shaders.is_empty(), "no demo shader reads {include}");
        let after = all_texts(
            &manifest,
            &with_edit(root, include, |t| insert_after(t, marker, code)),
        );
        let expected: BTreeSet<_> = before
            .keys()
            .filter(|(shader, _, keywords)| {
                shaders.contains(shader) && keywords.iter().any(|k| k == keyword)
            })
            .cloned()
            .collect();
        assert!(!expected.is_empty());
        assert_eq!(
            changed(&before, &after),
            expected,
            "an edit inside `{marker}` of {include} must change exactly the {keyword} variants of {shaders:?}"
        );

        let commented = all_texts(
            &manifest,
            &with_edit(root, include, |t| {
                insert_after(t, marker, "// a new comment")
            }),
        );
        assert!(
            changed(&before, &commented).is_empty(),
            "a comment added to {include} changes no preprocessed text"
        );
    }
}
