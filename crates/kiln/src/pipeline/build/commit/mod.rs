//! The third phase of a build: what the run returned, folded chunk by chunk as chunks
//! finish ([`Commit::absorb`]), then committed once ([`Project::commit`]): outputs nobody
//! produces any more removed, `index.json` and `.kiln-stat` written, new artifacts saved,
//! and the report computed, in one place, from those values.

mod retire;
pub(crate) mod write;

use super::plan::{Mode, Outputs, Plan};
use super::run::Ran;
use crate::manifest::{PassSpec, ShaderSpec};
use crate::pipeline::engine::queries;
use crate::pipeline::engine::scope::Revisions;
use crate::pipeline::history::PassTally;
use crate::pipeline::out_dir::stat::OutputStats;
use crate::pipeline::out_dir::{IndexEntry, IndexFailure};
use crate::pipeline::report::{Cause, Outcomes, RECOMPILED_LISTED};
use crate::pipeline::{
    BuildReport, Diagnostic, Outcome, Project, ProjectError, Recompiled, Severity, Summary,
    VariantId,
};
use crate::store::ContentKey;
use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// What failed in a build: whole variants, and (variant, target) pairs of variants whose
/// other targets were built; with what `index.json` says of each failed pair. Counted here
/// and nowhere else.
#[derive(Default)]
pub(super) struct Failed {
    variants: BTreeSet<VariantId>,
    pairs: BTreeSet<(VariantId, &'static str)>,
    index: Vec<IndexFailure>,
}

impl Failed {
    /// Whether the output of `variant` for the target named `target` failed in this build.
    fn pair(&self, variant: &VariantId, target: &str) -> bool {
        self.variants.contains(variant)
            || crate::compile::Target::ALL
                .iter()
                .find(|t| t.name() == target)
                .is_some_and(|t| self.pairs.contains(&(variant.clone(), t.name())))
    }

    /// One target of `variant` failed with `d`; its other targets were built.
    fn target(&mut self, variant: &VariantId, target: crate::compile::Target, d: &Diagnostic) {
        self.pairs.insert((variant.clone(), target.name()));
        self.index
            .push(IndexFailure::new(variant, target.name(), d));
    }

    /// `variant` failed as a whole; `d`, an error, for the `targets` it names.
    fn variant(&mut self, variant: &VariantId, d: &Diagnostic, targets: &[&'static str]) {
        self.variants.insert(variant.clone());
        match d.target {
            Some(target) => self
                .index
                .push(IndexFailure::new(variant, target.name(), d)),
            None => self
                .index
                .extend(targets.iter().map(|t| IndexFailure::new(variant, t, d))),
        }
    }

    /// Variants that failed (for every target or some), and failed (variant, target) pairs.
    fn counts(&self, targets: usize) -> (usize, usize) {
        // Pairs are sorted by variant: a variant's failed targets are adjacent.
        let mut partly: Vec<&VariantId> = self
            .pairs
            .iter()
            .map(|(v, _)| v)
            .filter(|v| !self.variants.contains(*v))
            .collect();
        let pairs = partly.len();
        partly.dedup();
        (
            self.variants.len() + partly.len(),
            self.variants.len() * targets + pairs,
        )
    }

    /// The index's failures: sorted, each (variant, target) once.
    fn into_index(mut self) -> Vec<IndexFailure> {
        self.index.sort();
        self.index.dedup_by(|a, b| {
            (&a.shader, &a.pass, &a.keywords, &a.target)
                == (&b.shader, &b.pass, &b.keywords, &b.target)
        });
        self.index
    }
}

/// What the variants run so far returned, folded as each chunk finishes: a build of
/// 100,000 variants holds these (index entries with 32-byte hashes, names shared, and
/// their stats in the last build's table), never every variant's result until the end.
pub(super) struct Commit {
    outcomes: Outcomes,
    compiled: usize,
    cached: usize,
    deduplicated: usize,
    /// Variants re-verified without anything re-executed, and after something did.
    verified: usize,
    early_cutoff: usize,
    summary: Summary,
    recompiled: Vec<Recompiled>,
    /// Errors of failed variants, in the order they ran.
    errors: Vec<Diagnostic>,
    /// Why some variants' outputs could not be written (each such variant failed).
    write_errors: Vec<Diagnostic>,
    /// Store trouble met while the variants ran.
    store_warnings: Vec<Diagnostic>,
    /// The index entries of the variants built.
    entries: Vec<IndexEntry>,
    failed: Failed,
    /// Outputs written.
    written: usize,
    /// Compile times of the jobs compiled, for the remote cache.
    costs: Vec<(ContentKey, u64)>,
    /// The targets' names, in the manifest's order.
    targets: Vec<&'static str>,
    /// Per pass, what its variants that ran did, for the build's history record.
    tally: PassTally,
}

impl Commit {
    /// Nothing folded yet, for the variants `plan` runs.
    pub(super) fn new(plan: &mut Plan, targets: Vec<&'static str>) -> Self {
        let mut entries = Vec::new();
        if let Mode::Outputs(outputs) = &mut plan.mode {
            let count = plan.variants.len() * targets.len();
            entries.reserve_exact(count);
            outputs.last.stats.reserve(count);
        }
        Commit {
            outcomes: Outcomes::of(Arc::clone(&plan.variants)),
            compiled: 0,
            cached: 0,
            deduplicated: 0,
            verified: 0,
            early_cutoff: 0,
            summary: Summary::default(),
            recompiled: Vec::new(),
            errors: Vec::new(),
            write_errors: Vec::new(),
            store_warnings: Vec::new(),
            entries,
            failed: Failed::default(),
            written: 0,
            costs: Vec::new(),
            targets,
            tally: PassTally::default(),
        }
    }

