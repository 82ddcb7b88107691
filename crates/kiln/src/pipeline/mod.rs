//! The build pipeline: a manifest's variants through the engine's queries into the store and
//! the output directory. [`Project`] owns one engine database for the life of a process, so
//! that `kiln watch` rebuilds incrementally; `kiln build` is one [`Project::build`].
//!
//! The folders follow the data:
//! - `project.rs`: the project between builds (opening it, files and manifest re-read).
//! - `engine/`: the queries, the services they reach, the scope a variant runs in.
//! - `build/`: one build, in three phases whose values hand over to the next:
//!   `plan/` ([`build::Plan`]: discovery, the last build, revisions, what is current, the
//!   remote) -> `run.rs` (each variant's work returns its artifacts, outcome and warnings)
//!   -> `commit/` (outputs, index, stats, saves, and the report, from what the run returned).
//! - `out_dir/`: the output directory on disk (index, paths, stats, atomic writes, lock).
//! - `on_demand.rs`: one variant asked for by name while the project is open (`kiln serve`),
//!   listed in the manifest or not, through the same queries and store as a build.
//! - `report.rs`, `diagnostic.rs`: what a build tells its caller.
//! - `history.rs`: the recent builds, one record each in the store directory; `explain.rs`:
//!   a variant's identity inputs and which of them changed (`kiln report`, `kiln explain`).

mod build;
mod diagnostic;
mod engine;
mod explain;
pub mod history;
mod on_demand;
mod out_dir;
mod project;
mod report;

pub use build::{ShardReport, NOT_IN_STORE};
pub use diagnostic::{describe_variant, Diagnostic, Location, Severity};
pub use engine::services::Outcome;
pub use explain::{
    Change, ChangeKind, Define, ExplainError, Explanation, PassTexts, Rebuild, StoreEntry,
};
pub use on_demand::{FetchError, Fetched, Prepared, VariantRequest};
pub use out_dir::recycle::write_new_output;
pub use out_dir::stat::STAT_FILE;
pub use out_dir::{output_path, Index, IndexEntry, IndexFailure, IndexVariant, INDEX_FILE};
pub use report::{BuildReport, Cause, Outcomes, Progress, Recompiled, Summary, RECOMPILED_LISTED};

use crate::manifest::{Manifest, ManifestError};
use crate::shard::Shard;
use crate::store::RemoteConfigError;
use engine::queries::Db;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// One variant: a shader, a pass and a canonical keyword set (sorted, distinct).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VariantId {
    /// Shader name.
    pub shader: Arc<str>,
    /// Pass name.
    pub pass: Arc<str>,
    /// Keywords, sorted and distinct.
    pub keywords: Arc<[Arc<str>]>,
}

impl std::fmt::Display for VariantId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = kiln_runtime::canon::keyword_text(&self.keywords);
        write!(f, "{}/{}[{}]", self.shader, self.pass, text)
    }
}

/// Where a project's inputs and outputs are.
#[derive(Clone, Debug, Default)]
pub struct BuildOptions {
    /// The manifest, `kiln.toml`.
    pub manifest: PathBuf,
    /// Output directory; default `out/` beside the manifest.
    pub out_dir: Option<PathBuf>,
    /// Store directory; default `.kiln/` beside the manifest.
    pub cache_dir: Option<PathBuf>,
    /// Worker threads; default: one per core.
    pub jobs: Option<usize>,
    /// Byte budget for what a project keeps in memory besides its per-variant records:
    /// half for compiled artifacts (the variant cache), a quarter for artifacts waiting to
    /// be saved to the store, an eighth each for preprocessed and compile texts. Default:
    /// 8 MiB of artifacts, 16 MiB of pending saves, 8 MiB per kind of text. Artifact bytes
    /// need not stay in memory once written: evicted ones are reloaded from the store,
    /// never recompiled.
    pub max_memory: Option<u64>,
    /// Keep the last good outputs of a variant that fails, marked `stale` in the index (for
    /// hot reload under `kiln watch`); by default they are removed, so that the output
    /// directory is exactly what a clean build would write.
    pub keep_failed_outputs: bool,
    /// The remote cache's URL, overriding `[cache] remote` in the manifest.
    pub remote: Option<String>,
    /// Use no remote cache, whatever the manifest says.
    pub no_remote: bool,
    /// Write to the remote cache (CI); without it the remote is only read. A shard build
    /// writes regardless.
    pub remote_push: bool,
    /// Never write to the remote cache, whatever else says so (also `[cache] read_only =
    /// true`).
    pub remote_read_only: bool,
    /// Give up on a remote round trip (connecting, sending, the whole reply) after this
    /// long (default 10 s; connecting: at most 2 s of it).
    pub remote_timeout: Option<Duration>,
    /// Reject remote values longer than this, unread (default
    /// [`crate::store::remote::MAX_VALUE_BYTES`], 64 MiB).
    pub remote_max_value_bytes: Option<usize>,
    /// The shared secret's key (`KILN_REMOTE_KEY`): values are written with a MAC, and only
    /// values with a valid one are used.
    pub remote_key: Option<crate::store::remote::RemoteKey>,
    /// Build only this shard's share of the compile jobs, upload it, write no outputs.
    pub shard: Option<Shard>,
}

