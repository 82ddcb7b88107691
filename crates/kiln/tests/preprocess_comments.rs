//! Comment and blank-line edits leave the preprocessed text byte-identical (how kiln knows a
//! comment edit recompiles nothing), while the line map follows the lines that moved.

mod preprocess_support;

use proptest::prelude::*;
use proptest::sample::{subsequence, Index};

use kiln::preprocess::{Preprocessed, SourceLanguage};
use preprocess_support::{origins, run, wgsl, Files};

#[test]
fn editing_a_single_line_comment_changes_nothing() {
    let before = Files::new(&[(
        "s.wgsl",
        "// v1\nconst A = 1; // old note\n#ifdef FOG // fog\nconst F = 1;\n#endif\n",
    )]);
    let after = Files::new(&[(
        "s.wgsl",
        "// v2, longer header\n// one more line\n\nconst A = 1; // new note, with \"quotes\" and /* */\n#ifdef FOG\n  // added\nconst F = 1;\n#endif // FOG\n",
    )]);
    for keywords in [&[][..], &["FOG"]] {
        let a = wgsl(&before, "s.wgsl", keywords).unwrap();
        let b = wgsl(&after, "s.wgsl", keywords).unwrap();
        assert_eq!(a.text, b.text, "{keywords:?}");
    }
}

#[test]
fn editing_a_block_comment_spanning_lines_changes_nothing() {
    let before = Files::new(&[(
        "s.wgsl",
        "/* Lit shader.\n   Version 1. */\nconst A = 1; /* inline\n  note */\nconst B = 2;\n",
    )]);
    let after = Files::new(&[(
        "s.wgsl",
        "/* Lit shader.\n   Version 2, now with\n   #include \"nothing.wgsl\"\n   #define A 5\n   // nested line comment\n*/\nconst A = 1; /* inline\n\n  longer\n  note */\nconst B = 2;\n",
    )]);
    let a = wgsl(&before, "s.wgsl", &[]).unwrap();
    let b = wgsl(&after, "s.wgsl", &[]).unwrap();
    assert_eq!(a.text, "const A = 1;\nconst B = 2;\n");
    assert_eq!(a.text, b.text);
    // The line map follows the code to its new lines.
    assert_eq!(origins(&b).iter().map(|o| o.2).collect::<Vec<_>>(), [7, 11]);
    assert_eq!(before.loads(), ["s.wgsl"]);
}

#[test]
fn editing_a_comment_in_an_include_changes_nothing_but_the_line_map() {
    let mut files = Files::new(&[
        ("s.wgsl", "#include \"inc/common.wgsl\"\nfn main() {}\n"),
        ("inc/common.wgsl", "// helpers\nconst PI = 3.14;\n"),
    ]);
    let a = wgsl(&files, "s.wgsl", &[]).unwrap();
    files.set(
        "inc/common.wgsl",
        "// helpers, documented\n/*\n * PI, rounded.\n */\n\nconst PI = 3.14;   \n// end\n",
    );
    let b = wgsl(&files, "s.wgsl", &[]).unwrap();
    assert_eq!(a.text, b.text);
    assert_eq!(a.origin(1).map(|o| o.line), Some(2));
    assert_eq!(b.origin(1).map(|o| o.line), Some(6));
    // A code edit in the include does change the text (the check above can fail).
    files.set("inc/common.wgsl", "const PI = 3.1416;\n");
    assert_ne!(wgsl(&files, "s.wgsl", &[]).unwrap().text, a.text);
}

#[test]
fn code_edited_inside_ifdef_changes_only_those_variants() {
    let source = "const A = 1;\n#ifdef FOG\nconst F = 1;\n#endif\n";
    let before = Files::new(&[("s.wgsl", source)]);
    let after = Files::new(&[("s.wgsl", &source.replace("F = 1", "F = 2"))]);
    let changed = |keywords: &[&str]| {
        wgsl(&before, "s.wgsl", keywords).unwrap().text
            != wgsl(&after, "s.wgsl", keywords).unwrap().text
    };
    assert!(!changed(&[]));
    assert!(!changed(&["SKIN"]));
    assert!(changed(&["FOG"]));
    assert!(changed(&["FOG", "SKIN"]));
}

/// Two small projects; `WORD` marks comment text the property test rewrites.
const WGSL_ENTRY: &str = "// note: WORD
#include \"lib/common.wgsl\"
/* WORD
   WORD */