    /// Folds what the variants of one chunk returned, the first of them at `first` in the
    /// plan's variants; records the stats of the outputs written or verified.
    pub(super) fn absorb(
        &mut self,
        project: &Project,
        plan: &mut Plan,
        first: usize,
        ran: Vec<Ran>,
    ) {
        let variants = Arc::clone(&plan.variants);
        let chunk = &variants[first..first + ran.len()];
        for (at, (variant, ran)) in chunk.iter().zip(ran).enumerate() {
            if let Some(outcome) = ran.outcome {
                self.outcomes.record(first + at, outcome);
            }
            self.store_warnings.extend(ran.warnings);
            let tally = self.tally.of(&variant.shader, &variant.pass);
            tally.ran += 1;
            tally.compile_us = tally.compile_us.saturating_add(ran.compile_us);
            self.costs.extend(ran.costs);
            let diagnostics = match ran.result {
                Ok(Ok(artifacts)) => {
                    self.count(project, plan, variant, ran.outcome, ran.inputs_reran);
                    let mut failed = false;
                    for d in artifacts.failed.iter() {
                        if let Some(target) = d.target {
                            self.failed.target(variant, target, d);
                            self.errors.push(d.clone());
                            failed = true;
                        }
                    }
                    if let (Some(written), Mode::Outputs(outputs)) = (ran.written, &mut plan.mode) {
                        failed |= written.is_err();
                        self.record_written(variant, written, &mut outputs.last.stats);
                    }
                    self.classify(failed, ran.outcome, ran.inputs_reran);
                    if failed {
                        self.tally.of(&variant.shader, &variant.pass).failed += 1;
                    }
                    continue;
                }
                Ok(Err(diagnostics)) => diagnostics.to_vec(),
                Err(engine) => vec![Diagnostic::error(engine.to_string())],
            };
            self.failed.variants.insert(variant.clone());
            self.summary.failed += 1;
            self.tally.of(&variant.shader, &variant.pass).failed += 1;
            for mut d in diagnostics {
                if d.variant.is_none() {
                    d.variant = Some(variant.to_string());
                }
                if d.severity == Severity::Error {
                    self.failed.variant(variant, &d, &self.targets);
                }
                self.errors.push(d);
            }
        }
    }

