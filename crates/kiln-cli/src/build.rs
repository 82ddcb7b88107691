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
    /// Remote cache: redis://[user:password@]host[:port][/db], rediss:// for TLS,
    /// redis+cluster://host1:port1,host2:port2 for a Redis Cluster (overrides
    /// `[cache] remote` in kiln.toml).
    #[arg(long, env = "KILN_REMOTE", value_name = "URL", hide_env_values = true)]
    pub remote: Option<String>,
    /// Use no remote cache, whatever kiln.toml says.
    #[arg(long, conflicts_with = "remote")]
    pub no_remote: bool,
    /// Upload to the remote cache (CI). Without it the remote is only read, so that a
    /// developer's machine never chooses what others get; a shard build uploads regardless.
    #[arg(long, env = "KILN_REMOTE_PUSH", conflicts_with = "remote_read_only", value_parser = clap::builder::BoolishValueParser::new())]
    pub remote_push: bool,
    /// Never upload, whatever else says so (also `[cache] read_only = true`).
    #[arg(long, env = "KILN_REMOTE_READ_ONLY", value_parser = clap::builder::BoolishValueParser::new())]
    pub remote_read_only: bool,
    /// Give up on a remote round trip (connecting, sending, the whole reply) after this
    /// many milliseconds (default 10000).
    #[arg(long, env = "KILN_REMOTE_TIMEOUT_MS", value_name = "MS")]
    pub remote_timeout_ms: Option<u64>,
    /// Reject remote values longer than this, unread (default 64M; K, M, G suffixes).
    #[arg(long, env = "KILN_REMOTE_MAX_VALUE_BYTES", value_name = "BYTES", value_parser = crate::gc::parse_size)]
    pub remote_max_value_bytes: Option<u64>,
}

/// The environment variable holding the remote cache's shared secret (never an argument:
/// a command line is visible to every user of the machine).
pub const REMOTE_KEY_VAR: &str = "KILN_REMOTE_KEY";

impl ProjectArgs {
    /// The library's options; an error (for exit code 2) when `KILN_REMOTE_KEY` is set but
    /// unusable.
    pub fn options(
        &self,
        jobs: Option<usize>,
        max_memory: Option<u64>,
    ) -> Result<BuildOptions, String> {
        let remote_key = match std::env::var_os(REMOTE_KEY_VAR) {
            // Empty is unset: CI systems pass an empty value where a secret is withheld
            // (pull requests from forks), and such a build only reads.
            None => None,
            Some(secret) if secret.is_empty() => None,
            Some(secret) => Some(
                kiln::store::remote::RemoteKey::from_secret(secret.as_encoded_bytes()).ok_or_else(
                    || {
                        format!(
                            "{REMOTE_KEY_VAR} is shorter than {} bytes: use a long random secret \
                             (e.g. `openssl rand -hex 32`)",
                            kiln::store::remote::RemoteKey::MIN_SECRET_BYTES
                        )
                    },
                )?,
            ),
        };
        Ok(BuildOptions {
            manifest: self.manifest.clone(),
            out_dir: self.out.clone(),
            cache_dir: self.cache_dir.clone(),
            jobs,
            max_memory,
            keep_failed_outputs: false,
            remote: self.remote.clone(),
            no_remote: self.no_remote,
            remote_push: self.remote_push,
            remote_read_only: self.remote_read_only,
            remote_timeout: self.remote_timeout_ms.map(std::time::Duration::from_millis),
            remote_max_value_bytes: self
                .remote_max_value_bytes
                .map(|bytes| usize::try_from(bytes).unwrap_or(usize::MAX)),
            remote_key,
            shard: None,
        })
    }
}

#[derive(clap::Args)]
pub struct BuildArgs {
    #[command(flatten)]
    pub project: ProjectArgs,
    /// Worker threads (default: one per core; at most 256).
    #[arg(long, short, value_parser = parse_jobs)]
    pub jobs: Option<usize>,
    /// Farm build: compile only shard I of N (0-based) of the distinct compile jobs, upload
    /// them to the remote cache, write no outputs.
    #[arg(
        long,
        env = "KILN_SHARD",
        value_name = "I/N",
        conflicts_with = "shard_count"
    )]
    pub shard: Option<kiln::shard::Shard>,
    /// Farm build of N shards, this one's index from `--shard-index` or
    /// JOB_COMPLETION_INDEX (a Kubernetes Indexed Job).
    #[arg(long, env = "KILN_SHARD_COUNT", value_name = "N")]
    pub shard_count: Option<usize>,
    /// This shard's index with `--shard-count` (0-based).
    #[arg(
        long,
        env = "JOB_COMPLETION_INDEX",
        value_name = "I",
        requires = "shard_count"
    )]
    pub shard_index: Option<usize>,
}

