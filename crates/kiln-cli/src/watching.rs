//! Watching a project: the file watcher, its events sorted into sources and outputs, the
//! manifest re-read, and the loop that brings the project up to date after each batch.
//! `kiln watch` and `kiln serve` share all of it and differ only in what "up to date" means
//! (a [`Rebuild`]): `watch` builds and writes outputs; `serve` fetches again the variants its
//! clients asked for and tells them what changed.

use crate::build::project_error;
use crate::render;
use kiln::pipeline::{Project, ProjectError};
use notify_debouncer_full::notify::event::{AccessKind, AccessMode};
use notify_debouncer_full::notify::{EventKind, RecursiveMode};
use notify_debouncer_full::{new_debouncer, DebounceEventResult, DebouncedEvent};
use parking_lot::RwLock;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// What bringing the project up to date means for one command.
pub trait Rebuild {
    /// Whether the project needs it after a batch of events (default: a build would do
    /// work).
    fn needed(&self, project: &Project) -> bool {
        project.is_dirty()
    }

    /// Brings the project up to date; `first_event` is when the batch's first file event
    /// happened (`None` for the first run). Called with the project locked for writing:
    /// nothing else reads it meanwhile.
    fn rebuild(
        &mut self,
        project: &mut Project,
        first_event: Option<Instant>,
    ) -> Result<(), ProjectError>;
}

/// What `kiln watch` and `kiln serve` share on their command lines: the project's threads
/// and memory, and how file events are gathered.
#[derive(clap::Args)]
pub struct WatchingArgs {
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

impl WatchingArgs {
    /// The project to watch, opened with `project`'s options and these. Hot reload keeps a
    /// failed variant's last good outputs (marked stale in the index).
    pub fn open(&self, project: &crate::build::ProjectArgs) -> Result<Project, ExitCode> {
        let mut options = project.options(self.jobs, self.max_memory).map_err(|e| {
            say!("error: {e}");
            ExitCode::from(2)
        })?;
        options.keep_failed_outputs = true;
        Project::open(&options).map_err(|e| project_error(&e))
    }
}

/// How the loop reports, besides what the [`Rebuild`] prints.
pub struct Settings {
    /// How long a burst of file events settles, in milliseconds.
    pub debounce_ms: u64,
    /// `{"batch":[paths]}` on stdout after each batch (tests wait for it).
    pub report_batches: bool,
    /// JSON on stdout instead of human lines.
    pub json: bool,
    /// The rebuild writes the output directory: it is made, watched, and outputs changed
    /// behind kiln's back are restored.
    pub outputs: bool,
}

enum Message {
    Files(DebounceEventResult),
    Stop,
}

/// Watches the project, runs `rebuild` once, then after every batch of changes, until
/// Ctrl-C (or SIGTERM); returns the process's exit code.
pub fn run(
    project: &Arc<RwLock<Project>>,
    settings: &Settings,
    rebuild: &mut dyn Rebuild,
) -> ExitCode {
    let (tx, rx) = mpsc::channel::<Message>();
    let stop = tx.clone();
    if let Err(e) = ctrlc::set_handler(move || {
        let _ = stop.send(Message::Stop);
    }) {
        say!("warning: cannot handle Ctrl-C ({e}); stop with a signal");
    }
    // Watching starts before the first build, so that no edit made during it is missed;
    // the debouncer stops watching when dropped, at the end of this function.
    let started = start_watching(&project.read(), settings.debounce_ms, settings.outputs, tx);
    let (_debouncer, dirs) = match started {
        Ok(started) => started,
        Err(code) => return code,
    };
    let mut session = Session {
        project: Arc::clone(project),
        dirs,
        report_batches: settings.report_batches,
        manifest_error: None,
        root_gone: false,
    };
    session.rebuild(rebuild, None);
    if !settings.json {
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
        if session.project.read().root_gone() || session.root_gone {
            say!(
                "error: the project directory {} was removed or replaced while watching; \
                 nothing there can be watched any more: start again",
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
            Ok(Message::Files(Ok(events))) => session.handle(&events, rebuild),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
    if !settings.json {
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
    outputs: bool,
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
    if outputs {
        let _ = std::fs::create_dir_all(project.out_dir());
    }
    let out = absolute(project.out_dir());
    if outputs && !out.starts_with(&root) {
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
    project: Arc<RwLock<Project>>,
    dirs: Dirs,
    report_batches: bool,
    /// The manifest's error, while it is broken: said once, not once per event.
    manifest_error: Option<String>,
    /// A build found the project directory gone.
    root_gone: bool,
}

impl Session {
    fn handle(&mut self, events: &[DebouncedEvent], rebuild: &mut dyn Rebuild) {
        let _batch = BatchReport::new(self.report_batches, events);
        let first_event = events.iter().map(|e| e.time).min();
        let changes = Changes::of(events, &self.dirs.out, &self.dirs.cache);
        {
            let shared = Arc::clone(&self.project);
            let mut project = shared.write();
            if changes.rescan {
                project.refresh_all_files();
                project.outputs_changed(&[PathBuf::new()]);
            }
            // Sources are re-read even when the manifest is broken: the edits wait in the
            // engine's inputs and are built once the manifest is fixed.
            project.refresh_files(&changes.sources);
            project.outputs_changed(&changes.outputs);
            let manifest_inputs = project.manifest().inputs();
            if changes.rescan
                || changes.sources.iter().any(|path| {
                    *path == self.dirs.manifest || manifest_inputs.iter().any(|i| i == path)
                })
            {
                self.reload_manifest(&mut project);
            }
        }
        if self.manifest_error.is_none() && rebuild.needed(&self.project.read()) {
            self.rebuild(rebuild, first_event);
        }
    }

    fn reload_manifest(&mut self, project: &mut Project) {
        match project.reload_manifest() {
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

    fn rebuild(&mut self, rebuild: &mut dyn Rebuild, first_event: Option<Instant>) {
        let mut project = self.project.write();
        match rebuild.rebuild(&mut project, first_event) {
            Ok(()) => {}
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
