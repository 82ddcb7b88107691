//! Issue 9, item 5: no shader can crash the build. A huge expression used to overflow naga's
//! stack on a worker thread and abort the process, writing none of the other variants.

use kiln::compile::{
    compile, SourceLanguage, Stage, TargetConfig, MAX_NESTING, MAX_STATEMENT_OPERATORS,
};
use kiln::pipeline::{BuildOptions, Project, Severity};

fn sum_of(terms: usize) -> String {
    let expr = vec!["x"; terms].join(" + ");
    format!(
        "@fragment\nfn fs_main() -> @location(0) vec4<f32> {{\n    let x = 1.0;\n    return vec4<f32>({expr});\n}}\n"
    )
}

const SMALL: &str = "@fragment\nfn fs_main() -> @location(0) vec4<f32> {\n#ifdef FOG\n    return vec4<f32>(0.5);\n#else\n    return vec4<f32>(1.0);\n#endif\n}\n";

#[test]
fn a_5000_term_expression_fails_or_builds_alone_and_every_other_variant_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut manifest =
        String::from("[project]\ntargets = [\"spirv\", \"msl\", \"hlsl\", \"glsl\", \"wgsl\"]\n");
    for (name, source) in [("Deep", "deep.wgsl"), ("Huge", "huge.wgsl")] {
        manifest.push_str(&format!(
            "\n[[shader]]\nname = \"{name}\"\nsource = \"{source}\"\n\n[shader.passes.Forward]\nstage = \"fragment\"\nentry = \"fs_main\"\n"
        ));
    }
    for i in 0..6 {
        manifest.push_str(&format!(
            "\n[[shader]]\nname = \"Small{i}\"\nsource = \"small.wgsl\"\naxes = [[\"_\", \"FOG\"]]\n\n[shader.passes.Forward]\nstage = \"fragment\"\nentry = \"fs_main\"\n"
        ));
    }
    std::fs::write(root.join("kiln.toml"), manifest).unwrap();
    std::fs::write(root.join("deep.wgsl"), sum_of(5_000)).unwrap();
    std::fs::write(root.join("huge.wgsl"), sum_of(MAX_STATEMENT_OPERATORS + 10)).unwrap();
    std::fs::write(root.join("small.wgsl"), SMALL).unwrap();
    let mut project = Project::open(&BuildOptions {
        manifest: root.join("kiln.toml"),
        jobs: Some(2),
        ..BuildOptions::default()
    })
    .unwrap();
    let report = project.build(&|_| {}).unwrap();
    // The 5,000-term sum compiles on the compile stack; the one past the limit fails alone,
    // located.
    assert_eq!(report.variants, 14);
    assert_eq!(report.failed, 1, "{:#?}", report.diagnostics);
    let error = report
        .diagnostics
        .iter()
        .find(|d| d.severity == Severity::Error)
        .unwrap();
    assert!(error.message.contains("operators"), "{error}");
    let at = error.location.as_ref().expect("located");
    assert_eq!((at.file.to_str(), at.line), (Some("huge.wgsl"), 4));
    assert!(error.variant.as_deref().unwrap_or("").contains("Huge"));
    assert_eq!(report.outputs_written, 13 * 5);
    assert!(root.join("out/Deep/Forward/_.spv").is_file());
    assert!(root.join("out/Small5/Forward/FOG.metal").is_file());
}

/// The limits are safe: at the bound, every back end fits in the compile stack, also in an
/// unoptimised build (the deepest recursion). Run on a small thread stack, as a rayon worker
/// has, to show that the compile does not use the caller's.
#[test]
fn the_largest_accepted_expression_compiles_for_every_target_on_a_small_thread() {
    // `vec4<f32>(` holds two more operators.
    let text = sum_of(MAX_STATEMENT_OPERATORS - 1);
    let handle = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || {
            for target in ["spirv", "msl", "hlsl", "glsl", "wgsl"] {
                let config = TargetConfig::parse(target, &Default::default()).unwrap();
                let result = compile(
                    SourceLanguage::Wgsl,
                    &text,
                    Stage::Fragment,
                    "fs_main",
                    &config,
                );
                assert!(result.is_ok(), "{target}: {result:?}");
            }
        })
        .unwrap();
    handle.join().unwrap();
}

#[test]
fn brackets_nested_past_the_limit_are_refused_before_naga() {
    let deep = format!(
        "{}x{}",
        "(".repeat(MAX_NESTING + 1),
        ")".repeat(MAX_NESTING + 1)
    );
    let text = format!("fn f(x: f32) -> f32 {{\n    return {deep};\n}}\n");
    let config = TargetConfig::parse("spirv", &Default::default()).unwrap();
    let e = compile(
        SourceLanguage::Glsl,
        &text,
        Stage::Fragment,
        "main",
        &config,
    )
    .unwrap_err();
    assert!(e.message.contains("nest"), "{e}");
    assert_eq!(e.location.map(|l| l.line), Some(2));
}
