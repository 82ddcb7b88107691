//! `kiln watch`: rebuild in the same process on every change, reporting what moved and why.

use crate::build::{project_error, report_json, ProjectArgs};
use crate::render;
use kiln::pipeline::{BuildReport, Project};
use notify_debouncer_full::notify::event::{AccessKind, AccessMode};
use notify_debouncer_full::notify::{EventKind, RecursiveMode};
use notify_debouncer_full::{new_debouncer, DebounceEventResult, DebouncedEvent};
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
    /// After each batch of file events is handled (and its rebuild, if any, is reported),
    /// print `{"batch":[paths]}` on stdout: lets a test know that every event up to a
    /// marker file it wrote has been seen.
    #[arg(long, hide = true)]
    pub report_batches: bool,
}

enum Message {
    Files(DebounceEventResult),
    Stop,
}

pub fn run(args: &WatchArgs) -> ExitCode {
    let mut options = args.project.options(args.jobs, args.max_memory);
    // Hot reload keeps a failed variant's last good outputs (marked stale in the index).
    options.keep_failed_outputs = true;
    let mut project = match Project::open(&options) {
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
    // Outputs outside the project are watched too, so that one changed behind kiln's back
    // is restored.
    let _ = std::fs::create_dir_all(project.out_dir());
    let out_dir = absolute(project.out_dir());
    let cache_dir = absolute(project.cache_dir());
    if !out_dir.starts_with(&root) {
        if let Err(e) = debouncer.watch(&out_dir, RecursiveMode::Recursive) {
            eprintln!("warning: cannot watch {}: {e}", out_dir.display());
        }
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
    let mut manifest_error: Option<String> = None;
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
        let _batch = BatchReport::new(args.report_batches, &events);
        let first_event = events.iter().map(|e| e.time).min();
        let changes = Changes::of(&events, &out_dir, &cache_dir);
        if changes.rescan {
            project.refresh_all_files();
            project.outputs_changed(&[PathBuf::new()]);
        }
        // Sources are re-read even when the manifest is broken: the edits wait in the
        // engine's inputs and are built once the manifest is fixed.
        project.refresh_files(&changes.sources);
        project.outputs_changed(&changes.outputs);
        if changes.rescan || changes.sources.contains(&manifest_path) {
            match project.reload_manifest() {
                Ok(_) => manifest_error = None,
                Err(e) => {
                    // Said once per distinct error, not once per event.
                    let text = e.to_string();
                    if manifest_error.as_deref() != Some(text.as_str()) {
                        render::manifest_error(&e);
                        manifest_error = Some(text);
                    }
                }
            }
        }
        if manifest_error.is_some() || !project.is_dirty() {
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

/// A batch of file events sorted by what they may change.
struct Changes {
    /// Project paths (files or directories) that may hold sources or the manifest.
    sources: Vec<PathBuf>,
    /// Paths in the output directory, relative to it.
    outputs: Vec<PathBuf>,
    /// The watcher lost events: everything must be looked at again.
    rescan: bool,
}

impl Changes {
    fn of(events: &[DebouncedEvent], out_dir: &Path, cache_dir: &Path) -> Self {
        let mut changes = Changes {
            sources: Vec::new(),
            outputs: Vec::new(),
            rescan: false,
        };
        for event in events {
            changes.rescan |= event.need_rescan();
            // Reads (kiln's own included) change nothing; a closed write does.
            if matches!(event.kind, EventKind::Access(kind) if kind != AccessKind::Close(AccessMode::Write))
            {
                continue;
            }
            for path in &event.paths {
                if let Ok(relative) = path.strip_prefix(out_dir) {
                    changes.outputs.push(relative.to_owned());
                } else if !path.starts_with(cache_dir) {
                    changes.sources.push(path.clone());
                }
            }
        }
        changes
    }
}

/// Prints a batch's paths when dropped, so that it comes after the batch's rebuild report on
/// every path out of the loop body.
struct BatchReport(Option<Vec<String>>);

impl BatchReport {
    fn new(enabled: bool, events: &[DebouncedEvent]) -> Self {
        Self(enabled.then(|| {
            events
                .iter()
                .flat_map(|e| e.event.paths.iter())
                .map(|p| p.display().to_string())
                .collect()
        }))
    }
}

impl Drop for BatchReport {
    fn drop(&mut self) {
        if let Some(paths) = self.0.take() {
            println!("{}", serde_json::json!({ "batch": paths }));
        }
    }
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
