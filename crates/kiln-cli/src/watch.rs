//! `kiln watch`: rebuild in the same process on every change, reporting what moved and why.

use crate::build::{project_error, report_json, ProjectArgs};
use crate::render;
use kiln::pipeline::{BuildReport, Project, ProjectError};
use notify_debouncer_full::notify::event::{AccessKind, AccessMode};
use notify_debouncer_full::notify::{EventKind, RecursiveMode};
use notify_debouncer_full::{new_debouncer, DebounceEventResult, DebouncedEvent};
use std::collections::BTreeSet;
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
    /// Byte budget for compiled artifacts, pending store saves and preprocessed texts kept
    /// in memory (split 1/2, 1/4, 1/4); evicted ones are reloaded from the store, never
    /// recompiled. Per-variant records (engine memos, index entries) come on top.
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
    let mut options = match args.project.options(args.jobs, args.max_memory) {
        Ok(options) => options,
        Err(e) => {
            say!("error: {e}");
            return ExitCode::from(2);
        }
    };
    // Hot reload keeps a failed variant's last good outputs (marked stale in the index).
    options.keep_failed_outputs = true;
    let project = match Project::open(&options) {
        Ok(project) => project,
        Err(e) => return project_error(&e),
    };
    let (tx, rx) = mpsc::channel::<Message>();
    let stop = tx.clone();
    if let Err(e) = ctrlc::set_handler(move || {
        let _ = stop.send(Message::Stop);
    }) {
        say!("warning: cannot handle Ctrl-C ({e}); stop with a signal");
    }
    // Watching starts before the first build, so that no edit made during it is missed;
    // the debouncer stops watching when dropped, at the end of this function.
    let (_debouncer, dirs) = match start_watching(&project, args.debounce_ms, tx) {
        Ok(started) => started,
        Err(code) => return code,
    };
    let mut session = Session {
        project,
        dirs,
        json: args.project.json,
        report_batches: args.report_batches,
        manifest_error: None,
        root_gone: false,
    };
    session.rebuild(None);
    if !session.json {
        say!("watching {} (Ctrl-C to stop)", session.dirs.root.display());
    }
    // Ctrl-C is only read between rebuilds, so a rebuild always finishes: every output and
    // the index are written atomically, and nothing is left half written.
    loop {
        let message = rx.recv_timeout(ROOT_CHECK_INTERVAL);
        // The watches hang on the root directory's inode: once it is removed, or replaced by
        // a new directory of the same name, no event will ever come again. Looked at before
        // the events are handled (a rebuild there would make the project directory again),
        // and by every build before it makes anything.
        if session.project.root_gone() || session.root_gone {
            say!(
                "error: the project directory {} was removed or replaced while watching; \
                 nothing there can be watched any more: start `kiln watch` again",
                session.dirs.root.display()
            );
            return ExitCode::from(2);
        }
        match message {
            Ok(Message::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Ok(Message::Files(Err(errors))) => {
                for e in errors {
                    say!("warning: file watcher: {e}");
                }
            }
            Ok(Message::Files(Ok(events))) => session.handle(&events),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
    if !session.json {
        say!("stopped");
    }
    ExitCode::SUCCESS
}

/// How often the project root is looked at when no event comes (its removal may send none
/// the watcher passes on).
const ROOT_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// The directories a watch session tells apart, absolute.
struct Dirs {
    root: PathBuf,
    manifest: PathBuf,
    out: PathBuf,
    cache: PathBuf,
}

type Watcher = notify_debouncer_full::Debouncer<
    notify_debouncer_full::notify::RecommendedWatcher,
    notify_debouncer_full::RecommendedCache,
>;

/// Watches the project root, and the output directory when it lies outside, so that an
/// output changed behind kiln's back is restored.
fn start_watching(
    project: &Project,
    debounce_ms: u64,
    tx: mpsc::Sender<Message>,
) -> Result<(Watcher, Dirs), ExitCode> {
    let mut debouncer = new_debouncer(
        Duration::from_millis(debounce_ms),
        None,
        move |result: DebounceEventResult| {
            let _ = tx.send(Message::Files(result));
        },
    )
    .map_err(|e| {
        say!("error: cannot watch files: {e}");
        ExitCode::from(2)
    })?;
    let root = project.manifest().root.clone();
    debouncer
        .watch(&root, RecursiveMode::Recursive)
        .map_err(|e| {
            say!("error: cannot watch {}: {e}", root.display());
            ExitCode::from(2)
        })?;
    let _ = std::fs::create_dir_all(project.out_dir());
    let out = absolute(project.out_dir());
    if !out.starts_with(&root) {
        if let Err(e) = debouncer.watch(&out, RecursiveMode::Recursive) {
            say!("warning: cannot watch {}: {e}", out.display());
        }
    }
    let dirs = Dirs {
        manifest: absolute(&project.manifest().path),
        cache: absolute(project.cache_dir()),
        out,
        root,
    };
    Ok((debouncer, dirs))
}

/// A running watch: the project and what the loop remembers between batches.
struct Session {
    project: Project,
    dirs: Dirs,
    json: bool,
    report_batches: bool,
    /// The manifest's error, while it is broken: said once, not once per event.
    manifest_error: Option<String>,
    /// A build found the project directory gone.
    root_gone: bool,
}

impl Session {
    fn handle(&mut self, events: &[DebouncedEvent]) {
        let _batch = BatchReport::new(self.report_batches, events);
        let first_event = events.iter().map(|e| e.time).min();
        let changes = Changes::of(events, &self.dirs.out, &self.dirs.cache);
        if changes.rescan {
            self.project.refresh_all_files();
            self.project.outputs_changed(&[PathBuf::new()]);
        }
        // Sources are re-read even when the manifest is broken: the edits wait in the
        // engine's inputs and are built once the manifest is fixed.
        self.project.refresh_files(&changes.sources);
        self.project.outputs_changed(&changes.outputs);
        if changes.rescan || changes.sources.contains(&self.dirs.manifest) {
            self.reload_manifest();
        }
        if self.manifest_error.is_none() && self.project.is_dirty() {
            self.rebuild(first_event);
        }
    }

    fn reload_manifest(&mut self) {
        match self.project.reload_manifest() {
            Ok(_) => self.manifest_error = None,
            Err(e) => {
                let text = e.to_string();
                if self.manifest_error.as_deref() != Some(text.as_str()) {
                    render::manifest_error(&e);
                    self.manifest_error = Some(text);
                }
            }
        }
    }

    fn rebuild(&mut self, first_event: Option<Instant>) {
        let build_started = Instant::now();
        match self.project.build(&|_| {}) {
            Ok(report) => {
                // From the first file event to the moment every output was written.
                let latency = first_event.map(|event| {
                    build_started.saturating_duration_since(event) + report.outputs_ready
                });
                print_rebuild(&self.project, &report, latency, self.json)
            }
            // Said once, by the loop, which stops.
            Err(ProjectError::RootGone { .. }) => self.root_gone = true,
            Err(e) => {
                project_error(&e);
            }
        }
    }
}

/// A batch of file events sorted by what they may change, each path once (one write is
/// several events).
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
        let mut sources = BTreeSet::new();
        let mut outputs = BTreeSet::new();
        for event in events {
            changes.rescan |= event.need_rescan();
            // Reads (kiln's own included) change nothing; a closed write does.
            if matches!(event.kind, EventKind::Access(kind) if kind != AccessKind::Close(AccessMode::Write))
            {
                continue;
            }
            for path in &event.paths {
                if let Ok(relative) = path.strip_prefix(out_dir) {
                    outputs.insert(relative.to_owned());
                } else if !path.starts_with(cache_dir) {
                    sources.insert(path.clone());
                }
            }
        }
        changes.sources = sources.into_iter().collect();
        changes.outputs = outputs.into_iter().collect();
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
            render::stdout_line(&serde_json::json!({ "batch": paths }).to_string());
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
        render::stdout_line(&value.to_string());
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
        say!("changed: {}", files.join(", "));
    }
    for r in &report.recompiled {
        say!("  recompiled {} ({}): {}", r.variant, r.digest, r.reason);
    }
    if report.compiled > report.recompiled.len() {
        say!(
            "  ... and {} more recompiled",
            report.compiled - report.recompiled.len()
        );
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
    if report.packs_written > 0 {
        say!("{} pack(s) replaced", report.packs_written);
    }
}
