//! The C preprocessor of GLSL and HLSL: what it writes, where each line comes from, its
//! errors (typed, with file and line), its limits against hostile input, and include
//! directories. (`preprocess_glslang.rs` compares it with glslangValidator.)

mod preprocess_support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kiln::preprocess::{
    include_closure, preprocess, Dialect, PathProblem, PreprocessBudget, PreprocessError,
    PreprocessRequest, Preprocessed,
};
use preprocess_support::{origins, place, Files};

fn run_in(
    files: &Files,
    entry: &str,
    language: Dialect,
    include_dirs: &[&str],
    defines: &[(&str, &str)],
) -> Result<Preprocessed, PreprocessError> {
    let dirs: Vec<PathBuf> = include_dirs.iter().map(PathBuf::from).collect();
    preprocess(
        &PreprocessRequest {
            entry: Path::new(entry),
            language,
            include_dirs: &dirs,
            keywords: &[],
            defines,
            budget: PreprocessBudget::default(),
        },
        files,
    )
}

fn glsl(source: &str) -> Result<Preprocessed, PreprocessError> {
    run_in(
        &Files::new(&[("s.frag", source)]),
        "s.frag",
        Dialect::Glsl,
        &[],
        &[],
    )
}

fn text(source: &str) -> String {
    glsl(source).unwrap_or_else(|e| panic!("{e}")).text
}

#[test]
fn function_like_macros_expand_with_c_rules() {
    assert_eq!(
        text("#define SQ(x) ((x)*(x))\nfloat a = SQ(b + 1);\n"),
        "float a = ((b + 1)*(b + 1));\n"
    );
    // Arguments are expanded first; nested parentheses and commas inside them group.
    assert_eq!(
        text("#define ONE 1\n#define ADD(a, b) (a + b)\nint x = ADD(ONE, f(2, ONE));\n"),
        "int x = (1 + f(2, 1));\n"
    );
    // A function-like macro's name without `(` is left alone; one may produce another's call.
    assert_eq!(
        text("#define F(x) [x]\n#define G F\nint F; int y = G(3) G;\n"),
        "int F; int y = [3] F;\n"
    );
    // A macro never expands inside its own expansion.
    assert_eq!(
        text("#define SELF SELF + 1\n#define LEFT(x) x RIGHT\n#define RIGHT(x) LEFT(x)\nint a = SELF; float e = LEFT(1)(2);\n"),
        "int a = SELF + 1; float e = 1 2 RIGHT;\n"
    );
}

#[test]
fn pasting_joins_tokens_as_glslang_allows() {
    assert_eq!(
        text("#define CAT(a, b) a##b\n#define E\nint CAT(x, 1) = CAT(x, E); int y = 1 CAT(<, <) 2;\n"),
        "int x1 = xE; int y = 1 << 2;\n"
    );
    // Tokens written next to each other stay apart when they came from different places.
    assert_eq!(text("#define P +\nint a = b P+c;\n"), "int a = b + +c;\n");
}

#[test]
fn continuations_join_lines_and_the_line_map_points_at_physical_lines() {
    let files = Files::new(&[(
        "s.frag",
        "#define LONG(a) a + \\\n   a\nfloat v = LONG(2.0) \\\n  * 3.0;\nfloat w = LONG(\n  1.0);\n",
    )]);
    let out = run_in(&files, "s.frag", Dialect::Glsl, &[], &[]).unwrap();
    // A macro's expansion is written on the line of its name; text after a continuation
    // or after a call's last line on the line it is on.
    assert_eq!(
        out.text,
        "float v = 2.0 + 2.0\n* 3.0;\nfloat w = 1.0 + 1.0\n;\n"
    );
    let lines: Vec<u32> = origins(&out).into_iter().map(|(_, _, line)| line).collect();
    assert_eq!(lines, [3, 4, 5, 6]);
}

