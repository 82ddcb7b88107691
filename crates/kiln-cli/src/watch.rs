//! `kiln watch`: rebuild in the same process on every change, reporting what moved and why.

use crate::build::{project_error, report_json, ProjectArgs};
use crate::render;
use kiln::pipeline::{BuildReport, Project};
use notify_debouncer_full::notify::{EventKind, RecursiveMode};
use notify_debouncer_full::{new_debouncer, DebounceEventResult};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct WatchArgs {
    #[command(flatten)]
    pub project: ProjectArgs,
    /// Worker threads (default: one per core).
    #[arg(long, short, value_parser = crate::build::parse_jobs)]
    pub jobs: Option<usize>,
    /// Byte budget for compiled artifacts and preprocessed texts kept in memory; evicted
    /// ones are reloaded from the store, never recompiled.
    #[arg(long)]
    pub max_memory: Option<u64>,
    /// How long to wait for a burst of file events to settle, in milliseconds.
    #[arg(long, default_value_t = 30)]
    pub debounce_ms: u64,
}

enum Message {
    Files(DebounceEventResult),
    Stop,
}

pub fn run(args: &WatchArgs) -> ExitCode {
    let mut project = match Project::open(&args.project.options(args.jobs, args.max_memory)) {
        Ok(project) => project,
        Err(e) => return project_error(&e),
    };
    let json = args.project.json;

    let (tx, rx) = mpsc::channel::<Message>();
    let stop = tx.clone();
    if let Err(e) = ctrlc::set_handler(move || {
        let _ = stop.send(Message::Stop);
    }) {
        eprintln!("warning: cannot handle Ctrl-C ({e}); stop with a signal");
    }
    let mut debouncer = match new_debouncer(
        Duration::from_millis(args.debounce_ms),
        None,
        move |result: DebounceEventResult| {
            let _ = tx.send(Message::Files(result));
        },
    ) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: cannot watch files: {e}");
            return ExitCode::from(2);
        }
    };
    let root = project.manifest().root.clone();
    if let Err(e) = debouncer.watch(&root, RecursiveMode::Recursive) {
        eprintln!("error: cannot watch {}: {e}", root.display());
        return ExitCode::from(2);
    }
    // Watching starts before the first build, so that no edit made during it is missed.
    match project.build(&|_| {}) {
        Ok(report) => print_rebuild(&project, &report, None, json),
        Err(e) => {
            project_error(&e);
        }
    }
    if !json {
        eprintln!("watching {} (Ctrl-C to stop)", root.display());
    }

    let manifest_path = absolute(&project.manifest().path);
    let (out_dir, cache_dir) = (absolute(project.out_dir()), absolute(project.cache_dir()));
    // Ctrl-C is only read between rebuilds, so a rebuild always finishes: every output and
    // the index are written atomically, and nothing is left half written.
    while let Ok(message) = rx.recv() {
        let events = match message {
            Message::Stop => break,
            Message::Files(Err(errors)) => {
                for e in errors {
                    eprintln!("warning: file watcher: {e}");
                }
                continue;
            }
            Message::Files(Ok(events)) => events,
        };
        let first_event = events.iter().map(|e| e.time).min();
        // Someone deleted an output: the next build checks the outputs on disk again.
        let outputs_removed = events.iter().any(|e| {
            matches!(e.event.kind, EventKind::Remove(_))
                && e.event.paths.iter().any(|p| p.starts_with(&out_dir))
        });
        if outputs_removed {
            project.outputs_touched();
        }
        let paths: Vec<PathBuf> = events
            .into_iter()
            .flat_map(|e| e.event.paths)
            .filter(|p| !p.starts_with(&out_dir) && !p.starts_with(&cache_dir))
            .collect();
        if paths.contains(&manifest_path) {
            if let Err(e) = project.reload_manifest() {
                render::manifest_error(&e);
                continue;
            }
        }
        project.refresh_files(&paths);
        if !project.is_dirty() {
            continue;
        }
        let build_started = Instant::now();
        match project.build(&|_| {}) {
            Ok(report) => {
                // From the first file event to the moment every output was written.
                let latency = first_event.map(|event| {
                    build_started.saturating_duration_since(event) + report.outputs_ready
                });
                print_rebuild(&project, &report, latency, json)
            }
            Err(e) => {
                project_error(&e);
            }
        }
    }
    if !json {
        eprintln!("stopped");
    }
    ExitCode::SUCCESS
}

fn absolute(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

fn print_rebuild(project: &Project, report: &BuildReport, latency: Option<Duration>, json: bool) {
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
        value["recompiled"] = report
            .recompiled
            .iter()
            .map(|r| {
                serde_json::json!({
                    "variant": r.variant.to_string(),
                    "digest": r.digest,
                    "reason": r.reason,
                })
            })
            .collect();
        println!("{value}");
        return;
    }
    render::diagnostics(&project.manifest().root, &report.diagnostics);
    if !report.changed_files.is_empty() || report.manifest_changed {
        let mut files: Vec<String> = report
            .changed_files
            .iter()
            .map(|f| f.display().to_string())
            .collect();
        if report.manifest_changed {
            files.push("kiln.toml".into());
        }
        eprintln!("changed: {}", files.join(", "));
    }
    for r in &report.recompiled {
        eprintln!("  recompiled {} ({}): {}", r.variant, r.digest, r.reason);
    }
    let latency = latency_ms
        .map(|ms| format!(", {ms:.1} ms from the file event"))
        .unwrap_or_default();
    eprintln!(
        "{} variants: {} re-verified, {} recompiled, {} unchanged by early cutoff, {} failed; {} outputs written, {} removed{latency}",
        report.variants,
        report.verified,
        report.compiled,
        report.early_cutoff,
        report.failed,
        report.outputs_written,
        report.outputs_removed,
    );
}
