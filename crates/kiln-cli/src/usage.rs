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
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// The log's file name in the store directory.
pub const USAGE_LOG: &str = "usage.jsonl";

/// The usage log of one store directory, and the variants already in it.
pub struct UsageLog {
    path: PathBuf,
    seen: Mutex<BTreeSet<UsedVariant>>,
    /// `seen.len()`, for `/status` on the server's async worker.
    count: AtomicUsize,
    /// Held while appending: the disk is not waited on under `seen`'s lock.
    file: Mutex<()>,
}

impl UsageLog {
    /// The log in `cache_dir`, with what earlier servers recorded there.
    pub fn open(cache_dir: &Path) -> Self {
        let path = cache_dir.join(USAGE_LOG);
        let seen = match read_log(&path) {
            Ok(seen) => seen,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeSet::new(),
            Err(e) => {
                say!(
                    "warning: cannot read {}: {e}; recording anew",
                    path.display()
                );
                BTreeSet::new()
            }
        };
        Self {
            path,
            count: AtomicUsize::new(seen.len()),
            seen: Mutex::new(seen),
            file: Mutex::new(()),
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
        {
            let mut seen = self.seen.lock();
            if !seen.insert(used.clone()) {
                return;
            }
            self.count.store(seen.len(), Relaxed);
        }
        let _appending = self.file.lock();
        if let Err(e) = self.append(&used) {
            // Serving goes on; what is not in the log is still in `/usage` and memory.
            tracing::warn!("cannot record usage in {}: {e}", self.path.display());
        }
    }

    fn append(&self, used: &UsedVariant) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&self.path)?;
        // A server killed mid-append leaves a line without its end: end it, or this record
        // would be glued to it and lost with it.
        let mut line = if ends_torn(&file)? {
            vec![b'\n']
        } else {
            Vec::new()
        };
        serde_json::to_writer(&mut line, used).map_err(std::io::Error::other)?;
        line.push(b'\n');
        // One write of one line in append mode: lines of concurrent servers do not mix.
        file.write_all(&line)
    }

    /// Every variant recorded, as a usage file's text.
    pub fn usage_file(&self) -> String {
        write_usage(self.seen.lock().iter())
    }

    /// How many distinct variants are recorded.
    pub fn len(&self) -> usize {
        self.count.load(Relaxed)
    }
}

/// Whether `file` is not empty and its last byte is not a line's end.
fn ends_torn(file: &std::fs::File) -> std::io::Result<bool> {
    use std::io::{Read, Seek, SeekFrom};
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(false);
    }
    let mut reader = file;
    reader.seek(SeekFrom::Start(len - 1))?;
    let mut last = [0u8; 1];
    reader.read_exact(&mut last)?;
    Ok(last[0] != b'\n')
}

/// The log's variants. A line cut short by a kill, or not understood (damaged, not UTF-8),
/// is skipped with a warning naming its line: the others are still used.
fn read_log(path: &Path) -> std::io::Result<BTreeSet<UsedVariant>> {
    let bytes = std::fs::read(path)?;
    let mut used = BTreeSet::new();
    for (at, line) in bytes.split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice(line) {
            Ok(variant) => {
                used.insert(variant);
            }
            Err(e) => say!(
                "warning: {}:{}: skipped a record that cannot be read ({e})",
                path.display(),
                at + 1
            ),
        }
    }
    Ok(used)
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
/// left out), 2 nothing written (an error, or no legal set to write).
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
    let log = cache_dir.join(USAGE_LOG);
    let mut from_log = 0;
    if !args.no_log {
        match read_log(&log) {
            Ok(used) => {
                from_log = used.len();
                all.extend(used.into_iter().map(|u| (log.display().to_string(), u)));
            }
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
    let built: Vec<&str> = manifest.targets.iter().map(|t| t.target().name()).collect();
    for (place, mut used) in all {
        match check_used(&manifest.shaders, &used) {
            Ok(set) => {
                // A set is built for every target of the manifest, whichever one it was
                // fetched for: an entry whose target is gone still names a used set.
                if !built.contains(&used.target.as_str()) {
                    say!(
                        "warning: {place}: {}/{}[{}] was fetched for target `{}`, which kiln.toml no longer builds; kept for {}",
                        used.shader,
                        used.pass,
                        used.keywords.join(";"),
                        used.target,
                        built.join(", ")
                    );
                }
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
    if legal.is_empty() {
        // An empty usage file named in `variants_from` would build nothing at all.
        let mut read: Vec<String> = args.merge.iter().map(|f| f.display().to_string()).collect();
        if !args.no_log {
            let hint = if from_log == 0 {
                " (no record: is --cache-dir right?)"
            } else {
                ""
            };
            read.insert(0, format!("{}{hint}", log.display()));
        }
        if read.is_empty() {
            read.push("nothing (--no-log and no usage file named)".to_owned());
        }
        say!(
            "error: no legal used variant to write (read: {}; {dropped} left out); nothing written",
            read.join(", ")
        );
        return ExitCode::from(2);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn used(keywords: &[&str]) -> UsedVariant {
        UsedVariant {
            shader: "Lit".into(),
            pass: "Forward".into(),
            keywords: keywords.iter().map(|k| k.to_string()).collect(),
            target: "spirv".into(),
        }
    }

    #[test]
    fn a_record_after_a_torn_line_or_damaged_bytes_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(USAGE_LOG);
        let mut log = serde_json::to_vec(&used(&["FOG"])).unwrap();
        log.extend_from_slice(b"\n\xff\xfe not utf-8\n{\"shader\":\"Lit\",\"pa");
        std::fs::write(&path, &log).unwrap();

        let usage = UsageLog::open(dir.path());
        assert_eq!(usage.len(), 1, "the whole first line is read");
        usage.append(&used(&["SKIN"])).unwrap();
        let read = read_log(&path).unwrap();
        assert_eq!(
            read.into_iter().collect::<Vec<_>>(),
            vec![used(&["FOG"]), used(&["SKIN"])],
            "the torn line ended, the new record on a line of its own"
        );
        usage.append(&used(&[])).unwrap();
        assert_eq!(read_log(&path).unwrap().len(), 3);
    }
}
