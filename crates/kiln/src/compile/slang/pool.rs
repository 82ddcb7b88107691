//! A pool of worker processes, each with a warm Slang session, shared by kiln's threads.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::protocol::{read_frame, write_frame, Hello, Reply};
use super::{SlangError, SlangRequest, SlangResponse, LIBRARY_ENV};

/// The environment variable naming the worker executable (see [`WorkerCommand::locate`]).
pub const WORKER_ENV: &str = "KILN_SLANG_WORKER";

/// The worker binary's file name.
const WORKER_NAME: &str = "kiln-slang-worker";

/// How much of a worker's stderr is kept for a crash message.
const STDERR_KEPT: usize = 4096;

/// How long a worker that closed its stdout may take to exit before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(5);

/// How to start a worker: a program, its arguments and extra environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerCommand {
    /// The executable.
    pub program: PathBuf,
    /// Its arguments (`["slang-worker"]` for the `kiln` binary itself).
    pub args: Vec<OsString>,
    /// Variables added to the inherited environment.
    pub env: Vec<(OsString, OsString)>,
    /// The working directory, else the pool's (Slang reads no file either way).
    pub current_dir: Option<PathBuf>,
}

impl WorkerCommand {
    /// `program` with no arguments.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            current_dir: None,
        }
    }

    /// Adds an argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Adds an environment variable.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// The `kiln-slang-worker` binary: the environment variable `KILN_SLANG_WORKER` if set,
    /// else next to the running executable, else in its parent directory (where cargo
    /// puts binaries when the running one is a test in `target/debug/deps/`).
    pub fn locate() -> Result<Self, SlangError> {
        if let Some(path) = std::env::var_os(WORKER_ENV).filter(|p| !p.is_empty()) {
            return Ok(Self::new(path));
        }
        let exe = std::env::current_exe().map_err(|e| SlangError::Worker {
            message: format!("cannot find the running executable: {e}"),
        })?;
        let name = format!("{WORKER_NAME}{}", std::env::consts::EXE_SUFFIX);
        let dirs = exe
            .parent()
            .into_iter()
            .chain(exe.parent().and_then(|d| d.parent()));
        for dir in dirs {
            let candidate = dir.join(&name);
            if candidate.is_file() {
                return Ok(Self::new(candidate));
            }
        }
        Err(SlangError::Worker {
            message: format!(
                "{name} is neither next to {} nor in its parent directory; set {WORKER_ENV}",
                exe.display()
            ),
        })
    }
}

/// The pool's size and deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolOptions {
    /// The most worker processes at once (kiln's jobs); at least 1.
    pub workers: usize,
    /// The longest one request may take before its worker is killed.
    pub deadline: Duration,
}

impl Default for PoolOptions {
    fn default() -> Self {
        Self {
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            deadline: Duration::from_secs(120),
        }
    }
}

/// Worker processes, started as needed up to [`PoolOptions::workers`] and kept warm;
/// [`SlangPool::compile`] may be called from any number of threads, and blocks while every
/// worker is busy. A worker that crashes or hangs fails its request and is replaced.
pub struct SlangPool {
    command: WorkerCommand,
    options: PoolOptions,
    state: Mutex<State>,
    freed: Condvar,
}

struct State {
    /// Set when a worker said the library cannot be loaded: every later request gets the
    /// same answer at once, rather than a worker start each.
    unusable: Option<SlangError>,
    idle: Vec<Worker>,
    /// Workers alive or being started, idle or not.
    live: usize,
}

impl SlangPool {
    /// A pool that starts workers with `command`; none is started yet.
    pub fn new(command: WorkerCommand, options: PoolOptions) -> Self {
        Self {
            command,
            options: PoolOptions {
                workers: options.workers.max(1),
                ..options
            },
            state: Mutex::new(State {
                unusable: None,
                idle: Vec::new(),
                live: 0,
            }),
            freed: Condvar::new(),
        }
    }

    /// The Slang version the workers run (starts a worker if none is idle).
    pub fn version(&self) -> Result<String, SlangError> {
        let lease = self.checkout()?;
        Ok(lease.worker().version.clone())
    }

    /// Compiles `request` in a worker. A crash or hang of the worker is an `Err` for this
    /// request alone. When a request for several targets crashes, each target is retried
    /// alone, so that a back end's crash fails its own target (as an `Err` output) and the
    /// others still compile.
    pub fn compile(&self, request: &SlangRequest) -> Result<SlangResponse, SlangError> {
        match self.compile_once(request) {
            Err(SlangError::Crashed { .. }) if request.targets.len() > 1 => {
                self.compile_targets_alone(request)
            }
            other => other,
        }
    }

