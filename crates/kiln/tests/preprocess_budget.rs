//! Work bounded per variant (issue 25, items 4 and 5): include graphs that double at each
//! level, a large macro used many times, a large include included many times. A guarded
//! header included again costs nothing; whatever is genuinely too much fails its variant
//! alone, with a typed error at the directive or line that went over, and the other variants
//! build. The tests count work (includes entered, bytes read, files loaded), not time.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::Arc;

use kiln::preprocess::{
    preprocess_spent, BudgetKind, Dialect, MemoryLoader, PreprocessBudget, PreprocessError,
    PreprocessRequest, Preprocessed, SourceLoader, Spent,
};
use kiln_test_support::TempProject;

/// A loader that counts each file's loads (whole or for a view).
#[derive(Default)]
struct Counting {
    files: MemoryLoader,
    loads: RefCell<BTreeMap<String, usize>>,
}

impl SourceLoader for Counting {
    fn load(&self, path: &Path) -> Result<Arc<str>, io::Error> {
        *self
            .loads
            .borrow_mut()
            .entry(path.display().to_string())
            .or_default() += 1;
        self.files.load(path)
    }
}

fn run(
    loader: &dyn SourceLoader,
    entry: &str,
    language: Dialect,
    budget: PreprocessBudget,
) -> (Result<Preprocessed, PreprocessError>, Spent) {
    preprocess_spent(
        &PreprocessRequest {
            entry: Path::new(entry),
            language,
            include_dirs: &[],
            keywords: &[],
            defines: &[],
            budget,
        },
        loader,
    )
}

/// How each header of the doubling graph protects itself.
#[derive(Clone, Copy, Debug)]
enum Guard {
    Ifndef,
    IfNotDefined,
    PragmaOnce,
    None,
}

/// `main` includes `h0`; `h{k}` includes `h{k+1}` twice, for `levels` levels.
fn doubling(levels: usize, guard: Guard, language: Dialect) -> (Counting, &'static str) {
    let (ext, main, code) = match language {
        Dialect::Wgsl => ("wgsl", "main.wgsl", "const c{k}: i32 = {k};\n"),
        _ => ("glsl", "main.comp", "const int c{k} = {k};\n"),
    };
    let mut loader = Counting::default();
    for k in 0..=levels {
        let mut text = String::new();
        match guard {
            Guard::Ifndef => text.push_str(&format!("#ifndef H{k}\n#define H{k}\n")),
            Guard::IfNotDefined => text.push_str(&format!("#if !defined(H{k})\n#define H{k}\n")),
            Guard::PragmaOnce => text.push_str("// a header\n#pragma once\n"),
            Guard::None => {}
        }
        if k < levels {
            let next = k + 1;
            text.push_str(&format!(
                "#include \"h{next}.{ext}\"\n#include \"h{next}.{ext}\"\n"
            ));
        }
        text.push_str(&code.replace("{k}", &k.to_string()));
        if matches!(guard, Guard::Ifndef | Guard::IfNotDefined) {
            text.push_str("#endif // a comment after the guard's end changes nothing\n");
        }
        loader.files.insert(format!("h{k}.{ext}"), text);
    }
    let version = if language == Dialect::Glsl {
        "#version 450\n"
    } else {
        ""
    };
    loader
        .files
        .insert(main, format!("{version}#include \"h0.{ext}\"\n"));
    (loader, main)
}

/// Item 4: 40 levels of doubling with guards (`#ifndef`, `#if !defined`, `#pragma once`),
/// WGSL, GLSL and HLSL: each header is loaded once and entered once (41 includes), the
/// re-inclusions are skipped without being scanned. Before, a guarded header was entered
/// again and scanned for its `#endif` (81 includes; and the same for every variant).
#[test]
fn guarded_doubling_enters_each_header_once() {
    for language in [Dialect::Wgsl, Dialect::Glsl, Dialect::Hlsl] {
        for guard in [Guard::Ifndef, Guard::IfNotDefined, Guard::PragmaOnce] {
            let (loader, main) = doubling(40, guard, language);
            let (result, spent) = run(&loader, main, language, PreprocessBudget::default());
            let out = result.unwrap_or_else(|e| panic!("{language:?} {guard:?}: {e}"));
            assert_eq!(spent.includes, 41, "{language:?} {guard:?}");
            assert_eq!(out.text.lines().filter(|l| l.contains("c40")).count(), 1);
            let loads = loader.loads.borrow();
            assert_eq!(loads.len(), 42, "{language:?} {guard:?}");
            assert!(
                loads.values().all(|&n| n == 1),
                "{language:?} {guard:?}: {loads:?}"
            );
        }
    }
}

