//! Where a warm build's time goes: the steps `Project::build` takes over a filled store and
//! output directory, redone one by one through kiln's public API so that each can be timed
//! alone. The sum against the measured warm build leaves the engine's own bookkeeping.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use kiln::compile::{CompilerKind, FrontEnd};
use kiln::identity;
use kiln::manifest::Manifest;
use kiln::pipeline::{output_path, Index, IndexEntry};
use kiln::preprocess::{self, MemoryLoader};
use kiln::store::{ArtifactStore, ContentKey, LocalStore, Lookup, Namespace};

use super::project::{Generated, INCLUDE_DIR};

/// Time per phase of a warm build, in the order the pipeline runs them.
pub struct Phases {
    /// `(phase, time)`.
    pub times: Vec<(&'static str, Duration)>,
    /// Store loads that hit, of those tried: if they miss, the key derivation here no longer
    /// matches the pipeline's and the store figure is not representative.
    pub store_hits: usize,
    /// Store loads tried.
    pub store_loads: usize,
    /// Outputs judged current from the index and their size, of all outputs.
    pub outputs_current: usize,
}

/// Whether an output is current as the pipeline judges it: the previous index lists it with
/// this hash and size, and the file has that size.
fn is_current(path: &Path, previous: Option<&IndexEntry>, bytes: u64, hash: &ContentKey) -> bool {
    previous.is_some_and(|entry| entry.content_hash == *hash && entry.bytes == bytes)
        && std::fs::metadata(path).is_ok_and(|m| m.len() == bytes)
}

/// Runs every phase once, single-threaded, over the project's filled `out_dir` and `cache_dir`.
pub fn measure(project: &Generated, out_dir: &Path, cache_dir: &Path) -> Result<Phases, String> {
    let mut times = Vec::new();
    let mut timed = |name: &'static str, started: Instant| times.push((name, started.elapsed()));

    let started = Instant::now();
    let manifest = Manifest::load(&project.manifest).map_err(|e| e.to_string())?;
    timed("manifest_load", started);

    let started = Instant::now();
    let mut loader = MemoryLoader::new();
    let include_dir = manifest.root.join(INCLUDE_DIR);
    let mut files: Vec<_> = std::fs::read_dir(&include_dir)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok())
        .map(|e| Path::new(INCLUDE_DIR).join(e.file_name()))
        .collect();
    files.extend(
        manifest
            .shaders
            .iter()
            .flat_map(|s| s.passes.iter().map(|p| p.source.clone())),
    );
    files.sort();
    files.dedup();
    for file in &files {
        let text = std::fs::read_to_string(manifest.root.join(file)).map_err(|e| e.to_string())?;
        loader.insert(file.clone(), text);
    }
    timed("read_sources", started);

    let started = Instant::now();
    for shader in &manifest.shaders {
        for pass in &shader.passes {
            preprocess::include_closure(
                &pass.source,
                pass.language.into(),
                &shader.include_dirs,
                &loader,
            )
            .map_err(|e| e.to_string())?;
        }
    }
    timed("include_closures", started);

    let started = Instant::now();
    let mut texts = Vec::with_capacity(project.variants.len());
    for variant in &project.variants {
        texts.push(variant.preprocess(project.language, &loader)?);
    }
    timed("preprocess", started);

    let started = Instant::now();
    let keys: Vec<ContentKey> = project
        .variants
        .iter()
        .zip(&texts)
        .map(|(variant, text)| {
            let text_hash = ContentKey::hash(text.as_bytes());
            identity::compile_key(
                &FrontEnd::Naga,
                project.language,
                variant.stage,
                variant.entry,
                &text_hash,
                &kiln::compile::Constants::new(),
            )
        })
        .collect();
    timed("text_hashes", started);

    let started = Instant::now();
    let store = LocalStore::new(cache_dir);
    let namespaces: Vec<Namespace> = manifest
        .targets
        .iter()
        .map(|target| identity::namespace(CompilerKind::Naga, target))
        .collect();
    let mut loaded: Vec<Vec<u8>> = Vec::with_capacity(keys.len() * namespaces.len());
    let mut store_loads = 0;
    for key in &keys {
        for ns in &namespaces {
            store_loads += 1;
            if let Ok(Lookup::Hit(bytes)) = store.load(ns, key) {
                loaded.push(bytes);
            }
        }
    }
    timed("store_loads", started);

    let started = Instant::now();
    let hashes: Vec<(u64, ContentKey)> = loaded
        .iter()
        .map(|b| (b.len() as u64, ContentKey::hash(b)))
        .collect();
    timed("output_hashes", started);

    let started = Instant::now();
    let index = Index::read(out_dir);
    timed("index_read", started);

    let started = Instant::now();
    let by_path: BTreeMap<&str, _> = index.entries.iter().map(|e| (&*e.path, e)).collect();
    let mut outputs_current = 0;
    let mut hash_of = hashes.iter();
    for variant in &project.variants {
        for target in &manifest.targets {
            let relative = output_path(
                &variant.shader,
                variant.pass,
                &variant.keywords,
                target.target().extension(),
            );
            let Some((bytes, hash)) = hash_of.next() else {
                break;
            };
            if is_current(
                &out_dir.join(&relative),
                by_path.get(relative.as_str()).copied(),
                *bytes,
                hash,
            ) {
                outputs_current += 1;
            }
        }
    }
    timed("output_checks", started);

    Ok(Phases {
        times,
        store_hits: loaded.len(),
        store_loads,
        outputs_current,
    })
}
