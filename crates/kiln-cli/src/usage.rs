//! Usage: the variants clients fetched from `kiln serve`, recorded in the store directory
//! (`usage.jsonl`, one line per distinct (shader, pass, keyword set, target), appended as
//! it is first fetched, so a killed server loses nothing), and `kiln usage`, which writes
//! them, merged with other usage files, as the usage file `[project] variants_from` reads.

use crate::build::ProjectArgs;
use kiln::manifest::{check_used, parse_usage, write_usage, Manifest, UsedVariant};
use kiln::pipeline::Fetched;
use parking_lot::Mutex;
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The log's file name in the store directory.
pub const USAGE_LOG: &str = "usage.jsonl";

/// The usage log of one store directory, and the variants already in it.
pub struct UsageLog {
    path: PathBuf,
    seen: Mutex<BTreeSet<UsedVariant>>,
}

impl UsageLog {
    /// The log in `cache_dir`, with what earlier servers recorded there.
    pub fn open(cache_dir: &Path) -> Self {
        let path = cache_dir.join(USAGE_LOG);
        let seen = read_log(&path).unwrap_or_default();
        Self {
            path,
            seen: Mutex::new(seen),
        }
    }

    /// Records a fetched variant; appends it to the log the first time.
    pub fn record(&self, fetched: &Fetched) {
        let used = UsedVariant {
            shader: fetched.variant.shader.to_string(),
            pass: fetched.variant.pass.to_string(),
            keywords: fetched
                .variant
                .keywords
                .iter()
                .map(|k| k.to_string())
                .collect(),
            target: fetched.target.name().to_owned(),
        };
        let mut seen = self.seen.lock();
        if seen.contains(&used) {
            return;
        }
        match self.append(&used) {
            Ok(()) => {}
            // Serving goes on; what is not in the log is still in `/usage` and memory.
            Err(e) => tracing::warn!("cannot record usage in {}: {e}", self.path.display()),
        }
        seen.insert(used);
    }

    fn append(&self, used: &UsedVariant) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut line = serde_json::to_vec(used).map_err(std::io::Error::other)?;
        line.push(b'\n');
        // One write of one line in append mode: lines of concurrent servers do not mix.
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?
            .write_all(&line)
    }

    /// Every variant recorded, as a usage file's text.
    pub fn usage_file(&self) -> String {
        write_usage(self.seen.lock().iter())
    }

    /// How many distinct variants are recorded.
    pub fn len(&self) -> usize {
        self.seen.lock().len()
    }
}

/// The log's variants; a line cut short by a kill (the last one) or not understood is
/// skipped.
fn read_log(path: &Path) -> std::io::Result<BTreeSet<UsedVariant>> {
    let text = std::fs::read_to_string(path)?;
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect())
}

#[derive(clap::Args)]
pub struct UsageArgs {
    #[command(flatten)]
    pub project: ProjectArgs,
    /// Write the usage file here (default: print it on stdout).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Usage files to merge in (from other runs or machines).
    pub merge: Vec<PathBuf>,
    /// Leave out the store's own log (merge the named files only).
    #[arg(long)]
    pub no_log: bool,
}

/// `kiln usage`: 0 written, 1 written but some sets were no longer legal (each reported and
/// left out), 2 nothing written.
pub fn run(args: &UsageArgs) -> ExitCode {
    let manifest = match Manifest::load(&args.project.manifest) {
        Ok(manifest) => manifest,
        Err(e) => {
            crate::render::manifest_error(&e);
            return ExitCode::from(2);
        }
    };
    let cache_dir = args
        .project
        .cache_dir
        .clone()
        .unwrap_or_else(|| manifest.root.join(".kiln"));
    let mut all: Vec<(String, UsedVariant)> = Vec::new();
    if !args.no_log {
        let log = cache_dir.join(USAGE_LOG);
        match read_log(&log) {
            Ok(used) => all.extend(used.into_iter().map(|u| (log.display().to_string(), u))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                say!("error: cannot read {}: {e}", log.display());
                return ExitCode::from(2);
            }
        }
    }
    for file in &args.merge {
        let text = match std::fs::read_to_string(file) {
            Ok(text) => text,
            Err(e) => {
                say!("error: cannot read {}: {e}", file.display());
                return ExitCode::from(2);
            }
        };
        match parse_usage(file, &text) {
            Ok(entries) => all.extend(
                entries
                    .into_iter()
                    .map(|e| (format!("{}:{}", file.display(), e.line), e.used)),
            ),
            Err(e) => {
                crate::render::manifest_error(&e);
                return ExitCode::from(2);
            }
        }
    }
    let mut legal = BTreeSet::new();
    let mut dropped = 0;
    for (place, mut used) in all {
        match check_used(&manifest.shaders, &used) {
            Ok(set) => {
                used.keywords = set;
                legal.insert(used);
            }
            Err(why) => {
                dropped += 1;
                say!(
                    "warning: {place}: {}/{}[{}] left out: {why}",
                    used.shader,
                    used.pass,
                    used.keywords.join(";")
                );
            }
        }
    }
    let text = write_usage(&legal);
    match &args.output {
        Some(path) => {
            if let Err(e) = write_atomically(path, text.as_bytes()) {
                say!("error: cannot write {}: {e}", path.display());
                return ExitCode::from(2);
            }
            say!(
                "{} used variant(s) written to {}{}",
                legal.len(),
                path.display(),
                if dropped > 0 {
                    format!(", {dropped} no longer legal left out")
                } else {
                    String::new()
                }
            );
        }
        None => crate::render::stdout_line(text.trim_end()),
    }
    if dropped > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Writes `path` whole or not at all: a temporary file beside it, renamed over it.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}.tmp", std::process::id()));
    let temp = path.with_file_name(name);
    let written = std::fs::write(&temp, bytes).and_then(|()| std::fs::rename(&temp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}
