//! Directives: keywords and conditionals, `#if` expressions, macro substitution, GLSL
//! pass-through, and every directive error with its location.

mod preprocess_support;

use kiln::preprocess::{PreprocessError, SourceLanguage};
use preprocess_support::{glsl, origins, place, run, wgsl, Files};

fn one(source: &str) -> Files {
    Files::new(&[("s.wgsl", source)])
}

#[test]
fn keywords_select_ifdef_ifndef_elif_else_branches() {
    let files = one(
        "#ifdef FOG\nfog\n#endif\n\
         #ifndef SKIN\nno_skin\n#else\nskin\n#endif\n\
         #if defined(FOG) && defined(SKIN)\nboth\n#elif defined FOG\nonly_fog\n#elif defined(SKIN)\nonly_skin\n#else\nneither\n#endif\n",
    );
    let cases: [(&[&str], &str); 4] = [
        (&[], "no_skin\nneither\n"),
        (&["FOG"], "fog\nno_skin\nonly_fog\n"),
        (&["SKIN"], "skin\nonly_skin\n"),
        (&["SKIN", "FOG"], "fog\nskin\nboth\n"),
    ];
    for (keywords, expected) in cases {
        let out = wgsl(&files, "s.wgsl", keywords).unwrap();
        assert_eq!(out.text, expected, "keywords {keywords:?}");
    }
}

#[test]
fn nested_conditionals_inside_false_groups_stay_false() {
    let files = one("#ifdef A\n#ifdef B\nab\n#else\na_not_b\n#endif\n#else\n#ifdef B\nb_not_a\n#endif\n#endif\n");
    assert_eq!(wgsl(&files, "s.wgsl", &["B"]).unwrap().text, "b_not_a\n");
    assert_eq!(wgsl(&files, "s.wgsl", &["A"]).unwrap().text, "a_not_b\n");
    assert_eq!(wgsl(&files, "s.wgsl", &[]).unwrap().text, "");
}

#[test]
fn if_expressions_use_macro_values_defined_and_operators() {
    let files = one("#define TWO 2\n\
         #if LIGHTS == 4 && TWO * 2 == LIGHTS\nfour\n#endif\n\
         #if (LIGHTS > 1) && !(LIGHTS >= 8) || UNDEFINED_NAME\nsome\n#endif\n\
         #if LIGHTS - 4 != 0\nnot_four\n#endif\n\
         #if defined(FOG) || LIGHTS <= 1\nfog_or_one\n#endif\n\
         #if 0\nzero\n#elif 0x10 == 16 && 010 == 8\nliterals\n#endif\n");
    let out = run(
        &files,
        "s.wgsl",
        SourceLanguage::Wgsl,
        &[],
        &[("LIGHTS", "4")],
    )
    .unwrap();
    assert_eq!(out.text, "four\nsome\nliterals\n");
    let out = run(
        &files,
        "s.wgsl",
        SourceLanguage::Wgsl,
        &["FOG"],
        &[("LIGHTS", "1")],
    )
    .unwrap();
    assert_eq!(out.text, "not_four\nfog_or_one\nliterals\n");
}

#[test]
fn defines_substitute_whole_identifiers_outside_comments() {
    let files = one("#define FOG_DENSITY 0.5\n\
         // #define HIDDEN 1\n\
         /* #define ALSO_HIDDEN 1 */\n\
         let a = FOG; let b = FOGGY; let c = FOG_DENSITY; let d = MY_FOG; let e = FOG2;\n\
         let f = FOG+FOG; // FOG in a comment\n\
         #ifdef HIDDEN\nhidden\n#endif\n#ifdef ALSO_HIDDEN\nalso_hidden\n#endif\n");
    let out = wgsl(&files, "s.wgsl", &["FOG"]).unwrap();
    assert_eq!(
        out.text,
        "let a = 1; let b = FOGGY; let c = 0.5; let d = MY_FOG; let e = FOG2;\nlet f = 1+1;\n"
    );
}

