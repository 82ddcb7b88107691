//! Two builds of one project sharing one store at the same time (issue 12): the second finds
//! in the store what the first has already compiled, before compiling it itself, instead of
//! only what the first saved at its end.
//!
//! The first build's store starts the whole second build at the moment its first batch of
//! saves has committed, from inside the first build.

use kiln::manifest::Manifest;
use kiln::pipeline::{BuildOptions, BuildReport, Project};
use kiln::store::{ArtifactStore, ContentKey, LocalStore, Lookup, Namespace, SaveEntry};
use kiln::store::{SaveManyError, StoreError};
use parking_lot::Mutex;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

/// Eight independent keywords, each changing the text: 256 distinct compiles.
const KEYWORDS: [&str; 8] = ["K0", "K1", "K2", "K3", "K4", "K5", "K6", "K7"];

fn write_project(root: &Path) {
    let axes: Vec<String> = KEYWORDS
        .iter()
        .map(|k| format!("[\"_\", \"{k}\"]"))
        .collect();
    let manifest = format!(
        "[project]\ntargets = [\"spirv\"]\n\n[[shader]]\nname = \"Sum\"\nsource = \"sum.wgsl\"\n\
         axes = [{}]\n\n[shader.passes.Main]\nstage = \"compute\"\nentry = \"main\"\n",
        axes.join(", ")
    );
    std::fs::write(root.join("kiln.toml"), manifest).unwrap();
    let mut source = String::from(
        "@group(0) @binding(0) var<storage, read_write> data: array<f32>;\n\n\
         @compute @workgroup_size(1)\nfn main(@builtin(global_invocation_id) id: vec3<u32>) {\n\
         \x20   var v: f32 = 1.0;\n",
    );
    for (i, k) in KEYWORDS.iter().enumerate() {
        let _ = write!(source, "#ifdef {k}\n    v = v + {}.0;\n#endif\n", 1 << i);
    }
    source.push_str("    data[id.x] = v;\n}\n");
    std::fs::write(root.join("sum.wgsl"), source).unwrap();
}

type Hook = Box<dyn FnOnce() + Send>;

/// A local store that runs `hook` once, right after its first batch of saves committed.
struct FirstBatchHook {
    inner: LocalStore,
    hook: Mutex<Option<Hook>>,
    saved_before_hook: Mutex<usize>,
}

impl ArtifactStore for FirstBatchHook {
    fn load(&self, ns: &Namespace, key: &ContentKey) -> Result<Lookup, StoreError> {
        self.inner.load(ns, key)
    }

    fn save(&self, ns: &Namespace, key: &ContentKey, bytes: &[u8]) -> Result<(), StoreError> {
        self.inner.save(ns, key, bytes)
    }

    fn save_many(&self, entries: &[SaveEntry<'_>]) -> Result<(), SaveManyError> {
        let saved = self.inner.save_many(entries);
        let hook = self.hook.lock().take();
        if let Some(hook) = hook {
            *self.saved_before_hook.lock() = entries.len();
            hook();
        }
        saved
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.inner.flush()
    }
}

fn options(root: &Path, name: &str, cache: &Path) -> BuildOptions {
    BuildOptions {
        manifest: root.join("kiln.toml"),
        out_dir: Some(root.join(name)),
        cache_dir: Some(cache.to_owned()),
        jobs: Some(1),
        max_memory: None,
        keep_failed_outputs: false,
        ..BuildOptions::default()
    }
}

#[test]
fn a_second_build_finds_what_the_first_compiled_before_the_first_ends() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_project(root);
    let cache = root.join("cache");

    let second: Arc<Mutex<Option<BuildReport>>> = Arc::default();
    let rows_at_hook: Arc<Mutex<i64>> = Arc::default();
    let hook: Hook = {
        let (root, cache, second) = (root.to_owned(), cache.clone(), second.clone());
        let rows = rows_at_hook.clone();
        Box::new(move || {
            let db = rusqlite::Connection::open(cache.join("store.sqlite")).unwrap();
            *rows.lock() = db
                .query_row("SELECT count(*) FROM entries", [], |r| r.get(0))
                .unwrap();
            let mut project = Project::open(&options(&root, "out-second", &cache)).unwrap();
            *second.lock() = Some(project.build(&|_| {}).unwrap());
        })
    };
    let store = Arc::new(FirstBatchHook {
        inner: LocalStore::new(&cache),
        hook: Mutex::new(Some(hook)),
        saved_before_hook: Mutex::new(0),
    });
    let first_options = options(root, "out-first", &cache);
    let manifest = Manifest::load(&first_options.manifest).unwrap();
    let mut first =
        Project::with_store(manifest, &first_options, store.clone(), cache.clone()).unwrap();
    let first_report = first.build(&|_| {}).unwrap();
    assert_eq!(first_report.failed, 0, "{:?}", first_report.diagnostics);
    assert_eq!(first_report.compiled, 256);

    let second = second.lock().take().expect("the second build ran mid-way");
    let saved = *store.saved_before_hook.lock();
    let rows = *rows_at_hook.lock();
    // Before batches were saved during the build, the first save came at its end, with
    // every artifact in it.
    assert!(
        saved > 0 && saved < 256 && rows == saved as i64,
        "the first batch is saved mid-build ({saved} entries, {rows} rows)"
    );
    assert_eq!(second.failed, 0, "{:?}", second.diagnostics);
    assert_eq!(second.compiled + second.cached, 256);
    // The first build goes on meanwhile (its worker keeps busy while waiting for the
    // second's pool), so the second may find even more than the first batch.
    assert!(
        second.cached >= saved,
        "the second build loads every artifact the first had saved: {} < {saved}",
        second.cached
    );
    assert_eq!(second.outputs_written, 256);
}
