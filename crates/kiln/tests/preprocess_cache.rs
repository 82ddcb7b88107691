//! `Preprocessor`: lexed files reused across variants, never stale, shareable across threads.

mod preprocess_support;

use std::path::Path;
use std::sync::Barrier;

use kiln::preprocess::{
    CacheStats, Dialect, PreprocessBudget, PreprocessRequest, Preprocessor, SourceLanguage,
};
use preprocess_support::{wgsl, Files};

fn request<'a>(keywords: &'a [&'a str]) -> PreprocessRequest<'a> {
    PreprocessRequest {
        entry: Path::new("s.wgsl"),
        language: SourceLanguage::Wgsl.into(),
        include_dirs: &[],
        keywords,
        defines: &[],
        budget: PreprocessBudget::default(),
    }
}

const KEYWORD_SETS: [&[&str]; 4] = [&[], &["FOG"], &["SKIN"], &["FOG", "SKIN"]];

fn project() -> Files {
    Files::new(&[
        ("s.wgsl", "#include \"common.wgsl\"\n#ifdef FOG\nconst F = 1;\n#endif\n#ifdef SKIN\nconst S = 1;\n#endif\n"),
        ("common.wgsl", "// shared\nconst PI = 3.14;\n"),
    ])
}

#[test]
fn lexes_each_file_once_across_variants_and_never_serves_stale_text() {
    let mut files = project();
    let preprocessor = Preprocessor::new();
    for keywords in KEYWORD_SETS {
        let cached = preprocessor.preprocess(&request(keywords), &files).unwrap();
        assert_eq!(
            cached,
            wgsl(&files, "s.wgsl", keywords).unwrap(),
            "{keywords:?}"
        );
    }
    assert_eq!(preprocessor.stats(), CacheStats { hits: 6, misses: 2 });
    assert_eq!(preprocessor.cached_files(), 2);

    // The include's text changes: it is lexed again, the entry is not.
    files.set("common.wgsl", "const PI = 3.1416;\n");
    let out = preprocessor.preprocess(&request(&["FOG"]), &files).unwrap();
    assert_eq!(out.text, "const PI = 3.1416;\nconst F = 1;\n");
    assert_eq!(preprocessor.stats(), CacheStats { hits: 7, misses: 3 });

    // The same text in a new allocation is still a hit.
    files.set("common.wgsl", "const PI = 3.1416;\n");
    preprocessor.preprocess(&request(&[]), &files).unwrap();
    assert_eq!(preprocessor.stats(), CacheStats { hits: 9, misses: 3 });

    // The include closure shares the cache.
    let closure = preprocessor
        .include_closure(Path::new("s.wgsl"), Dialect::Wgsl, &[], &files)
        .unwrap();
    assert_eq!(closure.files.len(), 2);
    assert_eq!(
        preprocessor.stats(),
        CacheStats {
            hits: 11,
            misses: 3
        }
    );

    preprocessor.clear();
    assert_eq!(preprocessor.cached_files(), 0);
    preprocessor.preprocess(&request(&[]), &files).unwrap();
    assert_eq!(preprocessor.stats().misses, 5);
}

#[test]
fn errors_are_not_cached_as_files() {
    let mut files = Files::new(&[("s.wgsl", "/* open\n")]);
    let preprocessor = Preprocessor::new();
    assert!(preprocessor.preprocess(&request(&[]), &files).is_err());
    assert_eq!(preprocessor.cached_files(), 0);
    files.set("s.wgsl", "/* closed */ x\n");
    assert_eq!(
        preprocessor.preprocess(&request(&[]), &files).unwrap().text,
        "  x\n"
    );
}

#[test]
fn one_preprocessor_serves_many_threads() {
    let files = project();
    let preprocessor = Preprocessor::new();
    let threads = 8;
    let start = Barrier::new(threads);
    let results: Vec<Vec<String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    start.wait();
                    KEYWORD_SETS
                        .iter()
                        .map(|keywords| {
                            preprocessor
                                .preprocess(&request(keywords), &files)
                                .unwrap()
                                .text
                        })
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let expected: Vec<String> = KEYWORD_SETS
        .iter()
        .map(|k| wgsl(&files, "s.wgsl", k).unwrap().text)
        .collect();
    assert!(results.iter().all(|r| *r == expected));
    let stats = preprocessor.stats();
    // Two files, each lexed at least once; racing threads may lex one twice, never more often
    // than there are threads.
    assert_eq!(
        stats.hits + stats.misses,
        (threads * KEYWORD_SETS.len() * 2) as u64
    );
    assert!(
        (2..=2 * threads as u64).contains(&stats.misses),
        "{stats:?}"
    );
    assert_eq!(preprocessor.cached_files(), 2);
}