#[test]
fn macros_rescan_undef_and_may_expand_to_nothing() {
    let files = one(
        "#define COUNT LIGHTS\n#define LIGHTS 4\nvar<private> l: array<f32, COUNT>;\n\
         #undef LIGHTS\nlet n = COUNT;\n#define EMPTY\nEMPTY\nx EMPTY\n#undef NEVER_DEFINED\n",
    );
    let out = wgsl(&files, "s.wgsl", &[]).unwrap();
    // The line holding only `EMPTY` vanishes like a blank line; `x EMPTY` loses its tail.
    assert_eq!(
        out.text,
        "var<private> l: array<f32, 4>;\nlet n = LIGHTS;\nx\n"
    );
    assert_eq!(
        origins(&out).iter().map(|o| o.2).collect::<Vec<_>>(),
        [3, 5, 8]
    );
}

#[test]
fn redefinition_with_another_value_is_an_error() {
    let files = one("#define A 1\n#define A  1\n#define A 2\n");
    let err = wgsl(&files, "s.wgsl", &[]).unwrap_err();
    let PreprocessError::MacroRedefined { name, previous, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(
        (name.as_str(), previous.as_ref().map(|p| p.line)),
        ("A", Some(1))
    );
    assert_eq!(place(&err), ("s.wgsl".to_owned(), 3, 8..9));
    // A keyword is predefined as 1: the same value is fine, another is not.
    let files = one("#define FOG 1\n#define FOG 0\n");
    let err = wgsl(&files, "s.wgsl", &["FOG"]).unwrap_err();
    assert!(
        matches!(err, PreprocessError::MacroRedefined { previous: None, .. }),
        "{err:?}"
    );
}

#[test]
fn invalid_keywords_and_defines_are_errors() {
    let files = one("x\n");
    for (keywords, defines) in [
        (&["1FOG"][..], &[][..]),
        (&["FOG-X"][..], &[][..]),
        (&["defined"][..], &[][..]),
        (&["FOG"][..], &[("FOG", "2")][..]),
    ] {
        let err = run(&files, "s.wgsl", SourceLanguage::Wgsl, keywords, defines).unwrap_err();
        assert!(
            matches!(err, PreprocessError::InvalidPredefine { .. }),
            "{keywords:?} {defines:?}: {err:?}"
        );
        assert_eq!(err.location(), None);
    }
    // Duplicate keywords are harmless.
    assert_eq!(wgsl(&files, "s.wgsl", &["FOG", "FOG"]).unwrap().text, "x\n");
}

#[test]
fn function_like_macros_are_refused_with_location() {
    let err = wgsl(&one("x\n#define SQR(a) ((a)*(a))\n"), "s.wgsl", &[]).unwrap_err();
    assert!(
        matches!(&err, PreprocessError::FunctionLikeMacro { name, .. } if name == "SQR"),
        "{err:?}"
    );
    assert_eq!(place(&err), ("s.wgsl".to_owned(), 2, 8..11));
    assert!(err.to_string().contains("unsupported"), "{err}");
    // With a space, `(a)` is a value: object-like.
    let out = wgsl(&one("#define P (a)\nP\n"), "s.wgsl", &[]).unwrap();
    assert_eq!(out.text, "(a)\n");
}

#[test]
fn error_directive_reports_its_message_and_location() {
    let files =
        one("#if !defined(FOG) && !defined(CLEAR)\n    #error pick FOG or CLEAR\n#endif\nok\n");
    let err = wgsl(&files, "s.wgsl", &[]).unwrap_err();
    assert!(
        matches!(&err, PreprocessError::ErrorDirective { message, .. } if message == "pick FOG or CLEAR"),
        "{err:?}"
    );
    assert_eq!(place(&err), ("s.wgsl".to_owned(), 2, 4..28));
    assert_eq!(wgsl(&files, "s.wgsl", &["FOG"]).unwrap().text, "ok\n");
}

#[test]
fn unknown_directives_are_errors_except_in_false_groups() {
    let err = wgsl(&one("x\n#frobnicate now\n"), "s.wgsl", &[]).unwrap_err();
    assert!(
        matches!(&err, PreprocessError::UnknownDirective { name, .. } if name == "frobnicate"),
        "{err:?}"
    );
    assert_eq!(place(&err), ("s.wgsl".to_owned(), 2, 0..15));
    let err = wgsl(&one("#line 10\n"), "s.wgsl", &[]).unwrap_err();
    assert!(
        matches!(&err, PreprocessError::UnsupportedDirective { name, .. } if name == "line"),
        "{err:?}"
    );
    // As in C, a skipped group is only scanned for conditionals.
    let out = wgsl(
        &one("#ifdef NOPE\n#frobnicate\n#error no\n#include <bad>\n#endif\n#\nok\n"),
        "s.wgsl",
        &[],
    )
    .unwrap();
    assert_eq!(out.text, "ok\n");
}

#[test]
fn unbalanced_conditionals_are_errors_with_locations() {
    let cases: [(&str, &str, u32); 6] = [
        ("x\n#endif\n", "endif", 2),
        ("#else\n", "else", 1),
        ("#elif 1\n", "elif", 1),
        ("#if 1\n#else\n#else\n#endif\n", "else", 3),
        ("#if 1\n#else\n#elif 1\n#endif\n", "elif", 3),
        ("#ifdef A\n#endif\n\n#ifdef B\n", "ifdef", 4),
    ];
    for (source, directive, line) in cases {
        let err = wgsl(&one(source), "s.wgsl", &[]).unwrap_err();
        match &err {
            PreprocessError::UnbalancedConditional { directive: d, .. }
            | PreprocessError::UnterminatedConditional { directive: d, .. } => {
                assert_eq!(d, directive, "{source:?}")
            }
            other => panic!("{source:?}: {other:?}"),
        }
        assert_eq!(place(&err).1, line, "{source:?}");
    }
    // Conditionals must balance within one file.
    let files = Files::new(&[
        ("a.wgsl", "#ifdef X\n#include \"b.wgsl\"\n"),
        ("b.wgsl", "#endif\n"),
    ]);
    let err = wgsl(&files, "a.wgsl", &["X"]).unwrap_err();
    assert!(
        matches!(err, PreprocessError::UnbalancedConditional { .. }),
        "{err:?}"
    );
    assert_eq!(place(&err).0, "b.wgsl");
}

#[test]
fn malformed_directives_and_expressions_point_at_the_problem() {
    let cases: [(&str, u32, std::ops::Range<u32>); 6] = [
        ("#if 1 +\n#endif\n", 1, 7..7),
        ("#if FOG @ 1\n#endif\n", 1, 8..9),
        ("#ifdef\n#endif\n", 1, 0..6),
        ("#ifdef A B\n#endif\n", 1, 9..10),
        ("/* a comment */ #include nope\n", 1, 25..29),
        ("#endif junk\n", 1, 7..11),
    ];
    for (source, line, columns) in cases {
        let err = wgsl(&one(source), "s.wgsl", &[]).unwrap_err();
        assert_eq!(
            place(&err),
            ("s.wgsl".to_owned(), line, columns),
            "{source:?}: {err}"
        );
    }
    let err = wgsl(&one("#if 1 / 0\n#endif\n"), "s.wgsl", &[]).unwrap_err();
    assert!(
        matches!(&err, PreprocessError::InvalidExpression { message, .. } if message.contains("division by zero")),
        "{err:?}"
    );
}

#[test]
fn glsl_keeps_version_first_and_passes_extension_and_pragma_through() {
    let files = Files::new(&[
        (
            "s.frag",
            "// Copyright notice\n/* license\n   text */\n\n#define LIGHTS 4\n#version 450 core\n\
             #extension GL_EXT_samplerless_texture_functions : enable\n#pragma optimize(on)\n\
             #include \"common.glsl\"\nlayout(location = 0) out vec4 color;\nvoid main() { color = vec4(LIGHTS); }\n",
        ),
        ("common.glsl", "#pragma once\nconst float PI = 3.14;\n"),
    ]);
    let out = glsl(&files, "s.frag", &["FOG"]).unwrap();
    assert_eq!(
        out.text,
        // `#pragma once` passes through too, as glslangValidator -E writes it.
        "#version 450 core\n#extension GL_EXT_samplerless_texture_functions : enable\n#pragma optimize(on)\n\
         #pragma once\nconst float PI = 3.14;\nlayout(location = 0) out vec4 color;\nvoid main() { color = vec4(4); }\n"
    );
    assert_eq!(out.origin(1).map(|o| o.line), Some(6));
}

#[test]
fn glsl_version_after_code_and_wgsl_glsl_directives_are_errors() {
    let err = glsl(
        &Files::new(&[("s.vert", "void f();\n#version 450\n")]),
        "s.vert",
        &[],
    )
    .unwrap_err();
    assert!(
        matches!(err, PreprocessError::VersionNotFirst { .. }),
        "{err:?}"
    );
    assert_eq!(place(&err), ("s.vert".to_owned(), 2, 1..8));
    for source in [
        "#version 450\n",
        "#extension GL_X : enable\n",
        "#pragma optimize(on)\n",
    ] {
        let err = wgsl(&one(source), "s.wgsl", &[]).unwrap_err();
        assert!(
            matches!(err, PreprocessError::UnsupportedDirective { .. }),
            "{source:?}: {err:?}"
        );
    }
}

#[test]
fn hlsl_passes_pragmas_through_and_refuses_glsl_directives() {
    let files = Files::new(&[
        (
            "s.hlsl",
            "#pragma pack_matrix(row_major)\n#include \"common.hlsli\"\n\
             #if defined(_FOG) && __SHADER_TARGET_MAJOR >= 6\nfloat fog;\n#endif\n",
        ),
        ("common.hlsli", "#pragma once\ncbuffer C { float4 x; };\n"),
    ]);
    let sm6 = [("__SHADER_TARGET_MAJOR", "6")];
    let out = run(&files, "s.hlsl", SourceLanguage::Hlsl, &["_FOG"], &sm6).unwrap();
    // `#pragma once` is honoured and, as `glslangValidator -E` does, written through.
    assert_eq!(
        out.text,
        "#pragma pack_matrix(row_major)\n#pragma once\ncbuffer C { float4 x; };\nfloat fog;\n"
    );
    let sm5 = [("__SHADER_TARGET_MAJOR", "5")];
    let out = run(&files, "s.hlsl", SourceLanguage::Hlsl, &["_FOG"], &sm5).unwrap();
    assert!(!out.text.contains("fog"), "{}", out.text);
    for source in ["#version 450\n", "#extension GL_X : enable\n"] {
        let files = Files::new(&[("s.hlsl", source)]);
        let err = run(&files, "s.hlsl", SourceLanguage::Hlsl, &[], &[]).unwrap_err();
        assert!(
            matches!(err, PreprocessError::UnsupportedDirective { .. }),
            "{source:?}: {err:?}"
        );
    }
}

#[test]
fn crlf_and_lf_sources_give_the_same_text() {
    let lf = "#ifdef FOG\r\nfog\r\n#endif\r\n// c\r\nx  \r\n";
    let out_crlf = wgsl(&one(lf), "s.wgsl", &["FOG"]).unwrap();
    let out_lf = wgsl(&one(&lf.replace("\r\n", "\n")), "s.wgsl", &["FOG"]).unwrap();
    assert_eq!(out_crlf.text, "fog\nx\n");
    assert_eq!(out_crlf, out_lf);
}

#[test]
fn preprocessed_text_is_accepted_by_naga_and_its_errors_map_back() {
    let files = Files::new(&[
        (
            "shaders/lit.wgsl",
            "// Lit\n#include \"inc/light.wgsl\"\n\n@fragment\nfn fs_main() -> @location(0) vec4<f32> {\n\
             #ifdef FOG\n    return vec4<f32>(light() * FOG_DENSITY);\n#else\n    return vec4<f32>(light());\n#endif\n}\n",
        ),
        ("shaders/inc/light.wgsl", "#pragma once\n/* lighting */\nconst FOG_DENSITY: f32 = 0.5;\nfn light() -> f32 {\n    return 1.0;\n}\n"),
        ("shaders/bad.wgsl", "#include \"inc/light.wgsl\"\n#include \"inc/broken.wgsl\"\n"),
        ("shaders/inc/broken.wgsl", "// nothing here\n\nfn broken() -> f32 { return undefined_name; }\n"),
        (
            "shaders/lit.frag",
            "// GLSL\n#version 450\n#include \"inc/common.glsl\"\nlayout(location = 0) out vec4 color;\n\
             void main() {\n#ifdef FOG\n    color = vec4(PI * 0.5);\n#else\n    color = vec4(PI);\n#endif\n}\n",
        ),
        ("shaders/inc/common.glsl", "#ifndef COMMON\n#define COMMON\nconst float PI = 3.14159;\n#endif\n"),
    ]);
    for keywords in [&[][..], &["FOG"]] {
        let out = wgsl(&files, "shaders/lit.wgsl", keywords).unwrap();
        naga::front::wgsl::parse_str(&out.text).unwrap_or_else(|e| {
            panic!(
                "{keywords:?}: {}\n{}",
                e.emit_to_string(&out.text),
                out.text
            )
        });
        let out = glsl(&files, "shaders/lit.frag", keywords).unwrap();
        let options = naga::front::glsl::Options::from(naga::ShaderStage::Fragment);
        naga::front::glsl::Frontend::default()
            .parse(&options, &out.text)
            .unwrap_or_else(|e| panic!("{keywords:?}: {e:?}\n{}", out.text));
    }
    // naga's error in the preprocessed text maps back to the include's line.
    let out = wgsl(&files, "shaders/bad.wgsl", &[]).unwrap();
    let err = naga::front::wgsl::parse_str(&out.text).unwrap_err();
    let location = err.location(&out.text).expect("naga locates the error");
    let origin = out.origin(location.line_number).unwrap();
    assert_eq!(
        (origin.file.to_str().unwrap(), origin.line),
        ("shaders/inc/broken.wgsl", 3)
    );
}

const FRAGMENTS: &[&str] = &[
    "#if ",
    "#ifdef ",
    "#ifndef ",
    "#elif ",
    "#else",
    "#endif",
    "#define ",
    "#undef ",
    "#include ",
    "#error ",
    "#pragma once",
    "#version 450",
    "#",
    "defined",
    "(",
    ")",
    "\"",
    "\"inc.wgsl\"",
    "\"../x\"",
    "/*",
    "*/",
    "//",
    "\n",
    "\r\n",
    " ",
    "\t",
    "FOG",
    "SKIN",
    "A",
    "B",
    "1",
    "0x1F",
    "1.5",
    "9999999999999999999999",
    "é",
    "&&",
    "||",
    "!",
    "==",
    "<=",
    "-",
    "/",
    "%",
    "*",
    "fn f() {}",
];

proptest::proptest! {
    /// Whatever the text, preprocessing returns a result (never panics), and a successful
    /// result has a line map entry for every output line.
    #[test]
    fn arbitrary_text_never_panics(
        entry in proptest::collection::vec(0..FRAGMENTS.len(), 0..60),
        include in proptest::collection::vec(0..FRAGMENTS.len(), 0..30),
        glsl_language in proptest::bool::ANY,
    ) {
        let text = |picks: &[usize]| picks.iter().map(|&i| FRAGMENTS[i]).collect::<String>();
        let files = Files::new(&[("s/e.wgsl", &text(&entry)), ("s/inc.wgsl", &text(&include))]);
        let language = if glsl_language { SourceLanguage::Glsl } else { SourceLanguage::Wgsl };
        for keywords in [&[][..], &["FOG"]] {
            match run(&files, "s/e.wgsl", language, keywords, &[("A", "B + 1"), ("B", "A")]) {
                Ok(out) => {
                    proptest::prop_assert_eq!(out.line_map.len(), out.text.lines().count());
                    proptest::prop_assert!(out.text.lines().all(|l| !l.trim().is_empty() && l == l.trim_end()));
                }
                Err(err) => {
                    // Every located error names a file that was involved.
                    if let Some(at) = err.location() {
                        let file = at.file.to_str().unwrap_or_default();
                        proptest::prop_assert!(file == "s/e.wgsl" || file == "s/inc.wgsl", "{err}");
                    }
                }
            }
        }
        let _ = kiln::preprocess::include_closure(
            std::path::Path::new("s/e.wgsl"),
            kiln::preprocess::Dialect::Wgsl,
            &[],
            &files,
        );
    }
}
