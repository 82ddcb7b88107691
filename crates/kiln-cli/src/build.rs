//! `kiln build`.

use crate::render;
use indicatif::{ProgressBar, ProgressStyle};
use kiln::pipeline::{BuildOptions, BuildReport, Progress, Project, ProjectError, Severity};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

/// Options shared by `build` and `watch`.
#[derive(clap::Args, Clone)]
pub struct ProjectArgs {
    /// The project manifest.
    #[arg(long, default_value = "kiln.toml")]
    pub manifest: PathBuf,
    /// Output directory (default: `out/` beside the manifest).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Artifact store directory (default: `.kiln/` beside the manifest).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Print one JSON object per build on stdout instead of a human summary.
    #[arg(long)]
    pub json: bool,
}

impl ProjectArgs {
    pub fn options(&self, jobs: Option<usize>, max_memory: Option<u64>) -> BuildOptions {
        BuildOptions {
            manifest: self.manifest.clone(),
            out_dir: self.out.clone(),
            cache_dir: self.cache_dir.clone(),
            jobs,
            max_memory,
            keep_failed_outputs: false,
        }
    }
}

#[derive(clap::Args)]
pub struct BuildArgs {
    #[command(flatten)]
    pub project: ProjectArgs,
    /// Worker threads (default: one per core; at most 256).
    #[arg(long, short, value_parser = parse_jobs)]
    pub jobs: Option<usize>,
}

/// The most worker threads `--jobs` accepts: each is an OS thread with its own stack, and
/// thousands of them only cost start-up time (10,000 took 93 s).
pub const MAX_JOBS: usize = 256;

/// `--jobs N`: 1 to [`MAX_JOBS`], with a clear message otherwise.
pub fn parse_jobs(text: &str) -> Result<usize, String> {
    let jobs: usize = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number of worker threads"))?;
    if (1..=MAX_JOBS).contains(&jobs) {
        Ok(jobs)
    } else {
        Err(format!("{jobs} worker threads: use 1 to {MAX_JOBS}"))
    }
}

pub fn run(args: &BuildArgs) -> ExitCode {
    let mut project = match Project::open(&args.project.options(args.jobs, None)) {
        Ok(project) => project,
        Err(e) => return project_error(&e),
    };
    let bar = (!args.project.json && std::io::stderr().is_terminal()).then(|| {
        let bar = ProgressBar::new(project.manifest().variant_count() as u64);
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{bar:40}] {pos}/{len} variants {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar
    });
    let progress = |p: Progress| {
        if let Some(bar) = &bar {
            bar.set_position(p.done as u64);
        }
    };
    let report = project.build(&progress);
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let report = match report {
        Ok(report) => report,
        Err(e) => return project_error(&e),
    };
    print_report(&project, &report, args.project.json);
    if report.failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

pub fn project_error(e: &ProjectError) -> ExitCode {
    match e {
        ProjectError::Manifest(m) => render::manifest_error(m),
        other => eprintln!("error: {other}"),
    }
    ExitCode::from(2)
}

pub fn report_json(report: &BuildReport) -> serde_json::Value {
    serde_json::json!({
        "variants": report.variants,
        "compiled": report.compiled,
        "cached": report.cached,
        "deduplicated": report.deduplicated,
        "failed": report.failed,
        "failed_outputs": report.failed_outputs,
        "outputs_written": report.outputs_written,
        "outputs_removed": report.outputs_removed,
        "elapsed_ms": report.elapsed.as_secs_f64() * 1000.0,
        "diagnostics": report.diagnostics.iter().map(|d| serde_json::json!({
            "severity": match d.severity { Severity::Error => "error", Severity::Warning => "warning" },
            "message": d.message,
            "file": d.location.as_ref().map(|l| l.file.display().to_string()),
            "line": d.location.as_ref().map(|l| l.line).filter(|line| *line > 0),
            "column": d.location.as_ref().filter(|l| l.line > 0).map(|l| l.columns.start + 1),
            "variant": d.variant,
            "target": d.target.map(|t| t.name()),
        })).collect::<Vec<_>>(),
    })
}

fn print_report(project: &Project, report: &BuildReport, json: bool) {
    if json {
        render::stdout_line(&report_json(report).to_string());
        return;
    }
    render::diagnostics(&project.manifest().root, &report.diagnostics);
    eprintln!(
        "{} variants: {} compiled, {} from cache, {} deduplicated, {} failed ({} outputs); {} outputs written, {} removed in {:.1} ms",
        report.variants,
        report.compiled,
        report.cached,
        report.deduplicated,
        report.failed,
        report.failed_outputs,
        report.outputs_written,
        report.outputs_removed,
        report.elapsed.as_secs_f64() * 1000.0
    );
}
