//! Builds with a remote cache, and farm shards: before variants run, every variant's compile
//! job is planned (its text preprocessed, its job key and store keys computed), so that
//! - the artifacts a build is about to load are announced to the store at once
//!   ([`crate::store::ArtifactStore::prefetch`]: fetched from the remote in batches), and
//! - a shard (`--shard I/N`) keeps only the variants of its share of the distinct jobs
//!   ([`crate::shard::partition`]).
//!
//! Planning costs nothing extra: what it computes through the engine is memoized and is
//! what the variants' own queries read next.

use crate::identity;
use crate::pipeline::engine::queries::CompileJob;
use crate::pipeline::{Diagnostic, Project, ProjectError, VariantId};
use crate::shard::{self, Shard};
use crate::store::{ContentKey, Namespace};
use rayon::prelude::*;
use std::collections::BTreeMap;

/// What a shard build was given to do.
#[derive(Clone, Debug, PartialEq)]
pub struct ShardReport {
    /// This shard.
    pub shard: Shard,
    /// Distinct compile jobs in the project (after deduplication).
    pub jobs: usize,
    /// Jobs in this shard's share.
    pub mine: usize,
    /// This shard's expected cost over the mean shard's (1.0: perfectly balanced).
    pub expected_imbalance: f64,
    /// Jobs whose expected cost came from a compile time recorded in the remote.
    pub recorded_costs: usize,
}

/// One distinct compile job: its text size, its variants, the store entries it makes.
struct PlannedJob {
    text_bytes: u64,
    variants: Vec<usize>,
    entries: Vec<(Namespace, ContentKey)>,
}

/// A variant's job key, text size and store entries.
type PlannedVariant = (ContentKey, u64, Vec<(Namespace, ContentKey)>);

/// The distinct compile jobs of a build's variants, by job key, and the positions of the
/// variants that cannot be planned (their text does not preprocess).
struct Jobs {
    by_key: BTreeMap<ContentKey, PlannedJob>,
    unplanned: Vec<usize>,
}

impl Jobs {
    /// Every store entry the jobs make, each with its job's key.
    fn entries(&self) -> impl Iterator<Item = (ContentKey, &(Namespace, ContentKey))> {
        self.by_key
            .iter()
            .flat_map(|(key, job)| job.entries.iter().map(move |entry| (*key, entry)))
    }
}

impl Project {
    /// Each variant's compile job through the engine (memoized: what the variants' own
    /// queries read next), grouped by job key.
    fn plan_jobs(&self, variants: &[VariantId]) -> Jobs {
        let services = self.db.context();
        let planned: Vec<Option<PlannedVariant>> = self.pool.install(|| {
            variants
                .par_iter()
                .map(|variant| {
                    let Ok(Ok(job)) = CompileJob::of(&self.db, variant) else {
                        return None;
                    };
                    let input = job.input();
                    let compile_key = input.compile_key();
                    let compiler = input.front_end.kind();
                    let entries = job
                        .targets
                        .iter()
                        .map(|target| {
                            ((*services.namespace(compiler, target)).clone(), compile_key)
                        })
                        .collect();
                    let job_key = identity::job_key(&compile_key, &job.targets);
                    Some((job_key, input.text.len() as u64, entries))
                })
                .collect()
        });
        let mut jobs = Jobs {
            by_key: BTreeMap::new(),
            unplanned: Vec::new(),
        };
        for (index, plan) in planned.into_iter().enumerate() {
            match plan {
                Some((key, text_bytes, entries)) => {
                    jobs.by_key
                        .entry(key)
                        .or_insert_with(|| PlannedJob {
                            text_bytes,
                            variants: Vec::new(),
                            entries,
                        })
                        .variants
                        .push(index);
                }
                None => jobs.unplanned.push(index),
            }
        }
        jobs
    }

    /// Announces what `variants` will load to a store with a remote level, which fetches
    /// it in batches; returns the variants.
    pub(super) fn prefetch_remote(&self, variants: Vec<VariantId>) -> Vec<VariantId> {
        let services = self.db.context();
        let Some(remote) = services.store.remote() else {
            return variants;
        };
        let jobs = self.plan_jobs(&variants);
        let (owners, entries): (Vec<ContentKey>, Vec<(Namespace, ContentKey)>) = jobs
            .entries()
            .map(|(key, entry)| (key, entry.clone()))
            .unzip();
        let from_remote = self.pool.install(|| services.store.prefetch(&entries));
        // Compile times that shards recorded for what this build fetched become the next
        // farm run's estimates.
        let mut fetched: Vec<ContentKey> = owners
            .into_iter()
            .zip(from_remote)
            .filter_map(|(key, fetched)| fetched.then_some(key))
            .collect();
        fetched.dedup();
        remote.confirm_costs(&fetched);
        variants
    }