/// Item 4, the guard's limits: a header whose guard does not wrap it all (here a line after
/// `#endif`) is entered at each inclusion, as it must be.
#[test]
fn a_header_with_code_outside_its_guard_is_entered_each_time() {
    let mut files = MemoryLoader::new();
    files.insert("main.wgsl", "#include \"h.wgsl\"\n#include \"h.wgsl\"\n");
    files.insert(
        "h.wgsl",
        "#ifndef H\n#define H\nconst a = 1;\n#endif\nconst b = 2;\n",
    );
    let (result, spent) = run(&files, "main.wgsl", Dialect::Wgsl, Default::default());
    assert_eq!(spent.includes, 2);
    assert_eq!(
        result.unwrap().text,
        "const a = 1;\nconst b = 2;\nconst b = 2;\n"
    );
}

/// Items 4 and 5: 40 levels of doubling without guards is 2^40 inclusions, genuinely
/// exponential text: the include budget stops it after `max_includes` (it hung before), at
/// an `#include` line, whatever the dialect.
#[test]
fn unguarded_doubling_stops_at_the_include_budget() {
    let budget = PreprocessBudget {
        max_includes: 5_000,
        ..PreprocessBudget::default()
    };
    for language in [Dialect::Wgsl, Dialect::Glsl] {
        let (loader, main) = doubling(40, Guard::None, language);
        let (result, spent) = run(&loader, main, language, budget);
        let Err(PreprocessError::BudgetExceeded {
            at,
            budget: BudgetKind::Includes,
            limit: 5_000,
        }) = &result
        else {
            panic!("{language:?}: {result:?}");
        };
        assert_eq!(spent.includes, 5_000);
        assert!(at.file.to_string_lossy().starts_with('h'), "{at}");
        assert!(at.line <= 2, "{at}");
        assert!(
            result
                .unwrap_err()
                .to_string()
                .contains("include expansions"),
            "the message names the budget"
        );
    }
    // The default budget stops it too, within 65,536 includes.
    let (loader, main) = doubling(40, Guard::None, Dialect::Wgsl);
    let (result, spent) = run(&loader, main, Dialect::Wgsl, PreprocessBudget::default());
    assert!(matches!(
        result,
        Err(PreprocessError::BudgetExceeded {
            budget: BudgetKind::Includes,
            ..
        })
    ));
    assert_eq!(spent.includes, 65_536);
}

/// Item 5: a 1 MiB `#define` used 3,000 times (3 GiB of text; the process aborted on a
/// 2 GiB allocation) fails at the line whose expansion passes the output budget, WGSL and
/// GLSL (there a single 1 MiB token, which the C expander's token count alone let through).
#[test]
fn a_large_macro_used_many_times_fails_at_the_output_budget() {
    let big = "x".repeat(1 << 20);
    for (language, main, prefix) in [
        (Dialect::Wgsl, "main.wgsl", ""),
        (Dialect::Glsl, "main.frag", "#version 450\n"),
    ] {
        let mut text = format!("{prefix}#define BIG {big}\n");
        for _ in 0..3000 {
            text.push_str("BIG\n");
        }
        let mut files = MemoryLoader::new();
        files.insert(main, text);
        let budget = PreprocessBudget::default();
        let (result, _) = run(&files, main, language, budget);
        let Err(PreprocessError::BudgetExceeded {
            at,
            budget: BudgetKind::OutputBytes,
            limit,
        }) = result
        else {
            panic!("{language:?}: {result:?}");
        };
        assert_eq!(limit, 32 << 20);
        assert_eq!(at.file, Path::new(main));
        // 32 copies fit, the 33rd does not (a line or two more where a prefix came first).
        let first_use = prefix.lines().count() as u32 + 2;
        assert!(
            (first_use + 31..=first_use + 33).contains(&at.line),
            "{language:?}: {at}"
        );
    }
}

