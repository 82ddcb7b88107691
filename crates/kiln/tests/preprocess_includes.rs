//! Includes: resolution, confinement, errors with locations, guards, cycles, the line map
//! through includes, and the include closure.

mod preprocess_support;

use std::path::{Path, PathBuf};

use kiln::preprocess::{include_closure, Dialect, PathProblem, PreprocessBudget, PreprocessError};
use preprocess_support::{origins, place, wgsl, Files};

fn paths(list: &[PathBuf]) -> Vec<&str> {
    list.iter().map(|p| p.to_str().unwrap()).collect()
}

#[test]
fn nested_includes_resolve_relative_to_the_including_file() {
    let files = Files::new(&[
        (
            "shaders/lit.wgsl",
            "#include \"lib/light.wgsl\"\nfn main() {}\n",
        ),
        (
            "shaders/lib/light.wgsl",
            "#include \"../common/math.wgsl\"\n#include \"./shadow.wgsl\"\nfn light() {}\n",
        ),
        ("shaders/common/math.wgsl", "const PI = 3.14;\n"),
        ("shaders/lib/shadow.wgsl", "fn shadow() {}\n"),
    ]);
    let out = wgsl(&files, "shaders/lit.wgsl", &[]).unwrap();
    assert_eq!(
        out.text,
        "const PI = 3.14;\nfn shadow() {}\nfn light() {}\nfn main() {}\n"
    );
    assert_eq!(
        files.loads(),
        [
            "shaders/lit.wgsl",
            "shaders/lib/light.wgsl",
            "shaders/common/math.wgsl",
            "shaders/lib/shadow.wgsl"
        ]
    );
    assert_eq!(paths(out.files()), files.loads());
}

#[test]
fn line_map_points_into_includes() {
    let files = Files::new(&[
        (
            "a.wgsl",
            "// header\n\nconst A = 1;\n#include \"inc/b.wgsl\"\n\nconst C = 3;\n",
        ),
        (
            "inc/b.wgsl",
            "/* block\n   comment */\nconst B = 2;\n\n  const B2 = 2;\n",
        ),
    ]);
    let out = wgsl(&files, "a.wgsl", &[]).unwrap();
    assert_eq!(
        origins(&out),
        [
            ("const A = 1;".to_owned(), "a.wgsl".to_owned(), 3),
            ("const B = 2;".to_owned(), "inc/b.wgsl".to_owned(), 3),
            ("  const B2 = 2;".to_owned(), "inc/b.wgsl".to_owned(), 5),
            ("const C = 3;".to_owned(), "a.wgsl".to_owned(), 6),
        ]
    );
    assert_eq!(out.origin(5), None);
    assert_eq!(out.origin(0), None);
    // A byte offset (as naga reports spans) maps too: `B2` on output line 3.
    let offset = out.text.find("B2").unwrap();
    let (origin, column) = out.origin_of_offset(offset).unwrap();
    assert_eq!(
        (origin.file, origin.line, column),
        (Path::new("inc/b.wgsl"), 5, 8)
    );
}

#[test]
fn include_escaping_the_root_is_an_error_naming_file_line_and_path() {
    let files = Files::new(&[(
        "shaders/a.wgsl",
        "const A = 1;\n  #include \"../../etc/passwd\"\n",
    )]);
    let err = wgsl(&files, "shaders/a.wgsl", &[]).unwrap_err();
    assert!(
        matches!(&err, PreprocessError::IncludePathRefused { spec, problem: PathProblem::EscapesRoot, .. } if spec == "../../etc/passwd"),
        "{err:?}"
    );
    assert_eq!(place(&err), ("shaders/a.wgsl".to_owned(), 2, 11..29));
    let message = err.to_string();
    assert!(
        message.contains("shaders/a.wgsl:2") && message.contains("../../etc/passwd"),
        "{message}"
    );
    // Nothing outside the root was even asked for.
    assert_eq!(files.loads(), ["shaders/a.wgsl"]);
}

#[test]
fn absolute_and_backslash_includes_are_refused() {
    for (spec, problem) in [
        ("/etc/passwd", PathProblem::Absolute),
        ("C:/x.wgsl", PathProblem::Absolute),
        ("..\\x.wgsl", PathProblem::Backslash),
    ] {
        let files = Files::new(&[("a.wgsl", &format!("#include \"{spec}\"\n"))]);
        let err = wgsl(&files, "a.wgsl", &[]).unwrap_err();
        assert!(
            matches!(err, PreprocessError::IncludePathRefused { problem: p, .. } if p == problem),
            "{spec}: {err:?}"
        );
    }
}

