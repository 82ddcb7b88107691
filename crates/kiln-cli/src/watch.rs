//! `kiln watch`: rebuild in the same process on every change, reporting what moved and why.

use crate::build::{report_json, ProjectArgs};
use crate::render;
use crate::watching::{self, Rebuild};
use kiln::pipeline::{BuildReport, Project, ProjectError};
use parking_lot::RwLock;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct WatchArgs {
    #[command(flatten)]
    pub project: ProjectArgs,
    #[command(flatten)]
    pub watching: watching::WatchingArgs,
    /// List every recompiled variant with its reason under its cause.
    #[arg(long, short, conflicts_with = "quiet")]
    pub verbose: bool,
    /// Print only errors and each rebuild's summary line.
    #[arg(long, short)]
    pub quiet: bool,
}

pub fn run(args: &WatchArgs) -> ExitCode {
    let project = match args.watching.open(&args.project) {
        Ok(project) => project,
        Err(code) => return code,
    };
    let settings = watching::Settings {
        debounce_ms: args.watching.debounce_ms,
        report_batches: args.watching.report_batches,
        json: args.project.json,
        outputs: true,
    };
    let project = Arc::new(RwLock::new(project));
    watching::run(
        &project,
        &settings,
        &mut Builds {
            json: args.project.json,
            detail: if args.quiet {
                Detail::Quiet
            } else if args.verbose {
                Detail::Verbose
            } else {
                Detail::Causes
            },
        },
    )
}

/// `kiln watch`'s rebuild: a build, its outputs written, and its report.
struct Builds {
    json: bool,
    detail: Detail,
}

/// How much a rebuild's human report says.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Detail {
    /// The summary line (and errors).
    Quiet,
    /// One line per cause (a changed file, the manifest): how many variants it recompiled.
    Causes,
    /// Each cause's variants too.
    Verbose,
}

impl Rebuild for Builds {
    fn rebuild(
        &mut self,
        project: &mut Project,
        first_event: Option<Instant>,
    ) -> Result<(), ProjectError> {
        let build_started = Instant::now();
        let report = project.build(&|_| {})?;
        // From the first file event to the moment every output was written.
        let latency = first_event
            .map(|event| build_started.saturating_duration_since(event) + report.outputs_ready);
        print_rebuild(project, &report, latency, self.json, self.detail);
        Ok(())
    }
}

fn print_rebuild(
    project: &Project,
    report: &BuildReport,
    latency: Option<Duration>,
    json: bool,
    detail: Detail,
) {
    let latency_ms = latency.map(|t| t.as_secs_f64() * 1000.0);
    if json {
        let mut value = report_json(report);
        value["files_changed"] = report
            .changed_files
            .iter()
            .map(|f| f.display().to_string())
            .collect();
        value["manifest_changed"] = report.manifest_changed.into();
        value["verified"] = report.verified.into();
        value["early_cutoff"] = report.early_cutoff.into();
        value["evicted"] = report.evicted.into();
        value["event_to_outputs_ms"] = latency_ms.into();
        value["manifest_changes"] = report
            .manifest_changes
            .iter()
            .map(|c| c.to_string())
            .collect();
        value["causes"] = report
            .causes
            .iter()
            .map(|c| {
                serde_json::json!({
                    "cause": c.what,
                    "recompiled": c.recompiled,
                    "unchanged": c.unchanged,
                })
            })
            .collect();
        value["recompiled"] = report
            .recompiled
            .iter()
            .map(|r| {
                serde_json::json!({
                    "variant": r.variant.to_string(),
                    "digest": r.digest,
                    "cause": r.cause,
                    "reason": r.reason,
                })
            })
            .collect();
        render::stdout_line(&value.to_string());
        return;
    }
    render::diagnostics(&project.manifest().root, &report.diagnostics);
    // The first build (no event) is one summary line: every variant's cause is the same.
    if latency.is_some() && detail != Detail::Quiet {
        print_causes(report, detail);
    }
    let latency = latency_ms
        .map(|ms| format!(", {ms:.1} ms from the file event"))
        .unwrap_or_default();
    // Four classes, each variant in one: the line adds up to the variants built.
    let summary = &report.summary;
    say!(
        "{} variants: {} recompiled, {} unchanged by early cutoff, {} unchanged, {} failed ({} outputs); {} outputs written, {} removed{latency}",
        summary.total(),
        summary.recompiled,
        summary.early_cutoff,
        summary.unchanged,
        summary.failed,
        report.failed_outputs,
        report.outputs_written,
        report.outputs_removed,
    );
    if report.packs_written > 0 && detail != Detail::Quiet {
        let verb = if latency_ms.is_some() {
            "replaced"
        } else {
            "written"
        };
        say!("{} pack(s) {verb}", report.packs_written);
    }
}

/// What changed, then one line per cause (a changed file, a changed manifest field) with
/// the variants it reaches, recompiled and unchanged, and, verbose, each recompiled variant
/// with its reason under its first cause; compiles no edit explains (a store that lost an
/// artifact) last.
fn print_causes(report: &BuildReport, detail: Detail) {
    let mut files: Vec<String> = report
        .changed_files
        .iter()
        .map(|f| f.display().to_string())
        .collect();
    if report.manifest_changed {
        files.push("kiln.toml".into());
    }
    if !files.is_empty() {
        say!("changed: {}", files.join(", "));
    }
    let listed_under = |cause: &str| -> Vec<&kiln::pipeline::Recompiled> {
        report
            .recompiled
            .iter()
            .filter(|r| r.cause == cause)
            .collect()
    };
    for cause in &report.causes {
        say!(
            "  {} -> {} recompiled, {} unchanged",
            cause.what,
            cause.recompiled,
            cause.unchanged
        );
        if detail == Detail::Verbose {
            for r in listed_under(&cause.what) {
                say!("    {} ({}): {}", r.variant, r.digest, r.reason);
            }
        }
    }
    // Compiles whose cause is none of the above (the store lost an artifact).
    let mut others: Vec<(&str, Vec<&kiln::pipeline::Recompiled>)> = Vec::new();
    for r in &report.recompiled {
        if report.causes.iter().any(|c| c.what == r.cause) {
            continue;
        }
        match others.iter_mut().find(|(cause, _)| *cause == r.cause) {
            Some((_, variants)) => variants.push(r),
            None => others.push((&r.cause, vec![r])),
        }
    }
    for (cause, variants) in &others {
        say!("  {cause} -> {} recompiled", variants.len());
        if detail == Detail::Verbose {
            for r in variants {
                say!("    {} ({}): {}", r.variant, r.digest, r.reason);
            }
        }
    }
    if report.compiled > report.recompiled.len() && detail == Detail::Verbose {
        say!(
            "    ... and {} more recompiled",
            report.compiled - report.recompiled.len()
        );
    }
}
