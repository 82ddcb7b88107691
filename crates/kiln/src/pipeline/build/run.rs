//! The second phase of a build: each variant through the engine, in parallel. A variant's
//! work *returns* what it did ([`Ran`]): the engine's answer, how its artifacts were
//! obtained, its outputs written while their bytes are in hand, the store's warnings and its
//! compile times. Nothing is parked in shared state for a later phase to collect.

use super::commit::write::{self, Placed, WriteResult};
use super::plan::{Mode, Outputs, Plan};
use crate::pipeline::engine::queries::{
    variant_key, Artifacts, ArtifactsQ, CompileJob, VariantFailure,
};
use crate::pipeline::engine::scope::{Byproducts, Revisions, VariantScope};
use crate::pipeline::engine::services::{Outcome, Services, VariantArtifacts};
use crate::pipeline::{Diagnostic, Progress, Project, VariantId};
use crate::store::ContentKey;
use kiln_incr::QueryHandle;
use rayon::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// What the engine answers for one variant.
pub(super) type VariantResult = Result<Result<Artifacts, VariantFailure>, kiln_incr::QueryError>;

/// One variant's work in a build, returned by the worker that did it.
pub(super) struct Ran {
    /// The engine's answer: the artifacts' sizes and hashes (and failed targets), or why
    /// there are none.
    pub result: VariantResult,
    /// How its artifacts were obtained, when anything executed for it in this build; `None`
    /// when the engine re-verified its memo (up to date).
    pub outcome: Option<Outcome>,
    /// Its outputs written, or why they could not be; `None` in a shard build and for a
    /// variant without artifacts.
    pub written: Option<WriteResult>,
    /// Store trouble met and repaired on the way.
    pub warnings: Vec<Diagnostic>,
    /// Compile time (µs) of each job compiled for it, by job key.
    pub costs: Vec<(ContentKey, u64)>,
    /// Time spent compiling for it, µs.
    pub compile_us: u64,
    /// Something its artifacts depend on re-executed while it was asked for.
    pub inputs_reran: bool,
}

impl Ran {
    fn new(result: VariantResult, made: Byproducts) -> Self {
        Ran {
            result,
            outcome: made.outcome,
            written: None,
            warnings: made.warnings,
            costs: made.costs,
            compile_us: made.compile_us,
            inputs_reran: made.inputs_reran,
        }
    }

    /// Adds what a later step for the same variant produced.
    fn add(&mut self, made: Byproducts) {
        self.outcome = made.outcome.or(self.outcome);
        self.warnings.extend(made.warnings);
        self.costs.extend(made.costs);
        self.compile_us = self.compile_us.saturating_add(made.compile_us);
    }
}

impl Project {
    /// Runs `chunk` on the pool, reporting progress after each variant (`done_before`
    /// variants of `plan.total` were done before this chunk); the results in chunk order.
    pub(super) fn run(
        &self,
        chunk: &[VariantId],
        plan: &Plan,
        done_before: usize,
        progress: &(dyn Fn(Progress) + Sync),
    ) -> Vec<Ran> {
        let done = AtomicUsize::new(done_before);
        let artifacts = self.db.query::<ArtifactsQ>();
        self.pool.install(|| {
            chunk
                .par_iter()
                .map(|variant| {
                    let ran = self.run_variant(&artifacts, variant, plan);
                    let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                    progress(Progress {
                        done: finished,
                        total: plan.total,
                    });
                    ran
                })
                .collect()
        })
    }

    /// One variant: its artifacts through the engine, then (when the build writes outputs)
    /// its outputs, written by this worker while the bytes are still in memory: a build of
    /// 100,000 variants does not hold every artifact until the end.
    fn run_variant(
        &self,
        artifacts: &QueryHandle<'_, ArtifactsQ, Services>,
        variant: &VariantId,
        plan: &Plan,
    ) -> Ran {
        let (result, mut made) = VariantScope::run(&plan.revisions, || artifacts.get(variant));
        let fresh = made.fresh.take();
        let mut ran = Ran::new(result, made);
        if let (Ok(Ok(artifacts)), Mode::Outputs(outputs)) = (&ran.result, &plan.mode) {
            let (written, made) = self.write_variant(variant, artifacts, fresh, outputs, plan);
            ran.add(made);
            ran.written = Some(written);
        }
        ran
    }

    /// Writes the outputs of `variant` that the disk does not already hold; the bytes come
    /// from its query's execution, else from the variant cache or the store (and from the
    /// compiler only if the store lost them: then the outcome says so).
    fn write_variant(
        &self,
        variant: &VariantId,
        artifacts: &Artifacts,
        fresh: Option<Arc<VariantArtifacts>>,
        outputs: &Outputs,
        plan: &Plan,
    ) -> (WriteResult, Byproducts) {
        let Some(revision) = plan.revisions.get(&variant.shader) else {
            let d = write::failure(variant, format!("no revision of shader {}", variant.shader));
            return (Err(d), Byproducts::default());
        };
        let placed = match write::place(&self.out_dir, variant, artifacts, outputs) {
            Ok(placed) => placed,
            Err(d) => return (Err(d), Byproducts::default()),
        };
        let (bytes, made) = match fresh {
            Some(fresh) => (Some(fresh), Byproducts::default()),
            None if placed.iter().all(Placed::held) => (None, Byproducts::default()),
            None => self.bytes_of(variant, &plan.revisions),
        };
        let written = write::write(
            &self.spares,
            variant,
            placed,
            bytes.as_deref(),
            &outputs.last,
            revision,
        );
        (written, made)
    }

    /// The artifacts of a variant whose bytes its query did not have in hand (it took the
    /// store's record of them, or the engine re-verified its memo): from the variant cache,
    /// else from the store, verified, and from the compiler only if the store lost them.
    pub(in crate::pipeline) fn bytes_of(
        &self,
        variant: &VariantId,
        revisions: &Arc<Revisions>,
    ) -> (Option<Arc<VariantArtifacts>>, Byproducts) {
        VariantScope::run(revisions, || {
            let revision = revisions.get(&variant.shader)?;
            let key = variant_key(variant, revision.revision.short()).ok()?;
            let services = self.db.context();
            if let Some(artifacts) = services.cache.get(&key) {
                return Some(artifacts);
            }
            let job = CompileJob::of(&self.db, variant).ok()?.ok()?;
            let produced = services
                .materialize(&key, &job.input(), &job.targets)
                .ok()?;
            if produced.outcome != Outcome::Cached {
                // The store lost them (a corrupt entry): the report says they were compiled.
                VariantScope::record(|made| made.outcome = Some(produced.outcome));
            }
            Some(produced.artifacts)
        })
    }
}