    /// A shard's share of `variants`: one variant per job of its share (its twins would only
    /// be deduplicated), and for shard 0 the variants that cannot be planned, which it
    /// reports. What the share will load is announced to the remote first.
    pub(super) fn shard_share(
        &self,
        shard: Shard,
        variants: Vec<VariantId>,
    ) -> Result<(Vec<VariantId>, ShardReport), ProjectError> {
        let services = self.db.context();
        let remote = services
            .store
            .remote()
            .ok_or(ProjectError::ShardWithoutRemote { shard })?;
        let jobs = self.plan_jobs(&variants);
        let keys: Vec<ContentKey> = jobs.by_key.keys().copied().collect();
        let recorded = remote.costs(&keys, false);
        let text_bytes: Vec<u64> = jobs.by_key.values().map(|job| job.text_bytes).collect();
        let costs = shard::expected_costs(&recorded, &text_bytes);
        let weighted: Vec<(ContentKey, u64)> =
            keys.iter().copied().zip(costs.iter().copied()).collect();
        let assigned = shard::partition(&weighted, shard.count);
        let mut keep = vec![false; variants.len()];
        let mut entries = Vec::new();
        let mut mine = 0;
        for (job, owner) in jobs.by_key.values().zip(&assigned) {
            if *owner == shard.index {
                mine += 1;
                entries.extend(job.entries.iter().cloned());
                if let Some(first) = job.variants.first() {
                    keep[*first] = true;
                }
            }
        }
        if shard.index == 0 {
            for index in &jobs.unplanned {
                keep[*index] = true;
            }
        }
        let from_remote = self.pool.install(|| services.store.prefetch(&entries));
        self.publish_local(&entries, &from_remote);
        let report = ShardReport {
            shard,
            jobs: jobs.by_key.len(),
            mine,
            expected_imbalance: imbalance(&costs, &assigned, shard),
            recorded_costs: recorded.iter().flatten().count(),
        };
        let kept = variants
            .into_iter()
            .zip(keep)
            .filter_map(|(variant, keep)| keep.then_some(variant))
            .collect();
        Ok((kept, report))
    }
}

/// A shard's expected cost over the mean shard's, given each job's cost and owner.
fn imbalance(costs: &[u64], assigned: &[usize], shard: Shard) -> f64 {
    // No load per shard: the count can be four billion (`--shard 0/4294967296`).
    let (mut own, mut total) = (0u128, 0u128);
    for (cost, owner) in costs.iter().zip(assigned) {
        total += u128::from(*cost);
        if *owner == shard.index {
            own += u128::from(*cost);
        }
    }
    if total == 0 {
        1.0
    } else {
        own as f64 * shard.count as f64 / total as f64
    }
}

impl Project {
    /// A shard's share must end up in the remote, also what its own local store already
    /// had (a reused runner): those the remote lacks are uploaded from the local store.
    fn publish_local(&self, entries: &[(Namespace, ContentKey)], from_remote: &[bool]) {
        let services = self.db.context();
        let Some(remote) = services.store.remote() else {
            return;
        };
        let local: Vec<&(Namespace, ContentKey)> = entries
            .iter()
            .zip(from_remote)
            .filter_map(|(entry, fetched)| (!fetched).then_some(entry))
            .collect();
        let asked: Vec<(&Namespace, &ContentKey)> = local.iter().map(|(ns, k)| (ns, k)).collect();
        let lacks = remote.lacks(&asked);
        let mut upload: Vec<(&Namespace, &ContentKey, Vec<u8>)> = Vec::new();
        for ((ns, key), lacking) in asked.into_iter().zip(lacks) {
            if !lacking {
                continue;
            }
            if let Ok(crate::store::Lookup::Hit(bytes)) = services.store.load(ns, key) {
                upload.push((ns, key, bytes));
            }
        }
        let entries: Vec<(&Namespace, &ContentKey, &[u8])> = upload
            .iter()
            .map(|(ns, key, bytes)| (*ns, *key, &bytes[..]))
            .collect();
        remote.put_many(&entries);
    }
}

/// The warnings a remote's report calls for: at most one per kind of trouble, however many
/// artifacts it touched.
pub(crate) fn remote_warnings(report: &crate::store::RemoteReport) -> Vec<Diagnostic> {
    let mut warnings = Vec::new();
    if let Some(error) = &report.unavailable {
        warnings.push(Diagnostic::warning(format!(
            "remote cache {} unavailable ({error}): compiled locally; {} reads and {} uploads skipped",
            report.url, report.read_failed, report.upload_failed
        )));
    }
    if let Some(error) = &report.writes_refused {
        warnings.push(Diagnostic::warning(format!(
            "remote cache {} refused writes ({error}): {} artifacts not uploaded",
            report.url, report.upload_failed
        )));
    }
    if let Some(first) = &report.first_rejected {
        warnings.push(Diagnostic::warning(format!(
            "remote cache {}: {} values rejected (damaged or under another key; the first: {first}): compiled locally instead",
            report.url, report.rejected
        )));
    }
    warnings
}