/// Why a project could not be opened or built at all (a variant's failure is not this: it is
/// a diagnostic in the [`BuildReport`]).
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    /// The manifest is missing or wrong.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The worker pool could not start.
    #[error("cannot start {jobs} worker threads: {source}")]
    Workers {
        /// Requested threads.
        jobs: usize,
        /// Why.
        source: rayon::ThreadPoolBuildError,
    },
    /// The remote cache's URL cannot be used (it is redacted here).
    #[error(transparent)]
    Remote(#[from] RemoteConfigError),
    /// A shard build without a remote cache it may write to.
    #[error("shard {shard}: a shard build uploads its share, so it needs a remote cache it may write (`--remote URL`, KILN_REMOTE or `[cache] remote`, without `--remote-read-only` or `[cache] read_only`)")]
    ShardWithoutRemote {
        /// The shard.
        shard: Shard,
    },
    /// The output or store directory is one kiln must not write into (a link in the
    /// project, or a directory holding the project's own files).
    #[error("refusing {}: {problem}", path.display())]
    UnsafeDir {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// `index.json` in the output directory is not kiln's: kiln does not replace it.
    #[error("{}: not an index kiln wrote; kiln does not replace a file it did not write (move it away, or build into another directory)", path.display())]
    ForeignIndex {
        /// Its path.
        path: PathBuf,
    },
    /// The project directory was removed, or replaced by another at its path, since the
    /// project was opened.
    #[error("the project directory {} was removed or replaced since it was opened; nothing there is built (open the project again)", root.display())]
    RootGone {
        /// The project root.
        root: PathBuf,
    },
    /// The output directory or its index could not be written.
    #[error("cannot write outputs in {}: {source}", path.display())]
    Output {
        /// The path that failed.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// A project open for building: the manifest, the engine database, the store.
pub struct Project {
    db: Db,
    manifest: Arc<Manifest>,
    out_dir: PathBuf,
    cache_dir: PathBuf,
    pool: rayon::ThreadPool,
    keep_failed_outputs: bool,
    /// Every project file the engine has read, also those that did not exist.
    known_files: BTreeSet<PathBuf>,
    /// Files whose contents changed since the last build, for the next report.
    changed_files: BTreeSet<PathBuf>,
    manifest_changed: bool,
    /// What changed in the manifest since the last build, field by field.
    manifest_changes: Vec<crate::manifest::ManifestChange>,
    /// What the last build in this process wrote; `None` before it (then `index.json` and
    /// `.kiln-stat` are read from disk).
    last: Option<build::LastBuild>,
    events: Arc<engine::events::EventCounts>,
    /// A farm shard: builds its share, uploads, writes no outputs.
    shard: Option<Shard>,
    /// The spare files outputs are swapped with (`recycle`); emptied after each build's
    /// output writes.
    spares: out_dir::recycle::Spares,
    /// The project directory, held open to tell when it is gone.
    root: project::ProjectRoot,
}