#[test]
fn missing_include_is_an_error_with_its_location() {
    let files = Files::new(&[("s/a.wgsl", "const A = 1;\n\n#include \"nope.wgsl\"\n")]);
    let err = wgsl(&files, "s/a.wgsl", &[]).unwrap_err();
    assert!(
        matches!(&err, PreprocessError::IncludeNotFound { path, .. } if path == Path::new("s/nope.wgsl")),
        "{err:?}"
    );
    assert_eq!(place(&err), ("s/a.wgsl".to_owned(), 3, 9..20));
}

#[test]
fn missing_or_invalid_entry_is_an_error() {
    let files = Files::new(&[]);
    let err = wgsl(&files, "a.wgsl", &[]).unwrap_err();
    assert!(
        matches!(&err, PreprocessError::EntryUnreadable { file, .. } if file == Path::new("a.wgsl")),
        "{err:?}"
    );
    assert_eq!(err.location(), None);
    let err = wgsl(&files, "../a.wgsl", &[]).unwrap_err();
    assert!(
        matches!(
            err,
            PreprocessError::InvalidEntryPath {
                problem: PathProblem::EscapesRoot,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(files.loads(), ["a.wgsl"]);
}

#[test]
fn unguarded_include_cycle_is_an_error_naming_the_cycle() {
    let files = Files::new(&[
        ("a.wgsl", "#include \"b.wgsl\"\n"),
        ("b.wgsl", "const B = 1;\n#include \"a.wgsl\"\n"),
    ]);
    let err = wgsl(&files, "a.wgsl", &[]).unwrap_err();
    let PreprocessError::IncludeCycle { cycle, .. } = &err else {
        panic!("expected a cycle, got {err:?}");
    };
    assert_eq!(paths(cycle), ["a.wgsl", "b.wgsl", "a.wgsl"]);
    assert_eq!(place(&err), ("b.wgsl".to_owned(), 2, 9..17));
    // Each file was read once, however deep the recursion went.
    assert_eq!(files.loads(), ["a.wgsl", "b.wgsl"]);

    let files = Files::new(&[("self.wgsl", "#include \"self.wgsl\"\n")]);
    let err = wgsl(&files, "self.wgsl", &[]).unwrap_err();
    assert!(
        matches!(&err, PreprocessError::IncludeCycle { cycle, .. } if paths(cycle) == ["self.wgsl", "self.wgsl"]),
        "{err:?}"
    );
}

#[test]
fn includes_deeper_than_the_limit_are_an_error() {
    let mut files = Files::default();
    for i in 0..100 {
        files.set(
            &format!("f{i}.wgsl"),
            &format!("#include \"f{}.wgsl\"\n", i + 1),
        );
    }
    files.set("f100.wgsl", "const END = 1;\n");
    let err = wgsl(&files, "f0.wgsl", &[]).unwrap_err();
    assert!(
        matches!(err, PreprocessError::IncludeTooDeep { limit: 64, .. }),
        "{err:?}"
    );
    assert_eq!(place(&err).0, "f63.wgsl");
}

#[test]
fn include_guards_and_pragma_once_include_a_file_once() {
    let files = Files::new(&[
        (
            "main.wgsl",
            "#include \"guarded.wgsl\"\n#include \"once.wgsl\"\n#include \"guarded.wgsl\"\n#include \"once.wgsl\"\nfn main() {}\n",
        ),
        ("guarded.wgsl", "#ifndef GUARDED_WGSL\n#define GUARDED_WGSL\n#include \"once.wgsl\"\nconst G = 1;\n#endif\n"),
        ("once.wgsl", "#pragma once\n#include \"guarded.wgsl\"\nconst O = 1;\n"),
    ]);
    let out = wgsl(&files, "main.wgsl", &[]).unwrap();
    // once.wgsl is first included from guarded.wgsl (whose guard is already defined when
    // once.wgsl includes it back), so its text comes first.
    assert_eq!(out.text, "const O = 1;\nconst G = 1;\nfn main() {}\n");
    assert_eq!(files.loads(), ["main.wgsl", "guarded.wgsl", "once.wgsl"]);
}

#[test]
fn includes_under_false_conditions_are_not_read() {
    let files = Files::new(&[
        (
            "m.wgsl",
            "#ifdef FOG\n#include \"fog.wgsl\"\n#else\n#include \"clear.wgsl\"\n#endif\n",
        ),
        ("fog.wgsl", "const FOGGY = 1;\n"),
        ("clear.wgsl", "const CLEAR = 1;\n"),
    ]);
    let out = wgsl(&files, "m.wgsl", &[]).unwrap();
    assert_eq!(out.text, "const CLEAR = 1;\n");
    assert_eq!(paths(out.files()), ["m.wgsl", "clear.wgsl"]);
    files.clear_loads();
    let out = wgsl(&files, "m.wgsl", &["FOG"]).unwrap();
    assert_eq!(out.text, "const FOGGY = 1;\n");
    assert_eq!(files.loads(), ["m.wgsl", "fog.wgsl"]);
}

#[test]
fn include_closure_is_a_superset_over_all_conditions_in_a_stable_order() {
    let files = Files::new(&[
        (
            "s/main.wgsl",
            "#include \"b.wgsl\"\n#ifdef FOG\n#include \"fog.wgsl\"\n#endif\n#if 0\n#include \"lib/dead.wgsl\"\n#endif\n\
             // #include \"commented.wgsl\"\n/*\n#include \"blocked.wgsl\"\n*/\n#include \"b.wgsl\"\n",
        ),
        ("s/b.wgsl", "#include \"lib/c.wgsl\"\n#include \"main.wgsl\"\n"),
        ("s/lib/c.wgsl", "#ifdef NEVER\n#include \"../missing.wgsl\"\n#endif\n"),
        ("s/fog.wgsl", "const F = 1;\n"),
        ("s/lib/dead.wgsl", "#include \"c.wgsl\"\n"),
        ("s/commented.wgsl", ""),
        ("s/blocked.wgsl", ""),
    ]);
    let closure = include_closure(Path::new("s/main.wgsl"), Dialect::Wgsl, &[], &files).unwrap();
    assert_eq!(
        paths(&closure.files),
        [
            "s/main.wgsl",
            "s/b.wgsl",
            "s/lib/c.wgsl",
            "s/fog.wgsl",
            "s/lib/dead.wgsl"
        ]
    );
    assert_eq!(closure.missing.len(), 1);
    assert_eq!(closure.missing[0].path, Path::new("s/missing.wgsl"));
    assert_eq!(
        (
            closure.missing[0].at.file.to_str(),
            closure.missing[0].at.line
        ),
        (Some("s/lib/c.wgsl"), 2)
    );
    // Every file was read once; commented-out includes were never followed.
    let mut loads = files.loads();
    assert_eq!(loads.len(), 6);
    loads.sort();
    loads.dedup();
    assert_eq!(loads.len(), 6);
    assert!(!loads
        .iter()
        .any(|p| p.contains("commented") || p.contains("blocked")));
    // The same contents give the same closure.
    assert_eq!(
        include_closure(Path::new("s/main.wgsl"), Dialect::Wgsl, &[], &files).unwrap(),
        closure
    );
    // main -> b -> main is an unguarded cycle: an error for every variant, while the
    // closure (a graph walk) terminates without complaint.
    for keywords in [&[][..], &["FOG"][..]] {
        let out = wgsl(&files, "s/main.wgsl", keywords);
        assert!(
            matches!(out, Err(PreprocessError::IncludeCycle { .. })),
            "{out:?}"
        );
    }
}

#[test]
fn every_variant_reads_a_subset_of_the_closure() {
    let files = Files::new(&[
        ("m.wgsl", "#pragma once\n#include \"a.wgsl\"\n#ifdef FOG\n#include \"fog.wgsl\"\n#elif defined(SKIN)\n#include \"skin.wgsl\"\n#endif\n"),
        ("a.wgsl", "#include \"m.wgsl\"\nconst A = 1;\n"),
        ("fog.wgsl", "const F = 1;\n"),
        ("skin.wgsl", "#include \"a.wgsl\"\nconst S = 1;\n"),
    ]);
    let closure = include_closure(Path::new("m.wgsl"), Dialect::Wgsl, &[], &files).unwrap();
    assert_eq!(
        paths(&closure.files),
        ["m.wgsl", "a.wgsl", "fog.wgsl", "skin.wgsl"]
    );
    for keywords in [&[][..], &["FOG"], &["SKIN"], &["FOG", "SKIN"]] {
        let out = wgsl(&files, "m.wgsl", keywords).unwrap();
        assert!(
            out.files().iter().all(|f| closure.files.contains(f)),
            "{keywords:?}"
        );
    }
}

#[test]
fn include_closure_refuses_escapes_even_under_false_conditions() {
    let files = Files::new(&[("s/a.wgsl", "#if 0\n#include \"../../x.wgsl\"\n#endif\n")]);
    let err = include_closure(Path::new("s/a.wgsl"), Dialect::Wgsl, &[], &files).unwrap_err();
    assert!(
        matches!(
            err,
            PreprocessError::IncludePathRefused {
                problem: PathProblem::EscapesRoot,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(place(&err), ("s/a.wgsl".to_owned(), 2, 9..23));
    // The variant itself never reaches it.
    assert!(wgsl(&files, "s/a.wgsl", &[]).is_ok());
}

#[test]
fn disk_loader_reads_under_its_root_only() {
    use kiln::preprocess::{
        preprocess, DiskLoader, PreprocessRequest, SourceLanguage, SourceLoader,
    };

    let outer = tempfile::tempdir().unwrap();
    std::fs::write(outer.path().join("secret.wgsl"), "const SECRET = 1;\n").unwrap();
    let root = outer.path().join("project");
    std::fs::create_dir_all(root.join("shaders/inc")).unwrap();
    std::fs::write(
        root.join("shaders/main.wgsl"),
        "#include \"inc/a.wgsl\"\nfn main() {}\n",
    )
    .unwrap();
    std::fs::write(root.join("shaders/inc/a.wgsl"), "const A = 1; // a\n").unwrap();
    std::fs::write(
        root.join("shaders/escape.wgsl"),
        "#include \"../../secret.wgsl\"\n",
    )
    .unwrap();
    let loader = DiskLoader::new(&root);
    let request = |entry: &'static str| PreprocessRequest {
        entry: Path::new(entry),
        language: SourceLanguage::Wgsl.into(),
        include_dirs: &[],
        keywords: &[],
        defines: &[],
        budget: PreprocessBudget::default(),
    };
    let out = preprocess(&request("shaders/main.wgsl"), &loader).unwrap();
    assert_eq!(out.text, "const A = 1;\nfn main() {}\n");
    assert_eq!(
        paths(out.files()),
        ["shaders/main.wgsl", "shaders/inc/a.wgsl"]
    );
    let err = preprocess(&request("shaders/escape.wgsl"), &loader).unwrap_err();
    assert!(
        matches!(err, PreprocessError::IncludePathRefused { .. }),
        "{err:?}"
    );
    // Called directly, the loader refuses paths that leave the root, too.
    let err = loader.load(Path::new("../secret.wgsl")).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert_eq!(
        loader
            .load(Path::new("shaders/missing.wgsl"))
            .unwrap_err()
            .kind(),
        std::io::ErrorKind::NotFound
    );
}

#[test]
fn wgsl_includes_search_the_include_directories_after_the_including_directory() {
    use kiln::preprocess::{preprocess, PreprocessRequest};

    let files = Files::new(&[
        ("s/main.wgsl", "#include \"c.wgsl\"\nconst M = C;\n"),
        ("lib/c.wgsl", "const C = 1;\n"),
        ("other/c.wgsl", "const C = 2;\n"),
    ]);
    let run = |dirs: &[&str]| {
        let dirs: Vec<PathBuf> = dirs.iter().map(PathBuf::from).collect();
        preprocess(
            &PreprocessRequest {
                entry: Path::new("s/main.wgsl"),
                language: Dialect::Wgsl,
                include_dirs: &dirs,
                keywords: &[],
                defines: &[],
                budget: PreprocessBudget::default(),
            },
            &files,
        )
    };
    assert_eq!(
        run(&["lib", "other"]).unwrap().text,
        "const C = 1;\nconst M = C;\n"
    );
    assert_eq!(
        run(&["other", "lib"]).unwrap().text,
        "const C = 2;\nconst M = C;\n"
    );
    let err = run(&[]).unwrap_err();
    assert!(
        matches!(err, PreprocessError::IncludeNotFound { .. }),
        "{err}"
    );
    // <x> stays a WGSL error.
    let angled = Files::new(&[("s.wgsl", "#include <c.wgsl>\n"), ("lib/c.wgsl", "")]);
    let err = wgsl(&angled, "s.wgsl", &[]).unwrap_err();
    assert!(
        matches!(err, PreprocessError::MalformedDirective { .. }),
        "{err}"
    );
}
