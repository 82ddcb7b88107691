//! One build, in three phases, each handing the next a value:
//! 1. `plan/` -> [`plan::Plan`]: what runs, what is current, the revisions, the mode;
//! 2. `run.rs` -> [`run::Ran`] per variant, chunk by chunk: artifacts, outcome, outputs
//!    written, warnings;
//! 3. `commit/`: folds each chunk's `Ran`s ([`commit::Commit`]), then writes the index,
//!    saves, and computes the [`BuildReport`].

mod commit;
mod plan;
mod run;

pub use commit::NOT_IN_STORE;
pub use plan::remote::ShardReport;
pub(crate) use plan::LastBuild;

use super::{BuildReport, Progress, Project, ProjectError};
use std::sync::Arc;
use std::time::Instant;

/// A build runs its variants in chunks of this many, evicting what the engine's byte
/// budgets do not allow after each: a text is needed only until its variant is compiled,
/// and a cold build of 100,000 variants would otherwise hold every one until the end.
const VARIANTS_PER_EVICTION: usize = 1024;

impl Project {
    /// Builds every variant for every target, writes changed outputs and the index.
    ///
    /// A failed variant does not stop the build: every other variant is built, stored and
    /// written, and the failure is a diagnostic in the report. The previous outputs of a
    /// failed variant are removed, or kept and marked stale with
    /// [`super::BuildOptions::keep_failed_outputs`]. In a project already built in this
    /// process, only what changed since re-executes.
    pub fn build(
        &mut self,
        progress: &(dyn Fn(Progress) + Sync),
    ) -> Result<BuildReport, ProjectError> {
        let started = Instant::now();
        let mut plan = self.plan()?;
        let targets = self.manifest.targets.iter().map(|t| t.target().name());
        let mut commit = commit::Commit::new(&mut plan, targets.collect());
        let variants = Arc::clone(&plan.variants);
        for (number, chunk) in variants.chunks(VARIANTS_PER_EVICTION).enumerate() {
            let first = number * VARIANTS_PER_EVICTION;
            let ran = self.run(chunk, &plan, plan.current_variants() + first, progress);
            commit.absorb(self, &mut plan, first, ran);
            self.between_chunks();
        }
        self.commit(plan, commit, started)
    }

    /// Between chunks, when no query runs: the build's dedup table keeps only outcomes, the
    /// engine evicts what its byte budgets do not allow, and free memory goes back.
    fn between_chunks(&mut self) {
        self.db.context().settle();
        self.db.evict();
        release_free_memory();
    }
}

/// Gives the allocator's wholly free pages back to the system. A build's workers allocate
/// and free parsed modules, texts and artifacts in their own malloc arenas, and glibc by
/// itself returns only the top of a thread's arena: the pages a chunk's compiles freed
/// would otherwise stay resident for the rest of the build and under `kiln watch`.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only walks the allocator's own free lists; any thread may call it.
    unsafe {
        libc::malloc_trim(0);
    }
}