#[test]
fn builtin_macros_line_file_and_version() {
    assert_eq!(
        text("#version 450\nint l = __LINE__;\n#line 100\nint m = __LINE__ + __FILE__;\n#line 7 3\nint n = __LINE__ + __FILE__ + __VERSION__;\n"),
        "#version 450\nint l = 2;\nint m = 100 + 0;\nint n = 7 + 3 + 450;\n"
    );
    // With the include extension glslang names files: so does kiln (root-relative).
    assert_eq!(
        text("#version 450\n#extension GL_GOOGLE_include_directive : require\nint f = __FILE__;\n"),
        "#version 450\n#extension GL_GOOGLE_include_directive : require\nint f = \"s.frag\";\n"
    );
    // __LINE__ in a replacement is the line where the call ends.
    assert_eq!(
        text("#define AT(x) x + __LINE__\nint a = AT(\n 1);\n"),
        "int a = 1 + 3\n;\n"
    );
    let hlsl = run_in(
        &Files::new(&[("m/s.hlsl", "string f = __FILE__;\n")]),
        "m/s.hlsl",
        Dialect::Hlsl,
        &[],
        &[],
    )
    .unwrap();
    assert_eq!(hlsl.text, "string f = \"m/s.hlsl\";\n");
}

#[test]
fn defined_undef_and_expressions_with_function_like_macros() {
    assert_eq!(
        text("#define ID(x) x\n#define TWO 2\n#if ID(TWO) * 2 == 4 && defined(ID) && defined TWO\nyes\n#endif\n#undef TWO\n#ifdef TWO\nno\n#endif\n#if TWO\nno\n#elif !defined(TWO)\nstill\n#endif\n"),
        "yes\nstill\n"
    );
    let err = glsl("#define D defined(X)\n#if D\n#endif\n").unwrap_err();
    assert!(
        matches!(err, PreprocessError::InvalidExpression { .. }),
        "{err}"
    );
    assert_eq!(place(&err).1, 2);
}

#[test]
fn directives_pass_through_where_glslang_writes_them() {
    assert_eq!(
        text("// header\n#version 450 core\n#extension GL_EXT_debug_printf : enable\n#pragma optimize(off)\n#pragma debug(on)\nvoid main() {}\n"),
        "#version 450 core\n#extension GL_EXT_debug_printf : enable\n#pragma optimize(off)\n#pragma debug(on)\nvoid main() {}\n"
    );
    let err = glsl("void f();\n#version 450\n").unwrap_err();
    assert!(matches!(err, PreprocessError::VersionNotFirst { .. }));
}

