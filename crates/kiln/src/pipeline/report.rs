//! What a build tells its caller: progress while it runs, then a [`BuildReport`] (counts,
//! diagnostics, each recomputed variant's [`Outcome`], the remote's and a shard's reports).
//!
//! A cold build of 100,000 variants has an outcome for each: held as a position in the
//! build's list of variants (shared, not copied) and one byte, not as a map from a copy of
//! every variant's name (7 MB at that size, at the build's peak).

use super::{Diagnostic, Outcome, ShardReport, VariantId};
use crate::store::RemoteReport;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Progress of a build, reported after each variant.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    /// Variants done.
    pub done: usize,
    /// Variants in all.
    pub total: usize,
}

/// Every variant of a build in exactly one class: the four add up to
/// [`BuildReport::variants`] (in a shard build, to the variants of its share).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Failed, for every target or for some.
    pub failed: usize,
    /// Compiled (or equal to a variant compiled) in this build.
    pub recompiled: usize,
    /// Re-verified after something they depend on ran again and came out equal.
    pub early_cutoff: usize,
    /// Anything else: up to date, re-verified, or taken from the store.
    pub unchanged: usize,
}

impl Summary {
    /// The variants counted.
    pub fn total(&self) -> usize {
        self.failed + self.recompiled + self.early_cutoff + self.unchanged
    }
}

/// What one build did.
#[derive(Clone, Debug, Default)]
pub struct BuildReport {
    /// Variants in the manifest ((shader, pass, keyword set) triples).
    pub variants: usize,
    /// Variants compiled by naga in this build.
    pub compiled: usize,
    /// Variants whose artifacts came from the store or memory, or were already up to date.
    pub cached: usize,
    /// Variants whose preprocessed text equalled another's in this build: compiled once.
    pub deduplicated: usize,
    /// Variants that failed, for every target or for some (see `failed_outputs`).
    pub failed: usize,
    /// (variant, target) pairs that failed: a pair fails alone, its variant's other targets
    /// are written.
    pub failed_outputs: usize,
    /// Output files written (new or changed).
    pub outputs_written: usize,
    /// Output files removed (their variant or target left the manifest).
    pub outputs_removed: usize,
    /// Packs written (`[output] layout = "both"`): 0 when the last build's still hold
    /// every output.
    pub packs_written: usize,
    /// Packs that could not be written (each is an error in `diagnostics`, and no pack of
    /// that target is left in the output directory).
    pub packs_failed: usize,
    /// Errors (failed variants) and warnings (repaired store entries), errors first.
    pub diagnostics: Vec<Diagnostic>,
    /// Per variant that was (re)computed in this build, how its artifacts were obtained.
    pub outcomes: Outcomes,
    /// Project files whose contents changed since the previous build of this project.
    pub changed_files: Vec<PathBuf>,
    /// Whether the manifest changed since the previous build.
    pub manifest_changed: bool,
    /// What changed in the manifest, field by field.
    pub manifest_changes: Vec<crate::manifest::ManifestChange>,
    /// Per cause of this build (a changed file, a manifest field), how many variants it
    /// reaches were recompiled and how many came out unchanged.
    pub causes: Vec<Cause>,
    /// Variants whose artifacts the engine re-verified without re-executing anything.
    pub verified: usize,
    /// Variants whose artifacts the engine re-verified after something they depend on
    /// re-executed and came out equal (early cutoff): none of them is in `verified`.
    pub early_cutoff: usize,
    /// Every variant in one class, for a summary that adds up.
    pub summary: Summary,
    /// Memo values the engine's LRU evicted at this build's revision boundary.
    pub evicted: usize,
    /// The variants naga compiled, with why: the first [`RECOMPILED_LISTED`] of them
    /// (`compiled` counts them all; a cold build of 100,000 variants would otherwise hold a
    /// record for each).
    pub recompiled: Vec<Recompiled>,
    /// Time until every output and the index were written (new artifacts are saved to the
    /// store after that, within `elapsed`).
    pub outputs_ready: Duration,
    /// Wall time.
    pub elapsed: Duration,
    /// What the remote cache did, when there is one.
    pub remote: Option<RemoteReport>,
    /// What a shard build was given to do.
    pub shard: Option<ShardReport>,
}

/// How many recompiled variants a [`BuildReport`] lists with their reasons.
pub const RECOMPILED_LISTED: usize = 1000;

/// One cause of a rebuild and its effect. A file reaches the variants of every pass whose
/// include closure holds it (whatever their keywords); a shader's manifest entry, that
/// shader's variants; a project-wide field, every variant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    /// The changed file (root-relative, `/`-separated), or `kiln.toml: <field>`.
    pub what: String,
    /// Variants it reaches that were compiled (or equal to one compiled) in this build.
    pub recompiled: usize,
    /// Variants it reaches that were not.
    pub unchanged: usize,
}

/// A variant naga compiled in a build, and the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recompiled {
    /// The variant.
    pub variant: VariantId,
    /// Its key's digest (for logs).
    pub digest: String,
    /// What made it compile, for grouping: the changed file (root-relative), the
    /// manifest's file name, or [`NOT_IN_STORE`](crate::pipeline::NOT_IN_STORE).
    pub cause: String,
    /// Why: the changed file and the source that includes it, a manifest change, or an
    /// artifact missing from the store.
    pub reason: String,
}

/// Per variant that was (re)computed in a build, how its artifacts were obtained, in the
/// order the build ran them. A variant the engine re-verified, or found up to date on disk,
/// has none.
#[derive(Clone, Debug, Default)]
pub struct Outcomes {
    variants: Arc<[VariantId]>,
    recorded: Vec<(u32, Outcome)>,
}

impl Outcomes {
    /// No outcome yet, for variants from `variants`.
    pub(crate) fn of(variants: Arc<[VariantId]>) -> Self {
        Self {
            variants,
            recorded: Vec::new(),
        }
    }

    /// Records the outcome of `variants[at]`.
    pub(crate) fn record(&mut self, at: usize, outcome: Outcome) {
        // Positions index a list of at most `u32::MAX` variants: `Limits` caps a project far
        // below that.
        if let Ok(at) = u32::try_from(at) {
            if at < self.variants.len() as u32 {
                self.recorded.push((at, outcome));
            }
        }
    }

    /// How many variants have an outcome.
    pub fn len(&self) -> usize {
        self.recorded.len()
    }

    /// Whether no variant has an outcome.
    pub fn is_empty(&self) -> bool {
        self.recorded.is_empty()
    }

    /// Each variant with its outcome.
    pub fn iter(&self) -> impl Iterator<Item = (&VariantId, &Outcome)> + '_ {
        self.recorded
            .iter()
            .map(|(at, outcome)| (&self.variants[*at as usize], outcome))
    }

    /// The variants that have an outcome.
    pub fn keys(&self) -> impl Iterator<Item = &VariantId> + '_ {
        self.iter().map(|(variant, _)| variant)
    }

    /// The outcome of `variant`, if it has one (a linear search).
    pub fn get(&self, variant: &VariantId) -> Option<Outcome> {
        self.iter()
            .find(|(v, _)| *v == variant)
            .map(|(_, outcome)| *outcome)
    }
}
