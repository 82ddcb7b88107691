//! File views (`FileView`): the part of each file a preprocessing run depends on. The
//! pipeline lets a variant's text depend on its files only through their views, so the one
//! property that matters is soundness: after any edit, if every view of the old run hashes
//! the same over the new texts, the new run's output (text, line map, or error) is the old
//! one. Checked against a from-scratch oracle (preprocessing again) on random files and
//! random edits, for WGSL's preprocessor and the C preprocessor.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kiln::preprocess::{
    FileView, PreprocessBudget, PreprocessRequest, Preprocessed, Preprocessor, SourceLanguage,
    SourceLoader,
};
use proptest::prelude::*;

/// Files in memory; records the views a run reports, and the files it read whole.
#[derive(Default)]
struct Recording {
    files: BTreeMap<PathBuf, Arc<str>>,
    views: RefCell<Vec<(PathBuf, FileView)>>,
    whole: RefCell<Vec<PathBuf>>,
}

impl SourceLoader for Recording {
    fn load(&self, path: &Path) -> Result<Arc<str>, io::Error> {
        self.whole.borrow_mut().push(path.to_path_buf());
        self.load_viewed(path)
    }

    fn load_viewed(&self, path: &Path) -> Result<Arc<str>, io::Error> {
        self.files
            .get(path)
            .cloned()
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }

    fn viewed(&self, path: &Arc<str>, view: &FileView) {
        self.views
            .borrow_mut()
            .push((PathBuf::from(&**path), view.clone()));
    }
}

const KEYWORDS: [&str; 3] = ["A", "B", "C"];

/// One line of a generated file.
fn line(c: bool) -> impl Strategy<Value = String> {
    let code = if c {
        "[a-c]{1,3} = [0-9]; ".prop_map(|s| s.to_string()).boxed()
    } else {
        "[a-c]{1,3} = [0-9];".prop_map(|s| s.to_string()).boxed()
    };
    prop_oneof![
        4 => code,
        1 => Just("#ifdef A".to_string()),
        1 => Just("#ifndef B".to_string()),
        1 => Just("#if defined(C) && !defined(A)".to_string()),
        1 => Just("#elif defined(B)".to_string()),
        1 => Just("#else".to_string()),
        2 => Just("#endif".to_string()),
        1 => Just("#define X a".to_string()),
        1 => Just("#undef X".to_string()),
        1 => Just("X = A;".to_string()),
        1 => Just("// a comment".to_string()),
        1 => Just("/* open".to_string()),
        1 => Just("close */ b = 1;".to_string()),
        1 => Just(String::new()),
        1 => Just("#include \"inc.h\"".to_string()),
    ]
}

/// A file of random lines with its conditionals mostly balanced (an unbalanced one is an
/// error, which is an output too).
fn file(c: bool) -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(line(c), 0..24).prop_map(|mut lines| {
        let opened = lines.iter().filter(|l| l.starts_with("#if")).count();
        let closed = lines.iter().filter(|l| *l == "#endif").count();
        for _ in closed..opened {
            lines.push("#endif".to_string());
        }
        lines
    })
}

#[derive(Clone, Debug)]
enum Edit {
    Replace(usize, String),
    Insert(usize, String),
    Remove(usize),
}

fn edit(c: bool) -> impl Strategy<Value = (bool, Edit)> {
    (
        any::<bool>(),
        prop_oneof![
            3 => (any::<usize>(), line(c)).prop_map(|(at, l)| Edit::Replace(at, l)),
            1 => (any::<usize>(), line(c)).prop_map(|(at, l)| Edit::Insert(at, l)),
            1 => any::<usize>().prop_map(Edit::Remove),
        ],
    )
}

fn apply(lines: &[String], edit: &Edit) -> Vec<String> {
    let mut lines = lines.to_vec();
    match edit {
        Edit::Replace(at, l) if !lines.is_empty() => {
            let at = at % lines.len();
            lines[at] = l.clone();
        }
        Edit::Insert(at, l) => {
            let at = at % (lines.len() + 1);
            lines.insert(at, l.clone());
        }
        Edit::Remove(at) if !lines.is_empty() => {
            let at = at % lines.len();
            lines.remove(at);
        }
        _ => {}
    }
    lines
}

fn files(main: &[String], inc: &[String]) -> Recording {
    let mut rec = Recording::default();
    // The include cannot include itself forever: its own `#include` lines are dropped.
    let inc: Vec<&String> = inc.iter().filter(|l| !l.starts_with("#include")).collect();
    let join = |lines: Vec<&String>| -> Arc<str> {
        let mut text = String::new();
        for l in lines {
            text.push_str(l);
            text.push('\n');
        }
        text.into()
    };
    rec.files
        .insert("main.x".into(), join(main.iter().collect()));
    rec.files.insert("inc.h".into(), join(inc));
    rec
}

fn run(
    pre: &Preprocessor,
    rec: &Recording,
    language: SourceLanguage,
    keywords: &[&str],
) -> Result<Preprocessed, String> {
    let request = PreprocessRequest {
        entry: Path::new("main.x"),
        language: language.into(),
        include_dirs: &[],
        keywords,
        defines: &[],
        budget: PreprocessBudget::default(),
    };
    pre.preprocess(&request, rec).map_err(|e| e.to_string())
}