#[test]
fn errors_are_typed_and_located() {
    type Case = (&'static str, fn(&PreprocessError) -> bool, u32);
    let cases: [Case; 9] = [
        (
            "#define F(x) x\nint a = F(1;\n",
            |e| matches!(e, PreprocessError::MacroCallUnterminated { name, .. } if name == "F"),
            2,
        ),
        (
            "#define F(x) x\nint a = F(1\n#define G\n);\n",
            |e| matches!(e, PreprocessError::MacroCallUnterminated { .. }),
            2,
        ),
        (
            "#define F(a, b) a\n\nint a = F(1);\n",
            |e| {
                matches!(
                    e,
                    PreprocessError::MacroArgumentCount {
                        expected: 2,
                        found: 1,
                        ..
                    }
                )
            },
            3,
        ),
        (
            "#define F(a) a\nint a = F(1, 2);\n",
            |e| {
                matches!(
                    e,
                    PreprocessError::MacroArgumentCount {
                        expected: 1,
                        found: 2,
                        ..
                    }
                )
            },
            2,
        ),
        (
            "#define C(a, b) a##b\nint a = C(1, 2);\n",
            |e| matches!(e, PreprocessError::BadTokenPaste { .. }),
            2,
        ),
        (
            "#define C(a, b) a##b\nint a = C(, 2);\n",
            |e| matches!(e, PreprocessError::BadTokenPaste { .. }),
            2,
        ),
        (
            "#define S(a) #a\nint a = S(x);\n",
            |e| matches!(e, PreprocessError::StrayHash { .. }),
            2,
        ),
        (
            "#define V(a, ...) a\n",
            |e| matches!(e, PreprocessError::MalformedDirective { message, .. } if message.contains("variadic")),
            1,
        ),
        (
            "\n#error FOG needs \\\n  SKIN\n",
            |e| matches!(e, PreprocessError::ErrorDirective { message, .. } if message == "FOG needs SKIN"),
            2,
        ),
    ];
    for (source, is, line) in cases {
        let err = glsl(source).unwrap_err();
        assert!(is(&err), "{source:?}: {err:?}");
        assert_eq!(
            place(&err),
            ("s.frag".to_owned(), line, place(&err).2),
            "{source:?}: {err}"
        );
        assert!(
            err.to_string().starts_with(&format!("s.frag:{line}:")),
            "{err}"
        );
    }
}

#[test]
fn hostile_macros_stop_with_an_error_quickly() {
    let mut doubling = String::from("#define D(x) x x\n");
    doubling.push_str(&"D(".repeat(40));
    doubling.push('1');
    doubling.push_str(&")".repeat(40));
    doubling.push('\n');
    let mut chain = String::new();
    for i in 0..40 {
        chain.push_str(&format!("#define M{i} M{} M{}\n", i + 1, i + 1));
    }
    chain.push_str("M0\n");
    let mut deep = String::from("#define F(x) (x)\n");
    deep.push_str(&"F(".repeat(5000));
    deep.push_str(&")".repeat(5000));
    deep.push('\n');
    // Many runs of text (split by directives), each under any per-line limit: the limit
    // is on the whole variant.
    let mut wide = String::from(
        "#define A0 x x x x x x x x x x
",
    );
    for level in 1..5 {
        let below = format!("A{} ", level - 1).repeat(10);
        wide.push_str(&format!(
            "#define A{level} {below}
"
        ));
    }
    for _ in 0..30 {
        wide.push_str(
            "A4
#undef NOTHING
",
        );
    }
    for source in [doubling, chain, deep, wide] {
        let start = Instant::now();
        let err = glsl(&source).unwrap_err();
        assert!(
            matches!(err, PreprocessError::MacroExpansionTooLarge { .. }),
            "{err:?}"
        );
        assert!(err.location().is_some());
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{:?}",
            start.elapsed()
        );
    }
}

#[test]
fn comment_and_unused_macro_edits_leave_the_text_identical() {
    let base = "#version 450\n#define SQ(x) ((x)*(x)) // square\n#define UNUSED(a) a + 1\nfloat v = SQ(/* arg */ 2.0);\n";
    let edits = [
        "#version 450\n#define SQ(x) ((x)*(x)) // squared value\n#define UNUSED(a) a + 1\nfloat v = SQ(/* argument */ 2.0);\n",
        "#version 450\n/* a new\n   comment */\n#define SQ(x) ((x)*(x))\n#define UNUSED(a) a * 7 - 3\nfloat v = SQ(2.0);\n",
        "#version 450\n#define SQ(x) ((x)*(x))\n#define UNUSED(a, b) b\n\n\nfloat v = SQ(2.0); // the end\n",
    ];
    let expected = text(base);
    for edited in edits {
        assert_eq!(text(edited), expected, "{edited:?}");
    }
    assert_ne!(text(&base.replace("(x)*(x)", "(x)+(x)")), expected);
}

fn project() -> Files {
    Files::new(&[
        (
            "shaders/main.frag",
            "#include \"common.glsl\"\n#include <lib.glsl>\nint m = WHICH + LIB;\n",
        ),
        ("shaders/include/common.glsl", "#define WHICH 1\n"),
        ("third/common.glsl", "#define WHICH 2\n"),
        ("third/lib.glsl", "#define LIB 3\n"),
    ])
}