/// Item 5, `##`: pasting long tokens is charged before the token is made, so a paste chain
/// cannot build a huge token (HLSL pastes expanded arguments).
#[test]
fn pasting_long_tokens_is_bounded_by_the_output_budget() {
    let big = "y".repeat(64 << 10);
    let mut text = format!("#define BIG {big}\n#define TWICE(a) a##a\n#define P(a) TWICE(a)\n");
    text.push_str("int v = P(BIG)");
    for _ in 0..200 {
        text.push_str(" + P(BIG)");
    }
    text.push_str(";\n");
    let mut files = MemoryLoader::new();
    files.insert("main.hlsl", text);
    let budget = PreprocessBudget::for_max_source_bytes(256 << 10);
    let (result, _) = run(&files, "main.hlsl", Dialect::Hlsl, budget);
    assert!(
        matches!(
            result,
            Err(PreprocessError::BudgetExceeded {
                budget: BudgetKind::OutputBytes,
                ..
            })
        ),
        "{result:?}"
    );
}

/// Item 5: a file at the size cap included 100 times (at 4 MiB: 51 s and 7 GB before)
/// fails at the `#include` that passes a budget, the output's here; the same scaled down
/// so the test is quick (the budget is proportional to the cap).
#[test]
fn a_large_include_included_many_times_fails_at_a_budget() {
    let cap = 64 << 10;
    let budget = PreprocessBudget::for_max_source_bytes(cap);
    let line = "const v: f32 = 1.0;\n";
    let mut files = MemoryLoader::new();
    files.insert("big.wgsl", line.repeat(cap as usize / line.len()));
    files.insert("main.wgsl", "#include \"big.wgsl\"\n".repeat(100));
    let (result, spent) = run(&files, "main.wgsl", Dialect::Wgsl, budget);
    let Err(PreprocessError::BudgetExceeded {
        at,
        budget: BudgetKind::OutputBytes,
        ..
    }) = result
    else {
        panic!("{result:?}");
    };
    assert_eq!(at.file, Path::new("big.wgsl"));
    // 8 copies (just under the cap each) fit; the 9th is entered and passes the budget.
    assert_eq!(spent.includes, 9);

    // Directive lines are read too, but make no output: the read budget stops those.
    files.insert("big.wgsl", "#undef X\n".repeat(cap as usize / 9));
    let (result, spent) = run(&files, "main.wgsl", Dialect::Wgsl, budget);
    assert!(
        matches!(
            result,
            Err(PreprocessError::BudgetExceeded {
                budget: BudgetKind::BytesRead,
                ..
            })
        ),
        "{result:?}"
    );
    assert!(spent.bytes_read <= budget.max_bytes_read);
    // 16 x the cap: the 16th copy (with the lines of `main`) passes it.
    assert_eq!(spent.includes, 16);

    // An inactive block is jumped over: it costs nothing however often it is included.
    files.insert(
        "big.wgsl",
        format!("#if 0\n{}#endif\n", line.repeat(cap as usize / 25)),
    );
    let (result, spent) = run(&files, "main.wgsl", Dialect::Wgsl, budget);
    assert_eq!(result.unwrap().text, "");
    // Per inclusion: its `#include` line and the two directive lines.
    assert_eq!(spent.bytes_read, 100 * (20 + 6 + 7), "{spent:?}");
}

const MANIFEST: &str = r#"
[project]
targets = ["spirv"]
max_source_bytes = 1024

[[shader]]
name = "Heavy"
source = "shaders/heavy.wgsl"
axes = [["_", "MANY"]]

[shader.passes.Main]
stage = "compute"
entry = "main"

[[shader]]
name = "Light"
source = "shaders/light.wgsl"

[shader.passes.Main]
stage = "compute"
entry = "main"
"#;