    fn compile_targets_alone(&self, request: &SlangRequest) -> Result<SlangResponse, SlangError> {
        let mut merged = SlangResponse::default();
        for target in &request.targets {
            let alone = SlangRequest {
                targets: vec![target.clone()],
                ..request.clone()
            };
            match self.compile_once(&alone) {
                Ok(response) => {
                    merged.outputs.extend(response.outputs);
                    if !merged.diagnostics.contains(&response.diagnostics) {
                        merged.diagnostics.push_str(&response.diagnostics);
                    }
                    for (from, to) in [
                        (response.served, &mut merged.served),
                        (response.not_found, &mut merged.not_found),
                    ] {
                        for path in from {
                            if !to.contains(&path) {
                                to.push(path);
                            }
                        }
                    }
                }
                Err(crash @ SlangError::Crashed { .. }) => {
                    merged.outputs.push(Err(crash.to_string()))
                }
                Err(other) => return Err(other),
            }
        }
        Ok(merged)
    }

    fn compile_once(&self, request: &SlangRequest) -> Result<SlangResponse, SlangError> {
        let mut lease = self.checkout()?;
        let what = format!("{}, entry {}", request.main, request.entry);
        let (result, alive) = lease
            .worker_mut()
            .compile(request, &what, self.options.deadline);
        if !alive {
            // Dropping the worker kills it; the lease then frees its place for a new one.
            lease.worker = None;
        }
        result
    }

    /// An idle worker, or a new one if the pool is not full; else waits for one.
    fn checkout(&self) -> Result<Lease<'_>, SlangError> {
        let mut state = self.state.lock();
        loop {
            if let Some(error) = &state.unusable {
                return Err(error.clone());
            }
            if let Some(worker) = state.idle.pop() {
                return Ok(Lease {
                    pool: self,
                    worker: Some(worker),
                });
            }
            if state.live < self.options.workers {
                state.live += 1;
                break;
            }
            self.freed.wait(&mut state);
        }
        drop(state);
        // Started outside the lock: a start takes a quarter second. If it fails, the
        // lease's drop gives the place back.
        let mut lease = Lease {
            pool: self,
            worker: None,
        };
        match Worker::start(&self.command, self.options.deadline) {
            Ok(worker) => {
                lease.worker = Some(worker);
                Ok(lease)
            }
            Err(error) => {
                if matches!(
                    error,
                    SlangError::LibraryNotFound { .. } | SlangError::Library { .. }
                ) {
                    self.state.lock().unusable = Some(error.clone());
                }
                Err(error)
            }
        }
    }
}

impl Drop for SlangPool {
    fn drop(&mut self) {
        // Each worker is killed by its own drop.
        self.state.lock().idle.clear();
    }
}

/// One checked-out worker: returned to the pool on drop, or, when `worker` was taken (it
/// died), its place is freed.
struct Lease<'p> {
    pool: &'p SlangPool,
    worker: Option<Worker>,
}

impl Lease<'_> {
    fn worker(&self) -> &Worker {
        self.worker
            .as_ref()
            .unwrap_or_else(|| unreachable!("a lease holds a worker until it ends"))
    }

    fn worker_mut(&mut self) -> &mut Worker {
        self.worker
            .as_mut()
            .unwrap_or_else(|| unreachable!("a lease holds a worker until it ends"))
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        let mut state = self.pool.state.lock();
        match self.worker.take() {
            Some(worker) => state.idle.push(worker),
            None => state.live -= 1,
        }
        drop(state);
        self.pool.freed.notify_one();
    }
}

/// A worker process: its stdin, and its stdout's frames as a reader thread delivers them
/// (so that waiting for an answer can have a deadline).
struct Worker {
    child: Child,
    stdin: ChildStdin,
    frames: Receiver<std::io::Result<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    version: String,
}