#[test]
fn include_directories_are_searched_in_order_after_the_including_directory() {
    let files = project();
    let out = run_in(
        &files,
        "shaders/main.frag",
        Dialect::Glsl,
        &["shaders/include", "third"],
        &[],
    )
    .unwrap();
    assert_eq!(out.text, "int m = 1 + 3;\n");
    assert_eq!(
        out.files(),
        [
            "shaders/main.frag",
            "shaders/include/common.glsl",
            "third/lib.glsl"
        ]
        .map(PathBuf::from)
    );
    let out = run_in(
        &files,
        "shaders/main.frag",
        Dialect::Glsl,
        &["third", "shaders/include"],
        &[],
    )
    .unwrap();
    assert_eq!(out.text, "int m = 2 + 3;\n");
    // The including file's directory comes first for "x", never for <x>.
    let mut near = project();
    near.set("shaders/common.glsl", "#define WHICH 4\n");
    near.set("shaders/lib.glsl", "#define LIB 5\n");
    let out = run_in(&near, "shaders/main.frag", Dialect::Glsl, &["third"], &[]).unwrap();
    assert_eq!(out.text, "int m = 4 + 3;\n");
    // Without include directories <x> finds nothing.
    let err = run_in(&files, "shaders/main.frag", Dialect::Glsl, &[], &[]).unwrap_err();
    assert!(
        matches!(err, PreprocessError::IncludeNotFound { .. }),
        "{err}"
    );
    assert_eq!(place(&err).1, 1);
}

#[test]
fn include_directories_and_paths_stay_inside_the_root() {
    let files = project();
    for dir in ["../outside", "/etc", "shaders/../../x"] {
        let err = run_in(&files, "shaders/main.frag", Dialect::Glsl, &[dir], &[]).unwrap_err();
        assert!(
            matches!(err, PreprocessError::InvalidIncludeDir { .. }),
            "{dir}: {err}"
        );
    }
    let escaping = Files::new(&[("s.frag", "#include <../../etc/passwd>\n")]);
    let err = run_in(&escaping, "s.frag", Dialect::Glsl, &["inc"], &[]).unwrap_err();
    assert!(
        matches!(
            err,
            PreprocessError::IncludePathRefused {
                problem: PathProblem::EscapesRoot,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn the_closure_lists_every_place_an_include_could_appear_first() {
    let files = project();
    let dirs = [PathBuf::from("shaders/include"), PathBuf::from("third")];
    let closure =
        include_closure(Path::new("shaders/main.frag"), Dialect::Glsl, &dirs, &files).unwrap();
    assert_eq!(
        closure.files,
        [
            "shaders/main.frag",
            "shaders/include/common.glsl",
            "third/lib.glsl"
        ]
        .map(PathBuf::from)
    );
    let missing: Vec<&Path> = closure.missing.iter().map(|m| m.path.as_path()).collect();
    // Creating either would change what is included: both are part of the revision.
    assert_eq!(
        missing,
        [
            Path::new("shaders/common.glsl"),
            Path::new("shaders/include/lib.glsl")
        ]
    );
}

#[test]
fn hlsl_groups_braces_and_pastes_expanded_arguments() {
    let files = Files::new(&[(
        "m.hlsl",
        "#define SLOT 3\n#define CAT(a, b) a##b\n#define REG(k, n) register(CAT(k, n))\n#define INIT(x) x\nTexture2D t : REG(t, SLOT);\nstatic const float2 o[2] = INIT({ float2(0, 0), float2(1, 1) });\n",
    )]);
    let out = run_in(&files, "m.hlsl", Dialect::Hlsl, &[], &[]).unwrap();
    assert_eq!(
        out.text,
        "Texture2D t : register(t3);\nstatic const float2 o[2] = { float2(0, 0), float2(1, 1) };\n"
    );
    // GLSL does neither: a comma inside braces separates arguments.
    let glsl = Files::new(&[(
        "m.frag",
        "#define INIT(x) x\nfloat o[2] = INIT({ 0, 1 });\n",
    )]);
    let err = run_in(&glsl, "m.frag", Dialect::Glsl, &[], &[]).unwrap_err();
    assert!(
        matches!(err, PreprocessError::MacroArgumentCount { found: 2, .. }),
        "{err}"
    );
}

#[test]
fn defines_from_the_build_are_lexed_like_glslang_dash_d() {
    let files = Files::new(&[(
        "s.frag",
        "#if LIGHTS > 2 && defined(FOG)\nint n = LIGHTS;\n#endif\n",
    )]);
    let out = run_in(
        &files,
        "s.frag",
        Dialect::Glsl,
        &[],
        &[("LIGHTS", "1 + 3"), ("FOG", "")],
    )
    .unwrap();
    assert_eq!(out.text, "int n = 1 + 3;\n");
}