impl BuildArgs {
    /// The shard, from `--shard` or from `--shard-count` and the index.
    fn shard(&self) -> Result<Option<kiln::shard::Shard>, kiln::shard::ShardError> {
        match (self.shard, self.shard_count) {
            (Some(shard), _) => Ok(Some(shard)),
            (None, Some(count)) => {
                let index = self.shard_index.ok_or(kiln::shard::ShardError {
                    text: format!("?/{count}"),
                    problem: "--shard-count needs --shard-index or JOB_COMPLETION_INDEX",
                })?;
                kiln::shard::Shard::new(index, count).map(Some)
            }
            (None, None) => Ok(None),
        }
    }
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
    let mut options = match args.project.options(args.jobs, None) {
        Ok(options) => options,
        Err(e) => {
            say!("error: {e}");
            return ExitCode::from(2);
        }
    };
    options.shard = match args.shard() {
        Ok(shard) => shard,
        Err(e) => {
            say!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let mut project = match Project::open(&options) {
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
    // A shard exists to upload its share: one that could not is a failed job, for the job
    // engine to run again (the assembling build would compile the share itself).
    let shard_lost = report.shard.is_some()
        && report
            .remote
            .as_ref()
            .is_some_and(|r| r.upload_failed > 0 || r.unavailable.is_some());
    if shard_lost {
        say!("error: this shard could not upload its share to the remote cache");
    }
    if report.failed > 0 || report.packs_failed > 0 || shard_lost {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// The project and store of a command that builds nothing (`kiln report`, `kiln explain`).
#[derive(clap::Args)]
pub struct StoreArgs {
    /// The project manifest.
    #[arg(long, default_value = "kiln.toml")]
    pub manifest: PathBuf,
    /// Artifact store directory, which holds the build history (default: `.kiln/`).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
}

impl StoreArgs {
    /// The project, opened to be read: no remote cache is asked anything.
    pub fn open(&self) -> Result<Project, ExitCode> {
        let options = BuildOptions {
            manifest: self.manifest.clone(),
            cache_dir: self.cache_dir.clone(),
            no_remote: true,
            ..Default::default()
        };
        Project::open(&options).map_err(|e| project_error(&e))
    }
}

pub fn project_error(e: &ProjectError) -> ExitCode {
    match e {
        ProjectError::Manifest(m) => render::manifest_error(m),
        other => say!("error: {other}"),
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
        "packs_written": report.packs_written,
        "packs_failed": report.packs_failed,
        "elapsed_ms": report.elapsed.as_secs_f64() * 1000.0,
        "summary": {
            "failed": report.summary.failed,
            "recompiled": report.summary.recompiled,
            "early_cutoff": report.summary.early_cutoff,
            "unchanged": report.summary.unchanged,
        },
        "remote": report.remote.as_ref().map(|r| serde_json::json!({
            "url": r.url,
            "read_only": r.read_only,
            "keyed": r.keyed,
            "fetched": r.fetched,
            "missed": r.missed,
            "rejected": r.rejected,
            "uploaded": r.uploaded,
            "upload_failed": r.upload_failed,
            "read_failed": r.read_failed,
            "round_trips": r.round_trips,
            "unavailable": r.unavailable,
            "writes_refused": r.writes_refused,
        })),
        "shard": report.shard.as_ref().map(|s| serde_json::json!({
            "index": s.shard.index,
            "count": s.shard.count,
            "jobs": s.jobs,
            "mine": s.mine,
            "expected_imbalance": s.expected_imbalance,
            "recorded_costs": s.recorded_costs,
        })),
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
    say!(
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
    if report.packs_written > 0 {
        say!("{} pack(s) written", report.packs_written);
    }
    if let Some(shard) = &report.shard {
        say!(
            "shard {}: {} of {} distinct compile jobs (expected cost {:.2}x the mean shard's; {} costs recorded); no outputs written",
            shard.shard, shard.mine, shard.jobs, shard.expected_imbalance, shard.recorded_costs
        );
    }
    if let Some(remote) = &report.remote {
        say!(
            "remote {}{}{}: {} fetched, {} missing, {} rejected, {} uploaded, {} not uploaded, {} reads failed, {} round trips",
            remote.url,
            if remote.read_only { " (read-only)" } else { "" },
            if remote.keyed { " (keyed)" } else { "" },
            remote.fetched,
            remote.missed,
            remote.rejected,
            remote.uploaded,
            remote.upload_failed,
            remote.read_failed,
            remote.round_trips
        );
    }
}