impl Worker {
    /// Starts a worker and waits for its hello.
    fn start(command: &WorkerCommand, deadline: Duration) -> Result<Self, SlangError> {
        let mut process = Command::new(&command.program);
        if let Some(dir) = &command.current_dir {
            process.current_dir(dir);
        }
        // The library this process already loaded (for `version()`, which names the store's
        // namespace) is the one the workers must run, and naming it spares each worker the
        // search (a python3 start).
        let library_named = command.env.iter().any(|(key, _)| key == LIBRARY_ENV)
            || std::env::var_os(LIBRARY_ENV).is_some_and(|v| !v.is_empty());
        if let (false, Some(path)) = (library_named, super::compiler::loaded_library()) {
            process.env(LIBRARY_ENV, path);
        }
        let mut child = process
            .args(&command.args)
            .envs(command.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| SlangError::Worker {
                message: format!("cannot start {}: {e}", command.program.display()),
            })?;
        let (Some(stdin), Some(mut stdout), Some(mut stderr_pipe)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(SlangError::Worker {
                message: "the worker's pipes were not created".to_owned(),
            });
        };
        let (sender, frames) = mpsc::channel();
        std::thread::spawn(move || loop {
            match read_frame(&mut stdout) {
                Ok(Some(frame)) => {
                    if sender.send(Ok(frame)).is_err() {
                        return;
                    }
                }
                // The end of stdout: the worker exited (or crashed). Dropping the sender
                // tells the pool.
                Ok(None) => return,
                Err(e) => {
                    let _ = sender.send(Err(e));
                    return;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut chunk = [0u8; 1024];
            while let Ok(n @ 1..) = stderr_pipe.read(&mut chunk) {
                let mut kept = kept.lock();
                kept.extend_from_slice(&chunk[..n]);
                if kept.len() > STDERR_KEPT {
                    let excess = kept.len() - STDERR_KEPT;
                    kept.drain(..excess);
                }
            }
        });
        let mut worker = Self {
            child,
            stdin,
            frames,
            stderr,
            version: String::new(),
        };
        let hello = match worker.next_frame(Instant::now() + deadline) {
            Ok(frame) => frame,
            Err(Ending::TimedOut) => {
                return Err(SlangError::Worker {
                    message: format!("no hello within {} s", deadline.as_secs()),
                })
            }
            Err(Ending::Died(how)) => {
                return Err(SlangError::Worker {
                    message: format!(
                        "the worker ended ({how}) before its hello{}",
                        worker.stderr_suffix()
                    ),
                })
            }
        };
        let hello: Hello = serde_json::from_slice(&hello).map_err(|e| SlangError::Worker {
            message: format!("undecodable hello: {e}"),
        })?;
        worker.version = hello.version?;
        Ok(worker)
    }

    /// Sends `request` and waits for the answer. Returns the result, and whether the
    /// worker is still usable.
    fn compile(
        &mut self,
        request: &SlangRequest,
        what: &str,
        deadline: Duration,
    ) -> (Result<SlangResponse, SlangError>, bool) {
        let bytes = match serde_json::to_vec(request) {
            Ok(bytes) => bytes,
            Err(e) => {
                let message = format!("cannot encode the request: {e}");
                return (Err(SlangError::Worker { message }), true);
            }
        };
        self.stderr.lock().clear();
        let end = Instant::now() + deadline;
        let sent = write_frame(&mut self.stdin, &bytes).and_then(|()| self.stdin.flush());
        let answer = match sent {
            // Broken pipe: the worker is gone; its exit status says why.
            Err(_) => Err(Ending::Died(self.exit_description())),
            Ok(()) => self.receive(end),
        };
        match answer {
            Ok(Ok(response)) => (Ok(response), true),
            Ok(Err(e)) => (Err(e), true),
            Err(Ending::TimedOut) => (
                Err(SlangError::TimedOut {
                    seconds: deadline.as_secs(),
                    what: what.to_owned(),
                }),
                false,
            ),
            Err(Ending::Died(how)) => (
                Err(SlangError::Crashed {
                    how,
                    what: what.to_owned(),
                    stderr: String::from_utf8_lossy(&self.stderr.lock()).into_owned(),
                }),
                false,
            ),
        }
    }

    /// The reply to the request just sent: `Err` when the worker died or overran `end`.
    #[allow(clippy::type_complexity)]
    fn receive(&mut self, end: Instant) -> Result<Result<SlangResponse, SlangError>, Ending> {
        let header = self.next_frame(end)?;
        let reply: Reply = match serde_json::from_slice(&header) {
            Ok(reply) => reply,
            Err(e) => {
                // Out of protocol: the worker cannot be trusted any more.
                let _ = self.child.kill();
                return Err(Ending::Died(format!("undecodable reply: {e}")));
            }
        };
        match reply {
            Reply::Failed(e) => Ok(Err(e)),
            Reply::Done {
                outputs,
                diagnostics,
                served,
                not_found,
            } => {
                let mut decoded = Vec::with_capacity(outputs.len());
                for output in outputs {
                    decoded.push(match output {
                        Ok(_) => Ok(self.next_frame(end)?),
                        Err(message) => Err(message),
                    });
                }
                Ok(Ok(SlangResponse {
                    outputs: decoded,
                    diagnostics,
                    served,
                    not_found,
                }))
            }
        }
    }

    /// The next frame from the worker, by `end`. Kills the worker when it overruns.
    fn next_frame(&mut self, end: Instant) -> Result<Vec<u8>, Ending> {
        let left = end.saturating_duration_since(Instant::now());
        match self.frames.recv_timeout(left) {
            Ok(Ok(frame)) => Ok(frame),
            Ok(Err(_)) | Err(RecvTimeoutError::Disconnected) => {
                Err(Ending::Died(self.exit_description()))
            }
            Err(RecvTimeoutError::Timeout) => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                Err(Ending::TimedOut)
            }
        }
    }

    /// How the worker ended (`signal 11`, `exit status 1`), waiting a little for it to.
    fn exit_description(&mut self) -> String {
        let give_up = Instant::now() + EXIT_GRACE;
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < give_up => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                _ => {
                    let _ = self.child.kill();
                    break self.child.wait().ok();
                }
            }
        };
        status.map_or_else(|| "unknown status".to_owned(), describe)
    }

    fn stderr_suffix(&self) -> String {
        let stderr = String::from_utf8_lossy(&self.stderr.lock())
            .trim()
            .to_owned();
        if stderr.is_empty() {
            String::new()
        } else {
            format!(": {stderr}")
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Why no answer came.
enum Ending {
    TimedOut,
    Died(String),
}

fn describe(status: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("signal {signal}");
        }
    }
    match status.code() {
        Some(code) => format!("exit status {code}"),
        None => status.to_string(),
    }
}