/// Counts of the cases seen, so that the test shows it exercised both outcomes.
#[derive(Default, Debug)]
struct Seen {
    views_equal: usize,
    views_differ: usize,
}

thread_local! {
    static SEEN: RefCell<Seen> = RefCell::new(Seen::default());
}

fn check(
    language: SourceLanguage,
    main: Vec<String>,
    inc: Vec<String>,
    keywords: Vec<bool>,
    (in_include, edit): (bool, Edit),
) -> Result<(), TestCaseError> {
    let keywords: Vec<&str> = KEYWORDS
        .iter()
        .zip(&keywords)
        .filter(|(_, on)| **on)
        .map(|(k, _)| *k)
        .collect();
    let pre = Preprocessor::new();
    let before = files(&main, &inc);
    let old = run(&pre, &before, language, &keywords);
    let views = before.views.take();
    let whole = before.whole.take();
    let (main2, inc2) = if in_include {
        (main.clone(), apply(&inc, &edit))
    } else {
        (apply(&main, &edit), inc.clone())
    };
    let after = files(&main2, &inc2);
    let unchanged = views.iter().all(|(path, view)| {
        let hash = |rec: &Recording| {
            let text = rec.files.get(path)?;
            pre.view_hash(&path.to_string_lossy(), text, view)
        };
        hash(&before) == hash(&after)
    }) && whole
        .iter()
        .all(|path| before.files.get(path) == after.files.get(path));
    // Every file the run read reported a view, unless reading or lexing it failed.
    if old.is_ok() {
        let read: Vec<PathBuf> = old.as_ref().map(|p| p.files().to_vec()).unwrap_or_default();
        let viewed: Vec<PathBuf> = views.iter().map(|(p, _)| p.clone()).collect();
        prop_assert_eq!(read, viewed);
    }
    let new = run(&pre, &after, language, &keywords);
    SEEN.with(|seen| {
        let mut seen = seen.borrow_mut();
        if unchanged {
            seen.views_equal += 1;
        } else {
            seen.views_differ += 1;
        }
    });
    if unchanged {
        prop_assert_eq!(
            &old,
            &new,
            "views equal but the output changed; keywords {:?}, edit {:?} in {}\nbefore:\n{:?}\n{:?}",
            keywords,
            edit,
            if in_include { "inc.h" } else { "main.x" },
            main,
            inc
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(768))]

    #[test]
    fn equal_views_mean_an_equal_wgsl_output(
        main in file(false),
        inc in file(false),
        keywords in proptest::collection::vec(any::<bool>(), 3),
        edit in edit(false),
    ) {
        check(SourceLanguage::Wgsl, main, inc, keywords, edit)?;
    }

    #[test]
    fn equal_views_mean_an_equal_glsl_output(
        main in file(true),
        inc in file(true),
        keywords in proptest::collection::vec(any::<bool>(), 3),
        edit in edit(true),
    ) {
        check(SourceLanguage::Glsl, main, inc, keywords, edit)?;
    }
}

/// Both outcomes occur often enough for the properties above to mean something: most edits
/// of a file with conditionals land in a block some keyword set skips.
#[test]
fn views_stay_equal_for_edits_in_skipped_blocks_and_differ_for_used_ones() {
    let main = "#include \"inc.h\"\nkeep = 1;\n".to_string();
    let inc = "#ifdef A\na = 1;\n#else\nb = 2;\n#endif\n";
    for (language, c) in [(SourceLanguage::Wgsl, false), (SourceLanguage::Hlsl, true)] {
        let pre = Preprocessor::new();
        let mut rec = Recording::default();
        rec.files.insert("main.x".into(), main.clone().into());
        rec.files.insert("inc.h".into(), inc.into());
        run(&pre, &rec, language, &[]).unwrap();
        let views = rec.views.take();
        assert_eq!(views.len(), 2, "{views:?}");
        let (path, view) = &views[1];
        assert_eq!(path, Path::new("inc.h"));
        let hash = |text: &str| pre.view_hash("inc.h", &Arc::from(text), view).unwrap();
        let base = hash(inc);
        // In the skipped `#ifdef A` block: the same view.
        assert_eq!(hash(&inc.replace("a = 1;", "a = 7;")), base, "c={c}");
        assert_eq!(
            hash(&inc.replace("a = 1;", "a = 1; // note")),
            base,
            "c={c}"
        );
        // In the used block, on a directive, or moving lines: a different one.
        assert_ne!(hash(&inc.replace("b = 2;", "b = 3;")), base, "c={c}");
        assert_ne!(hash(&inc.replace("#ifdef A", "#ifndef A")), base, "c={c}");
        assert_ne!(
            hash(&inc.replace("a = 1;", "a = 1;\na = 2;")),
            base,
            "c={c}"
        );
    }
}

#[test]
fn the_random_edits_reach_both_outcomes() {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(300));
    runner
        .run(
            &(
                file(false),
                file(false),
                proptest::collection::vec(any::<bool>(), 3),
                edit(false),
            ),
            |(main, inc, keywords, edit)| check(SourceLanguage::Wgsl, main, inc, keywords, edit),
        )
        .unwrap();
    SEEN.with(|seen| {
        let seen = seen.borrow();
        assert!(seen.views_equal >= 30, "{seen:?}");
        assert!(seen.views_differ >= 30, "{seen:?}");
    });
}