/// Item 5 through the pipeline: the variant over budget fails alone with its location and
/// the budget named; the other variant of its shader and the other shader build; raising
/// `max_source_bytes` raises the budget and the variant builds.
#[test]
fn a_variant_over_budget_fails_alone() {
    // 1,000 bytes included 10 times: 10,000 bytes of output, over 8 x 1,024.
    let heavy = format!(
        "@compute @workgroup_size(1) fn main() {{\n#ifdef MANY\n{}#endif\n}}\n",
        "#include \"part.wgsl\"\n".repeat(10)
    );
    let project = TempProject::from_files([
        ("kiln.toml", MANIFEST.to_owned()),
        ("shaders/heavy.wgsl", heavy),
        ("shaders/part.wgsl", "_ = 1.0;\n".repeat(100)),
        (
            "shaders/light.wgsl",
            "@compute @workgroup_size(1) fn main() {}\n".to_owned(),
        ),
    ]);
    let out = project.out_dir();
    let mut live = project.live();
    let report = live.build();
    assert_eq!(report.variants, 3);
    assert_eq!(report.failed, 1, "{:?}", report.diagnostics);
    let message = report.diagnostics[0].to_string();
    assert!(message.contains("bytes of preprocessed text"), "{message}");
    assert!(message.contains("max_source_bytes"), "{message}");
    assert!(message.starts_with("shaders/part.wgsl:"), "{message}");
    assert!(message.contains("MANY"), "the variant is named: {message}");
    assert!(out.join("Light/Main/_.spv").exists());
    assert!(out.join("Heavy/Main/_.spv").exists());
    assert!(!out.join("Heavy/Main/MANY.spv").exists());

    live.edit_manifest("max_source_bytes = 1024", "max_source_bytes = 4096");
    let report = live.build();
    assert_eq!(report.failed, 0, "{:?}", report.diagnostics);
    assert!(out.join("Heavy/Main/MANY.spv").exists());
}

const GUARDED_MANIFEST: &str = r#"
[project]
targets = ["spirv"]

[[shader]]
name = "Main"
source = "shaders/main.wgsl"
axes = [["_", "H"]]

[shader.passes.Main]
stage = "compute"
entry = "main"
"#;

const GUARDED: &str = "#ifndef H\n#define H\nfn f() -> i32 { return 1; }\n#endif\n";

/// Item 4, staleness: the variant whose keyword is a header's guard macro skips the header
/// without entering it, yet depends on the lines before its `#ifndef` and after its
/// `#endif` (its view marks those blocks, as entering it would): once a line there makes
/// the header unguarded, the variant preprocesses again and equals a clean build.
#[test]
fn a_header_skipped_for_its_guard_sees_lines_added_around_it() {
    let mut live = TempProject::from_files([
        ("kiln.toml", GUARDED_MANIFEST),
        (
            "shaders/main.wgsl",
            "#include \"h.wgsl\"\n@compute @workgroup_size(1) fn main() { _ = f(); }\n",
        ),
        ("shaders/h.wgsl", GUARDED),
    ])
    .live();
    // `H` skips h.wgsl and lacks `f`.
    let first = live.build();
    assert_eq!(first.failed, 1, "{:?}", first.diagnostics);
    assert!(live.out_dir().join("Main/Main/_.spv").exists());
    let redefined = "fn f() -> i32 { return 3; }\n";
    for (what, text) in [
        ("a line after #endif", format!("{GUARDED}{redefined}")),
        ("a line before #ifndef", format!("{redefined}{GUARDED}")),
    ] {
        live.write("shaders/h.wgsl", &text);
        // Now `H` reads the new `f`, and `_` both (and fails).
        let report = live.build();
        assert_eq!(report.failed, 1, "{what}: {:?}", report.diagnostics);
        assert!(live.out_dir().join("Main/Main/H.spv").exists(), "{what}");
        live.assert_same_as_clean(what);
        live.write("shaders/h.wgsl", GUARDED);
        live.build();
        live.assert_same_as_clean(what);
    }
}

/// Item 4, errors: a skipped group still checks the nesting of its conditionals, so a
/// header with a malformed one is entered even while its guard is defined, and the error is
/// the one it always was.
#[test]
fn a_guarded_header_with_a_malformed_group_is_still_checked() {
    for (language, main, header) in [
        (Dialect::Wgsl, "main.wgsl", "h.wgsl"),
        (Dialect::Glsl, "main.frag", "h.glsl"),
    ] {
        let mut files = MemoryLoader::new();
        files.insert(main, format!("#include \"{header}\"\n"));
        files.insert(header, "#ifndef H\n#if A\n#else\n#else\n#endif\n#endif\n");
        let request = PreprocessRequest {
            entry: Path::new(main),
            language,
            include_dirs: &[],
            keywords: &["H"],
            defines: &[],
            budget: PreprocessBudget::default(),
        };
        let (result, _) = preprocess_spent(&request, &files);
        assert!(
            matches!(
                &result,
                Err(PreprocessError::UnbalancedConditional { at, .. }) if at.line == 4
            ),
            "{language:?}: {result:?}"
        );
    }
}