    /// Puts a variant that ran, and has artifacts, in its [`Summary`] class.
    fn classify(&mut self, failed: bool, outcome: Option<Outcome>, inputs_reran: bool) {
        let class = match outcome {
            _ if failed => &mut self.summary.failed,
            Some(Outcome::Compiled | Outcome::Deduplicated) => &mut self.summary.recompiled,
            None if inputs_reran => &mut self.summary.early_cutoff,
            Some(Outcome::Cached) | None => &mut self.summary.unchanged,
        };
        *class += 1;
    }

    /// Counts how a built variant got its artifacts (an up-to-date one has no outcome:
    /// re-verified, after something it depends on re-ran or not).
    fn count(
        &mut self,
        project: &Project,
        plan: &Plan,
        variant: &VariantId,
        outcome: Option<Outcome>,
        inputs_reran: bool,
    ) {
        if outcome.is_none() {
            match inputs_reran {
                true => self.early_cutoff += 1,
                false => self.verified += 1,
            }
        }
        let tally = self.tally.of(&variant.shader, &variant.pass);
        match outcome {
            Some(Outcome::Compiled) => tally.compiled += 1,
            Some(Outcome::Deduplicated) => tally.deduplicated += 1,
            Some(Outcome::Cached) | None => tally.cached += 1,
        }
        match outcome {
            Some(Outcome::Compiled) => {
                self.compiled += 1;
                if self.recompiled.len() < RECOMPILED_LISTED {
                    let (cause, reason) = project.reason(variant, plan);
                    self.recompiled.push(Recompiled {
                        variant: variant.clone(),
                        digest: digest_of(variant, &plan.revisions),
                        cause,
                        reason,
                    });
                }
            }
            Some(Outcome::Deduplicated) => self.deduplicated += 1,
            Some(Outcome::Cached) | None => self.cached += 1,
        }
    }

    /// Records one variant's outputs as written, or its failure to be written.
    fn record_written(
        &mut self,
        variant: &VariantId,
        written: write::WriteResult,
        stats: &mut OutputStats,
    ) {
        match written {
            Ok(written) => {
                self.entries.extend(written.entries);
                for (path, stat) in written.stats {
                    stats.record(&path, stat);
                }
                self.written += written.written;
            }
            Err(diagnostic) => {
                self.failed.variants.insert(variant.clone());
                let index = self
                    .targets
                    .iter()
                    .map(|t| IndexFailure::new(variant, t, &diagnostic));
                self.failed.index.extend(index);
                self.write_errors.push(diagnostic);
            }
        }
    }
}

impl Project {
    /// Commits a build whose variants all ran: writes what the outputs need, saves new
    /// artifacts, and computes the report. Even when writing outputs failed, what was
    /// compiled is saved.
    pub(super) fn commit(
        &mut self,
        plan: Plan,
        commit: Commit,
        started: Instant,
    ) -> Result<BuildReport, ProjectError> {
        // Before the marker goes: the spares are temporary files.
        self.spares.remove_all();
        let causes = self.causes(&plan, &commit.outcomes);
        drop(plan.pinned);
        let counts = self.events.take();
        let (failed, failed_outputs) = commit.failed.counts(commit.targets.len());
        let mut report = BuildReport {
            variants: plan.total,
            compiled: commit.compiled,
            cached: commit.cached,
            deduplicated: commit.deduplicated,
            failed,
            failed_outputs,
            outcomes: commit.outcomes,
            changed_files: plan.changed_files,
            manifest_changed: plan.manifest_changed,
            manifest_changes: plan.manifest_changes.clone(),
            causes,
            verified: commit.verified,
            early_cutoff: commit.early_cutoff,
            summary: commit.summary,
            evicted: counts.evicted + plan.evicted_before,
            recompiled: commit.recompiled,
            ..BuildReport::default()
        };
        let mut diagnostics = plan.warnings;
        diagnostics.extend(commit.errors);
        let ran_any = !plan.variants.is_empty();
        let (retired, provisional) = match plan.mode {
            Mode::Shard(shard) => {
                report.shard = Some(shard);
                (Ok(retire::Retired::default()), true)
            }
            Mode::Outputs(outputs) => {
                report.cached += outputs.current_variants;
                report.summary.unchanged += outputs.current_variants;
                let index = IndexParts {
                    entries: commit.entries,
                    failures: commit.failed,
                    revisions: &plan.revisions,
                };
                (self.write_index(*outputs, index), false)
            }
        };
        report.outputs_ready = started.elapsed();
        let saved = self
            .pool
            .install(|| self.db.context().flush_saves(&commit.costs, provisional));
        if ran_any {
            // The previous index and this build's last chunk were freed inside the arenas;
            // under `kiln watch` they would stay resident until the next edit. A no-op
            // build ran nothing and frees little: it skips the walk.
            super::release_free_memory();
        }
        let retired = retired?;
        report.outputs_written = commit.written;
        report.outputs_removed = retired.removed;
        report.packs_written = retired.packs_written;
        report.packs_failed = retired.packs_failed;
        diagnostics.extend(commit.write_errors);
        diagnostics.extend(retired.warnings);
        diagnostics.extend(plan.index_warnings);
        diagnostics.extend(commit.store_warnings);
        diagnostics.extend(saved);
        let mut report = self.finish_report(report, diagnostics, started)?;
        if !provisional {
            self.record_history(&mut report, &commit.tally);
        }
        Ok(report)
    }