#ifdef FOG
const fog_density = 0.5; // note: WORD
#elif defined(SKIN)
const skinning = 1;
#else
const plain = 1;
#endif
#if defined(FOG) && !defined(SKIN)
fn fog_only() {}
#endif
fn main() {
    let x = 1; /* WORD */
}
";
const WGSL_COMMON: &str = "#pragma once
// common helpers: WORD
const PI = 3.14159;
#ifndef SKIN
fn no_skin() {}
#endif
";
const GLSL_ENTRY: &str = "// WORD
#version 450
#extension GL_GOOGLE_include_directive : enable
#include \"lib/common.glsl\"
#ifdef FOG
layout(location = 0) out vec4 fog; // WORD
#endif
void main() {
    /* WORD */ float x = 1.0;
}
";
const GLSL_COMMON: &str = "#ifndef COMMON_GLSL
#define COMMON_GLSL
/* WORD */
const float PI = 3.14159;
#endif
";

const SNIPPETS: &[&str] = &[
    "",
    "   ",
    "\t",
    "// inserted",
    "/* inserted */",
    "/* multi\nline\n*/",
    "  /**/  ",
    "//",
    "/*\n#include \"nowhere.wgsl\"\n*/",
    "// #define FOG 0",
    "/* a */ /* b */ // c",
];

/// `base` with each `WORD` replaced by the next of `words` and each snippet inserted before
/// the given line (boundaries inside a block comment are skipped: comments do not nest).
fn mutate(base: &str, words: &[String], inserts: &[(Index, usize)]) -> String {
    let mut next_word = words.iter().cycle();
    let mut text = String::new();
    for (i, piece) in base.split("WORD").enumerate() {
        if i > 0 {
            text.push_str(next_word.next().map_or("", String::as_str));
        }
        text.push_str(piece);
    }
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let mut open = 0i32;
    let mut boundaries = vec![0];
    for (i, line) in lines.iter().enumerate() {
        open += line.matches("/*").count() as i32 - line.matches("*/").count() as i32;
        if open == 0 {
            boundaries.push(i + 1);
        }
    }
    let mut chosen: Vec<(usize, &str)> = inserts
        .iter()
        .map(|(index, snippet)| {
            (
                boundaries[index.index(boundaries.len())],
                SNIPPETS[*snippet],
            )
        })
        .collect();
    chosen.sort_by_key(|&(at, _)| std::cmp::Reverse(at));
    for (at, snippet) in chosen {
        lines.insert(at, snippet.to_owned());
    }
    lines.join("\n") + "\n"
}

fn project(glsl: bool, entry: &str, common: &str) -> (Files, &'static str, SourceLanguage) {
    if glsl {
        (
            Files::new(&[("s.frag", entry), ("lib/common.glsl", common)]),
            "s.frag",
            SourceLanguage::Glsl,
        )
    } else {
        (
            Files::new(&[("s.wgsl", entry), ("lib/common.wgsl", common)]),
            "s.wgsl",
            SourceLanguage::Wgsl,
        )
    }
}

/// Every output line comes from a source line that holds its code (these sources use no
/// macros in code, so substitution never changes a line).
fn assert_line_map_points_at_source(out: &Preprocessed, files: &Files) {
    for (text, file, line) in origins(out) {
        let source = files.text(&file);
        let source_line = source.lines().nth(line as usize - 1).unwrap_or_default();
        assert!(
            source_line.contains(text.trim()),
            "{file}:{line}: {source_line:?} vs {text:?}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn inserting_comments_and_blank_lines_never_changes_the_text(
        glsl in any::<bool>(),
        keywords in subsequence(vec!["FOG", "SKIN"], 0..=2),
        entry_inserts in prop::collection::vec((any::<Index>(), 0..SNIPPETS.len()), 0..8),
        common_inserts in prop::collection::vec((any::<Index>(), 0..SNIPPETS.len()), 0..8),
        words in prop::collection::vec("[a-z #\"/]{0,12}", 1..6),
    ) {
        let (entry_base, common_base) = if glsl { (GLSL_ENTRY, GLSL_COMMON) } else { (WGSL_ENTRY, WGSL_COMMON) };
        let original = ["original".to_owned()];
        let (files, entry, language) = project(glsl, &mutate(entry_base, &original, &[]), &mutate(common_base, &original, &[]));
        let expected = run(&files, entry, language, &keywords, &[]).unwrap();

        let (edited, _, _) = project(
            glsl,
            &mutate(entry_base, &words, &entry_inserts),
            &mutate(common_base, &words, &common_inserts),
        );
        let actual = run(&edited, entry, language, &keywords, &[]).unwrap();
        prop_assert_eq!(&actual.text, &expected.text);
        prop_assert_eq!(actual.files(), expected.files());
        if glsl {
            prop_assert!(actual.text.starts_with("#version 450\n"));
        }
        assert_line_map_points_at_source(&actual, &edited);
    }
}
