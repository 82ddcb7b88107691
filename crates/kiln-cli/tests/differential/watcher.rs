//! One long-running `kiln watch --json --report-batches` (or `kiln serve`, the same loop),
//! synchronised on marker files.

use serde_json::Value;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long a marker may take to come back before the watcher counts as stuck.
const SYNC_TIMEOUT: Duration = Duration::from_secs(10);

pub struct Watch {
    child: Child,
    lines: Receiver<String>,
    root: PathBuf,
    stderr_log: PathBuf,
}

impl Watch {
    /// Starts `kiln watch` and waits for its first build's report, which it returns.
    pub fn start(manifest: &Path, out: &Path, stderr_log: &Path) -> Result<(Watch, Value), String> {
        let args: [&OsStr; 5] = [
            "watch".as_ref(),
            "--json".as_ref(),
            "--report-batches".as_ref(),
            "--out".as_ref(),
            out.as_os_str(),
        ];
        let mut watch = Watch::spawn(&args, manifest, stderr_log)?;
        let report = watch.first_report()?;
        Ok((watch, report))
    }

    /// `kiln ARGS --manifest MANIFEST`, its stdout lines read on a thread.
    fn spawn(args: &[&OsStr], manifest: &Path, stderr_log: &Path) -> Result<Watch, String> {
        let root = manifest.parent().unwrap().to_owned();
        std::fs::create_dir_all(root.join(".sync")).unwrap();
        let stderr = std::fs::File::create(stderr_log).unwrap();
        let mut child = Command::new(super::kiln_bin())
            .args(args)
            .arg("--manifest")
            .arg(manifest)
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .spawn()
            .map_err(|e| format!("cannot start kiln {:?}: {e}", args.first()))?;
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Watch {
            child,
            lines: rx,
            root,
            stderr_log: stderr_log.to_owned(),
        })
    }

    /// The first line that is not a batch: the first build's (or preparation's) report.
    fn first_report(&mut self) -> Result<Value, String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match self.next_line(deadline)? {
                v if v.get("batch").is_some() => continue,
                report => return Ok(report),
            }
        }
    }

    /// Starts `kiln serve` (on any free loopback port, with its own store and output
    /// directory) and waits for its first report; returns it and its address.
    pub fn start_serve(
        manifest: &Path,
        cache: &Path,
        out: &Path,
        stderr_log: &Path,
    ) -> Result<(Watch, String), String> {
        let args: [&OsStr; 9] = [
            "serve".as_ref(),
            "--json".as_ref(),
            "--report-batches".as_ref(),
            "--listen".as_ref(),
            "127.0.0.1:0".as_ref(),
            "--cache-dir".as_ref(),
            cache.as_os_str(),
            "--out".as_ref(),
            out.as_os_str(),
        ];
        let mut serve = Watch::spawn(&args, manifest, stderr_log)?;
        let deadline = Instant::now() + Duration::from_secs(60);
        let listening = serve.next_line(deadline)?;
        let address = listening["listening"]
            .as_str()
            .ok_or_else(|| format!("kiln serve said {listening} first"))?
            .to_owned();
        serve.first_report()?;
        Ok((serve, address))
    }

    fn next_line(&mut self, deadline: Instant) -> Result<Value, String> {
        loop {
            let wait = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(wait) {
                Ok(line) => match serde_json::from_str::<Value>(&line) {
                    Ok(v) => return Ok(v),
                    Err(_) => continue,
                },
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!(
                        "kiln watch sent nothing for {:?} (alive: {}); stderr: {}",
                        SYNC_TIMEOUT,
                        self.alive(),
                        self.stderr_tail()
                    ))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(Duration::from_millis(50));
                    return Err(format!(
                        "kiln watch died ({}); stderr: {}",
                        self.child
                            .try_wait()
                            .ok()
                            .flatten()
                            .map(|s| s.to_string())
                            .unwrap_or_else(|| "stdout closed".to_owned()),
                        self.stderr_tail()
                    ));
                }
            }
        }
    }

    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn stderr_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr_log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    /// Writes the marker `.sync/<name>` and reads stdout until a batch naming it: every
    /// event before the marker has then been handled. Returns the rebuild reports seen on
    /// the way.
    pub fn sync(&mut self, name: &str) -> Result<Vec<Value>, String> {
        let marker = self.root.join(".sync").join(name);
        std::fs::write(&marker, name).unwrap();
        let suffix = format!("/.sync/{name}");
        let deadline = Instant::now() + SYNC_TIMEOUT;
        let mut reports = Vec::new();
        loop {
            let value = self
                .next_line(deadline)
                .map_err(|e| format!("waiting for marker {name}: {e}"))?;
            match value.get("batch").and_then(Value::as_array) {
                Some(paths) => {
                    if paths
                        .iter()
                        .any(|p| p.as_str().is_some_and(|p| p.ends_with(&suffix)))
                    {
                        return Ok(reports);
                    }
                }
                None => reports.push(value),
            }
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