    /// The report's last part: the remote's report and warnings, the diagnostics errors
    /// first, the wall time.
    fn finish_report(
        &self,
        mut report: BuildReport,
        mut diagnostics: Vec<Diagnostic>,
        started: Instant,
    ) -> Result<BuildReport, ProjectError> {
        if let Some(remote) = self.db.context().store.remote() {
            let remote = remote.take_report();
            diagnostics.extend(super::plan::remote::remote_warnings(&remote));
            report.remote = Some(remote);
        }
        diagnostics.sort_by_key(|d| std::cmp::Reverse(d.severity));
        report.diagnostics = diagnostics;
        report.elapsed = started.elapsed();
        Ok(report)
    }

    /// Removes what nobody produces any more and writes `index.json` and `.kiln-stat`;
    /// then the output directory's lock and its marker go.
    fn write_index(
        &mut self,
        outputs: Outputs,
        index: IndexParts<'_>,
    ) -> Result<retire::Retired, ProjectError> {
        let Outputs {
            lock,
            marker,
            last,
            current,
            ..
        } = outputs;
        let written = self.retire_and_index(last, current, index);
        if let Some(marker) = marker {
            crate::pipeline::out_dir::unmark_writing(&marker);
        }
        drop(lock);
        written
    }

    /// Why naga had to compile `variant` in this build: the cause (the changed file, the
    /// manifest, or [`NOT_IN_STORE`]) and the whole reason.
    fn reason(&self, variant: &VariantId, plan: &Plan) -> (String, String) {
        // Only an edit needs the variant's files; without one (a cold build), fetching them
        // would preprocess every variant again after the engine evicted its text.
        let pre = if plan.changed_files.is_empty() {
            None
        } else {
            self.db.get::<queries::PreprocessQ>(variant).ok()
        };
        if let Some(Ok(pre)) = pre {
            let files = pre.files();
            let changed: Vec<&PathBuf> = plan
                .changed_files
                .iter()
                .filter(|f| files.contains(f))
                .collect();
            if let (Some(first), Some(entry)) = (changed.first(), files.first()) {
                let mut reason = if *first == entry {
                    format!("{} changed", first.display())
                } else {
                    format!(
                        "{} changed (included by {})",
                        first.display(),
                        entry.display()
                    )
                };
                if changed.len() > 1 {
                    reason.push_str(&format!(" and {} more file(s)", changed.len() - 1));
                }
                return (first.display().to_string(), reason);
            }
        }
        if plan.manifest_changed {
            // The variant's own shader's entry first, else a project-wide field.
            let change = plan
                .manifest_changes
                .iter()
                .find(|c| c.shader.as_deref() == Some(&*variant.shader))
                .or_else(|| plan.manifest_changes.iter().find(|c| c.shader.is_none()));
            match change {
                Some(change) => (
                    format!("kiln.toml: {change}"),
                    format!("the manifest changed ({change})"),
                ),
                None => ("kiln.toml".to_owned(), "the manifest changed".to_owned()),
            }
        } else {
            (
                NOT_IN_STORE.to_owned(),
                "no artifact in the store".to_owned(),
            )
        }
    }
}

impl Project {
    /// Per cause of this build (each changed file, each changed manifest field), the
    /// variants it reaches and how many of them were recompiled.
    fn causes(&self, plan: &Plan, outcomes: &Outcomes) -> Vec<Cause> {
        let recompiled: Vec<&VariantId> = outcomes
            .iter()
            .filter(|(_, o)| matches!(o, Outcome::Compiled | Outcome::Deduplicated))
            .map(|(variant, _)| variant)
            .collect();
        let mut causes = Vec::new();
        for file in &plan.changed_files {
            let mut reached = 0;
            // A set: every recompiled variant is looked up in it, and a shared header has
            // as many readers as the project has passes.
            let mut readers: HashSet<(&str, &str)> = HashSet::new();
            for shader in &self.manifest.shaders {
                for pass in &shader.passes {
                    if self.closure_holds(shader, pass, file) {
                        reached += shader.variants.len();
                        readers.insert((&shader.name, &pass.name));
                    }
                }
            }
            // A file no variant reads (it left every closure) changed nothing built.
            if reached == 0 {
                continue;
            }
            let hit = recompiled
                .iter()
                .filter(|v| readers.contains(&(&*v.shader, &*v.pass)))
                .count();
            causes.push(Cause {
                what: file.to_string_lossy().replace('\\', "/"),
                recompiled: hit,
                unchanged: reached.saturating_sub(hit),
            });
        }
        for change in &plan.manifest_changes {
            let (reached, hit) = match &change.shader {
                Some(name) => {
                    let reached = self
                        .manifest
                        .shaders
                        .iter()
                        .find(|s| s.name == *name)
                        .map_or(0, |s| s.variants.len() * s.passes.len());
                    let hit = recompiled.iter().filter(|v| *v.shader == **name).count();
                    (reached, hit)
                }
                None => (self.manifest.variant_count(), recompiled.len()),
            };
            causes.push(Cause {
                what: format!("kiln.toml: {change}"),
                recompiled: hit,
                unchanged: reached.saturating_sub(hit),
            });
        }
        causes
    }

    /// Whether `file` is in the include closure of `shader`'s `pass` (under any keywords).
    fn closure_holds(&self, shader: &ShaderSpec, pass: &PassSpec, file: &Path) -> bool {
        match self
            .db
            .get::<queries::ClosureQ>(&queries::ClosureKey::of(pass, shader))
        {
            Ok(Ok(closure)) => {
                closure.files.iter().any(|f| f == file)
                    || closure.missing.iter().any(|m| m.path == file)
            }
            _ => pass.source == file,
        }
    }
}

/// The cause of a compile that no edit explains: the store did not have the artifact.
pub const NOT_IN_STORE: &str = "not in the store";

/// The digest of `variant`'s key at its shader's revision in this build (for logs).
fn digest_of(variant: &VariantId, revisions: &Revisions) -> String {
    revisions
        .get(&variant.shader)
        .and_then(|shader| queries::variant_key(variant, shader.revision.short()).ok())
        .map(|key| key.digest())
        .unwrap_or_default()
}

/// What the new index is made of besides the entries still current.
pub(super) struct IndexParts<'a> {
    /// The entries of the variants built in this build.
    entries: Vec<IndexEntry>,
    failures: Failed,
    /// For the revision a kept failed output failed at.
    revisions: &'a Revisions,
}
