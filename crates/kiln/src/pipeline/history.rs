//! The project's recent builds: one [`BuildRecord`] per build that writes outputs (`kiln
//! build`, `kiln watch`, any [`Project::build`]), appended to `history.jsonl` in the store
//! directory and bounded to the last [`HISTORY_LIMIT`]. A record holds what `kiln report`
//! draws (counts, per pass and target, failures) and every input of each shader's identity
//! ([`ShaderRecord`]), so that `kiln explain` can say which input changed between two builds.
//!
//! The log is a report, not a cache: nothing decides reuse from it. A line that cannot be
//! read (a build killed mid-write) is skipped with a warning; a file that is not kiln's is
//! refused and left alone. Two builds committing at once may each rewrite the file while it
//! is compacted and so lose one record, never corrupt another (whole-file rename).

use super::engine::queries::{ClosureKey, ClosureQ, SourceFile};
use super::{BuildReport, Diagnostic, Index, Project};
use crate::base::ContentKey;
use crate::compile::{Constants, FrontEnd, TargetConfig};
use crate::identity;
use crate::manifest::{PassSpec, ShaderSpec};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The history's file name in the store directory.
pub const HISTORY_FILE: &str = "history.jsonl";
/// The version of [`BuildRecord`]'s encoding; bump it whenever a field changes meaning.
pub const HISTORY_VERSION: u32 = 1;
/// Builds kept: the file is compacted to these once it holds twice as many.
pub const HISTORY_LIMIT: usize = 50;
/// How every record's line starts (`kiln_history` is [`BuildRecord`]'s first field).
const RECORD_START: &[u8] = b"{\"kiln_history\":";

/// One build.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BuildRecord {
    /// [`HISTORY_VERSION`]; a line without it is not kiln's.
    pub kiln_history: u32,
    /// When the build finished, milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// Its wall time.
    pub elapsed_ms: f64,
    /// The counts of its [`BuildReport`].
    pub counts: BuildCounts,
    /// The kiln that built it.
    pub kiln_version: String,
    /// The targets, with what of each reaches an artifact's identity.
    pub targets: Vec<TargetRecord>,
    /// Every shader, in manifest order.
    pub shaders: Vec<ShaderRecord>,
    /// Every (variant, target) pair without an output, from `index.json`.
    pub failures: Vec<FailureRecord>,
}

/// The counts of a [`BuildReport`], as `kiln build --json` prints them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct BuildCounts {
    pub variants: usize,
    pub compiled: usize,
    pub cached: usize,
    pub deduplicated: usize,
    pub failed: usize,
    pub failed_outputs: usize,
    pub outputs_written: usize,
    pub outputs_removed: usize,
}

/// A target as the identity sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetRecord {
    /// `spirv`, `msl`, ...
    pub name: String,
    /// Its options as the identity spells them.
    pub options: String,
    /// The capabilities its artifacts are validated against.
    pub capabilities: String,
}

/// One shader: its identity's inputs, and what the build did with its variants.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShaderRecord {
    /// Its name.
    pub name: String,
    /// Its source revision, 16 hex digits (`index.json`'s); empty when it could not be
    /// computed (its variants failed).
    pub revision: String,
    /// The axes as written.
    pub axes: Vec<Vec<String>>,
    /// The keyword sets the manifest declares (the axes' product and explicit variants).
    pub variants: usize,
    /// `defines` of the shader.
    pub defines: BTreeMap<String, String>,
    /// Include directories, in search order.
    pub include_dirs: Vec<String>,
    /// Specialization constants of every variant.
    pub constants: BTreeMap<String, String>,
    /// Specialization constants of the variants holding a keyword, by keyword.
    pub keyword_constants: BTreeMap<String, BTreeMap<String, String>>,
    /// Its passes, in manifest order.
    pub passes: Vec<PassRecord>,
    /// Per target: its outputs and their bytes.
    pub outputs: Vec<TargetOutputs>,
}

/// One pass of a shader.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PassRecord {
    /// Its name.
    pub name: String,
    /// Its stage.
    pub stage: String,
    /// Its entry point.
    pub entry: String,
    /// Its source file, root-relative.
    pub source: String,
    /// Its language.
    pub language: String,
    /// The compiler and its exact version.
    pub compiler: String,
    /// The compiler's options (`[shader.glslang]`, `[shader.slang]`).
    pub options: BTreeMap<String, String>,
    /// The defines the pass adds (its stage, its shader model).
    pub defines: BTreeMap<String, String>,
    /// Its specialization constants.
    pub constants: BTreeMap<String, String>,
    /// Every file its include closure can reach, with its blake3 (`None`: missing).
    pub files: Vec<FileRecord>,
    /// Per target, the store namespace its artifacts go to.
    pub namespaces: BTreeMap<String, String>,
    /// What the build did with its variants.
    pub counts: PassCounts,
}

/// What one build did with one pass's variants.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PassCounts {
    /// Its variants.
    pub variants: usize,
    /// Compiled in this build.
    pub compiled: usize,
    /// Equal to another variant's text, compiled once.
    pub deduplicated: usize,
    /// From the store, from memory, or up to date.
    pub cached: usize,
    /// Failed, for every target or some.
    pub failed: usize,
    /// Time spent compiling them, µs.
    pub compile_us: u64,
}

/// A file an identity read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    /// Root-relative, `/`-separated.
    pub path: String,
    /// blake3 of its bytes, 64 hex digits; `None` when it is missing or unreadable.
    pub hash: Option<String>,
}

/// A shader's outputs for one target.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetOutputs {
    /// Target name.
    pub target: String,
    /// Current output files.
    pub outputs: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Variants without an output for this target.
    pub failed: usize,
}

/// A (variant, target) pair that failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct FailureRecord {
    pub shader: String,
    pub pass: String,
    pub keywords: Vec<String>,
    pub target: String,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub message: String,
}

/// The history as read: the records oldest first, and what was skipped.
#[derive(Clone, Debug, Default)]
pub struct History {
    /// Readable records, oldest first.
    pub records: Vec<BuildRecord>,
    /// One line per record skipped, saying why.
    pub warnings: Vec<String>,
}

/// Why the history cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The file exists but cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// Its path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file holds no kiln build record (another program's file at that path).
    #[error("{}: not a build history kiln wrote ({problem}); kiln leaves it alone (move it away)", path.display())]
    Foreign {
        /// Its path.
        path: PathBuf,
        /// What was found instead.
        problem: String,
    },
}

/// Reads `history.jsonl` in `cache_dir`; none is an empty history.
pub fn read_history(cache_dir: &Path) -> Result<History, HistoryError> {
    let path = cache_dir.join(HISTORY_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(History::default()),
        Err(source) => return Err(HistoryError::Read { path, source }),
    };
    parse_history(&path, &bytes)
}

fn parse_history(path: &Path, bytes: &[u8]) -> Result<History, HistoryError> {
    let mut history = History::default();
    let mut foreign = None;
    let mut kiln_lines = 0;
    for (number, line) in bytes.split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let line_no = number + 1;
        let version = serde_json::from_slice::<serde_json::Value>(line)
            .ok()
            .and_then(|v| v.get("kiln_history").and_then(serde_json::Value::as_u64));
        let Some(version) = version else {
            // A torn last line of a killed build is skipped below; a file of nothing but
            // such lines is not kiln's.
            foreign.get_or_insert(format!("line {line_no} is no kiln build record"));
            history.warnings.push(format!(
                "{}:{line_no}: skipped: not a build record",
                path.display()
            ));
            continue;
        };
        kiln_lines += 1;
        if version != u64::from(HISTORY_VERSION) {
            history.warnings.push(format!(
                "{}:{line_no}: skipped: a record of format {version} (this kiln reads {HISTORY_VERSION})",
                path.display()
            ));
            continue;
        }
        match serde_json::from_slice::<BuildRecord>(line) {
            Ok(record) => history.records.push(record),
            Err(e) => history.warnings.push(format!(
                "{}:{line_no}: skipped: damaged record ({e})",
                path.display()
            )),
        }
    }
    match foreign {
        Some(problem) if kiln_lines == 0 => Err(HistoryError::Foreign {
            path: path.to_owned(),
            problem,
        }),
        _ => Ok(history),
    }
}

/// Appends `record` to the history in `cache_dir`, compacting it to the last
/// [`HISTORY_LIMIT`] records once it holds twice as many.
fn append(cache_dir: &Path, record: &BuildRecord) -> Result<(), String> {
    use std::io::{Read, Seek, SeekFrom};
    let path = cache_dir.join(HISTORY_FILE);
    let at = |e: std::io::Error| format!("{}: {e}", path.display());
    let mut line = serde_json::to_string(record).map_err(|e| e.to_string())?;
    line.push('\n');
    std::fs::create_dir_all(cache_dir).map_err(|e| format!("{}: {e}", cache_dir.display()))?;
    let mut file = match std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .open(&path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return write_whole(&path, line.as_bytes())
        }
        Err(e) => return Err(at(e)),
    };
    let size = file.metadata().map_err(at)?.len();
    // Every build appends one record: only the file's first and last bytes are read, unless
    // it may hold enough records to be trimmed (records of one project are of a size).
    let mut head = Vec::with_capacity(RECORD_START.len());
    (&mut file)
        .take(RECORD_START.len() as u64)
        .read_to_end(&mut head)
        .map_err(at)?;
    let trimmable = size >= (2 * HISTORY_LIMIT as u64 - 1) * line.len() as u64;
    if !trimmable && head.starts_with(RECORD_START) {
        let mut last = [0u8; 1];
        file.seek(SeekFrom::End(-1)).map_err(at)?;
        file.read_exact(&mut last).map_err(at)?;
        // A torn last line (a killed build) would swallow this record's start.
        if last[0] != b'\n' {
            line.insert(0, '\n');
        }
        return file.write_all(line.as_bytes()).map_err(at);
    }
    drop(file);
    let existing = std::fs::read(&path).map_err(at)?;
    // Judged by each line's start and by whether it is whole JSON, not parsed into records:
    // a large project's records are large. `BuildRecord` serializes `kiln_history` first.
    // A line torn by a killed build is dropped at this compaction rather than carried on
    // (until it, reads skip it with a warning).
    let records: Vec<&[u8]> = existing
        .split(|b| *b == b'\n')
        .filter(|line| {
            line.starts_with(RECORD_START)
                && serde_json::from_slice::<serde::de::IgnoredAny>(line).is_ok()
        })
        .collect();
    // Refuses a foreign file before a byte of it changes (a file of torn records is ours).
    let foreign = existing.iter().any(|b| !b.is_ascii_whitespace())
        && !existing
            .split(|b| *b == b'\n')
            .any(|line| line.starts_with(RECORD_START));
    if records.is_empty() && foreign {
        return Err(HistoryError::Foreign {
            path,
            problem: "no line is a kiln build record".to_owned(),
        }
        .to_string());
    }
    let keep = (records.len() + 1).saturating_sub(HISTORY_LIMIT);
    let keep = if records.len() + 1 < 2 * HISTORY_LIMIT {
        0
    } else {
        keep
    };
    let mut bytes = Vec::with_capacity(existing.len() + line.len());
    for kept in &records[keep..] {
        bytes.extend_from_slice(kept);
        bytes.push(b'\n');
    }
    bytes.extend_from_slice(line.as_bytes());
    write_whole(&path, &bytes)
}

/// Writes `bytes` to a temporary beside `path` and renames it over `path`.
fn write_whole(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let temporary = path.with_extension(format!("jsonl.{}.tmp", std::process::id()));
    let written =
        std::fs::write(&temporary, bytes).and_then(|()| std::fs::rename(&temporary, path));
    written.map_err(|e| {
        let _ = std::fs::remove_file(&temporary);
        format!("{}: {e}", path.display())
    })
}

/// What a build's commit folds per pass, by shader, then pass.
#[derive(Debug, Default)]
pub(crate) struct PassTally(HashMap<Arc<str>, HashMap<Arc<str>, Tally>>);

/// One pass's variants that ran in a build.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub ran: usize,
    pub compiled: usize,
    pub deduplicated: usize,
    pub cached: usize,
    pub failed: usize,
    pub compile_us: u64,
}

impl PassTally {
    /// The tally of `shader`'s `pass`.
    pub(crate) fn of(&mut self, shader: &Arc<str>, pass: &Arc<str>) -> &mut Tally {
        self.0
            .entry(Arc::clone(shader))
            .or_default()
            .entry(Arc::clone(pass))
            .or_default()
    }

    fn get(&self, shader: &str, pass: &str) -> Option<&Tally> {
        self.0.get(shader)?.get(pass)
    }
}

impl Project {
    /// Appends this build's record to the history; a failure to is a warning in `report`,
    /// never a failed build.
    pub(super) fn record_history(&self, report: &mut BuildReport, tally: &PassTally) {
        let Some(last) = &self.last else { return };
        let record = self.build_record(report, tally, &last.index);
        if let Err(problem) = append(&self.cache_dir, &record) {
            report.diagnostics.push(Diagnostic::warning(format!(
                "the build history was not recorded: {problem}"
            )));
        }
    }

    fn build_record(&self, report: &BuildReport, tally: &PassTally, index: &Index) -> BuildRecord {
        let time_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let mut hashes = HashMap::new();
        let totals = output_totals(index);
        let shaders = self
            .manifest
            .shaders
            .iter()
            .map(|spec| {
                let mut shader = self.shader_record(spec, &mut hashes);
                fill_counts(&mut shader, tally, &totals, &self.manifest.targets);
                shader
            })
            .collect();
        BuildRecord {
            kiln_history: HISTORY_VERSION,
            time_ms,
            elapsed_ms: report.elapsed.as_secs_f64() * 1000.0,
            counts: BuildCounts {
                variants: report.variants,
                compiled: report.compiled,
                cached: report.cached,
                deduplicated: report.deduplicated,
                failed: report.failed,
                failed_outputs: report.failed_outputs,
                outputs_written: report.outputs_written,
                outputs_removed: report.outputs_removed,
            },
            kiln_version: crate::base::KILN_VERSION.to_owned(),
            targets: self.manifest.targets.iter().map(target_record).collect(),
            shaders,
            failures: index
                .failures
                .iter()
                .map(|f| FailureRecord {
                    shader: f.shader.clone(),
                    pass: f.pass.clone(),
                    keywords: f.keywords.clone(),
                    target: f.target.clone(),
                    file: f.file.clone(),
                    line: f.line,
                    message: f.message.clone(),
                })
                .collect(),
        }
    }

    /// Every input of `spec`'s identity as the engine sees it now (the counts left empty).
    /// `hashes` holds the files hashed so far, shared by the shaders that include them.
    pub(super) fn shader_record(
        &self,
        spec: &ShaderSpec,
        hashes: &mut HashMap<PathBuf, Option<String>>,
    ) -> ShaderRecord {
        let revision = self
            .db
            .get::<super::engine::queries::RevisionQ>(&Arc::from(spec.name.as_str()))
            .ok()
            .and_then(Result::ok)
            .map(|r| format!("{:016x}", r.short()))
            .unwrap_or_default();
        ShaderRecord {
            name: spec.name.clone(),
            revision,
            axes: spec.axes.clone(),
            variants: spec.variants.len(),
            defines: spec.defines.clone(),
            include_dirs: spec.include_dirs.iter().map(|d| slashed(d)).collect(),
            constants: spelled(&spec.constants),
            keyword_constants: spec
                .keyword_constants
                .iter()
                .map(|(k, c)| (k.clone(), spelled(c)))
                .collect(),
            passes: spec
                .passes
                .iter()
                .map(|pass| self.pass_record(spec, pass, hashes))
                .collect(),
            outputs: Vec::new(),
        }
    }

    fn pass_record(
        &self,
        spec: &ShaderSpec,
        pass: &PassSpec,
        hashes: &mut HashMap<PathBuf, Option<String>>,
    ) -> PassRecord {
        let mut files = Vec::new();
        if let Ok(Ok(closure)) = self.db.get::<ClosureQ>(&ClosureKey::of(pass, spec)) {
            let missing = closure.missing.iter().map(|m| &m.path);
            for path in closure.files.iter().chain(missing) {
                let hash = hashes.entry(path.clone()).or_insert_with(|| {
                    self.db
                        .input::<SourceFile>(path)
                        .and_then(Result::ok)
                        .map(|text| ContentKey::hash(text.as_bytes()).to_hex())
                });
                files.push(FileRecord {
                    path: slashed(path),
                    hash: hash.clone(),
                });
            }
        } else {
            files.push(FileRecord {
                path: slashed(&pass.source),
                hash: None,
            });
        }
        let kind = pass.front_end.kind();
        PassRecord {
            name: pass.name.clone(),
            stage: pass.stage.name().to_owned(),
            entry: pass.entry.clone(),
            source: slashed(&pass.source),
            language: pass.language.name().to_owned(),
            compiler: identity::Compiler::of(kind).label(),
            options: front_end_options(&pass.front_end),
            defines: pass
                .defines()
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
            constants: spelled(&pass.constants),
            files,
            namespaces: self
                .manifest
                .targets
                .iter()
                .map(|t| {
                    let namespace = identity::namespace(kind, t);
                    (
                        t.target().name().to_owned(),
                        namespace.dir_name().to_owned(),
                    )
                })
                .collect(),
            counts: PassCounts::default(),
        }
    }
}

/// Per shader, then target: its current outputs, their bytes and its failed pairs, in one
/// pass over the index (300,000 entries at 100,000 variants).
type OutputTotals<'a> = HashMap<&'a str, HashMap<&'a str, TargetOutputs>>;

fn output_totals(index: &Index) -> OutputTotals<'_> {
    let mut totals: OutputTotals<'_> = HashMap::new();
    for entry in index.entries.iter().filter(|e| !e.stale) {
        let total = totals
            .entry(&entry.variant.shader)
            .or_default()
            .entry(&entry.target)
            .or_default();
        total.outputs += 1;
        total.bytes += entry.bytes;
    }
    for failure in &index.failures {
        let total = totals
            .entry(&failure.shader)
            .or_default()
            .entry(&failure.target)
            .or_default();
        total.failed += 1;
    }
    totals
}

/// Fills a shader's counts from the build's tally and the index it wrote.
fn fill_counts(
    shader: &mut ShaderRecord,
    tally: &PassTally,
    totals: &OutputTotals<'_>,
    targets: &[TargetConfig],
) {
    for pass in &mut shader.passes {
        let counts = &mut pass.counts;
        counts.variants = shader.variants;
        if let Some(t) = tally.get(&shader.name, &pass.name) {
            counts.compiled = t.compiled;
            counts.deduplicated = t.deduplicated;
            counts.failed = t.failed;
            counts.compile_us = t.compile_us;
            // A variant current by its stamp did not run: it is from the cache too.
            counts.cached = t.cached + shader.variants.saturating_sub(t.ran);
        } else {
            counts.cached = shader.variants;
        }
    }
    let of_shader = totals.get(shader.name.as_str());
    shader.outputs = targets
        .iter()
        .map(|t| {
            let name = t.target().name();
            let found = of_shader.and_then(|targets| targets.get(name));
            TargetOutputs {
                target: name.to_owned(),
                ..found.cloned().unwrap_or_default()
            }
        })
        .collect();
}

pub(super) fn target_record(target: &TargetConfig) -> TargetRecord {
    TargetRecord {
        name: target.target().name().to_owned(),
        options: target.options_string(),
        capabilities: identity::capabilities(target),
    }
}

/// A path as records spell it: `/`-separated on every platform.
fn slashed(path: &Path) -> String {
    path.to_string_lossy().replace('\\', "/")
}

/// Constants as records spell them.
pub(super) fn spelled(constants: &Constants) -> BTreeMap<String, String> {
    constants
        .iter()
        .map(|(k, v)| (k.clone(), v.to_string()))
        .collect()
}

/// The compiler options of a front end, each by its manifest name. Destructured whole, so a
/// new option fails to compile here until it is listed.
fn front_end_options(front_end: &FrontEnd) -> BTreeMap<String, String> {
    let mut options = BTreeMap::new();
    let mut put = |name: &str, value: String| {
        options.insert(name.to_owned(), value);
    };
    match front_end {
        FrontEnd::Naga => {}
        FrontEnd::Glslang(glslang) => {
            let crate::compile::GlslangOptions {
                optimization,
                auto_map_locations,
                auto_bind_uniforms,
                hlsl_iomap,
                invert_y,
                target_env,
                generate_debug_info,
                hlsl_functionality1,
                hlsl_offsets,
                nan_clamp,
                binding_base,
            } = glslang;
            put("optimization", optimization.name().to_owned());
            put("auto_map_locations", auto_map_locations.to_string());
            put("auto_bind_uniforms", auto_bind_uniforms.to_string());
            put("hlsl_iomap", hlsl_iomap.to_string());
            put("invert_y", invert_y.to_string());
            put(
                "target_env",
                target_env.map_or("default", |env| env.name()).to_owned(),
            );
            put("generate_debug_info", generate_debug_info.to_string());
            put("hlsl_functionality1", hlsl_functionality1.to_string());
            put("hlsl_offsets", hlsl_offsets.to_string());
            put("nan_clamp", nan_clamp.to_string());
            let bases: Vec<String> = binding_base.values().iter().map(u32::to_string).collect();
            put("binding_base", bases.join(","));
        }
        FrontEnd::Slang(slang) => {
            let crate::compile::SlangOptions {
                matrix_layout,
                optimization,
            } = slang;
            put("matrix_layout", matrix_layout.name().to_owned());
            put("optimization", optimization.name().to_owned());
        }
    }
    options
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(time_ms: u64) -> BuildRecord {
        BuildRecord {
            kiln_history: HISTORY_VERSION,
            time_ms,
            elapsed_ms: 1.0,
            counts: BuildCounts::default(),
            kiln_version: "test".into(),
            targets: Vec::new(),
            shaders: Vec::new(),
            failures: Vec::new(),
        }
    }

    #[test]
    fn a_torn_line_is_skipped_with_a_warning_and_the_rest_is_read() {
        let mut text = serde_json::to_string(&record(1)).unwrap();
        text.push_str("\n{\"kiln_history\":1,\"time_ms\":\n");
        let history = parse_history(Path::new("h"), text.as_bytes()).unwrap();
        assert_eq!(history.records, vec![record(1)]);
        assert_eq!(history.warnings.len(), 1, "{:?}", history.warnings);
        assert!(
            history.warnings[0].contains("h:2"),
            "{:?}",
            history.warnings
        );
    }

    #[test]
    fn a_foreign_file_is_an_error_and_is_not_appended_to() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(HISTORY_FILE);
        std::fs::write(&path, "hello\nworld\n").unwrap();
        let error = read_history(dir.path()).unwrap_err();
        assert!(matches!(error, HistoryError::Foreign { .. }), "{error}");
        assert!(append(dir.path(), &record(1)).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "hello\nworld\n");
    }

    #[test]
    fn a_newer_format_is_skipped_not_misread() {
        let text = "{\"kiln_history\":99,\"anything\":1}\n";
        let history = parse_history(Path::new("h"), text.as_bytes()).unwrap();
        assert!(history.records.is_empty());
        assert!(
            history.warnings[0].contains("format 99"),
            "{:?}",
            history.warnings
        );
    }

    #[test]
    fn the_history_is_bounded_and_keeps_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        for time in 0..(2 * HISTORY_LIMIT as u64 + 5) {
            append(dir.path(), &record(time)).unwrap();
        }
        let history = read_history(dir.path()).unwrap();
        assert!(history.warnings.is_empty(), "{:?}", history.warnings);
        assert!(history.records.len() <= 2 * HISTORY_LIMIT);
        assert!(history.records.len() >= HISTORY_LIMIT);
        let last = history.records.last().unwrap().time_ms;
        assert_eq!(last, 2 * HISTORY_LIMIT as u64 + 4);
        let times: Vec<u64> = history.records.iter().map(|r| r.time_ms).collect();
        assert!(times.windows(2).all(|w| w[0] + 1 == w[1]), "{times:?}");
    }

    #[test]
    fn a_torn_line_is_dropped_when_the_history_is_compacted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(HISTORY_FILE);
        // A killed build's torn record, then enough builds to compact the file.
        append(dir.path(), &record(0)).unwrap();
        let mut torn = std::fs::read(&path).unwrap();
        torn.extend_from_slice(b"{\"kiln_history\":1,\"time_ms\":1");
        std::fs::write(&path, &torn).unwrap();
        assert_eq!(read_history(dir.path()).unwrap().warnings.len(), 1);
        let mut appended = 0;
        while std::fs::read(&path).unwrap().starts_with(&torn) {
            append(dir.path(), &record(2 + appended)).unwrap();
            appended += 1;
            assert!(appended <= 2 * HISTORY_LIMIT as u64, "never compacted");
        }
        let history = read_history(dir.path()).unwrap();
        assert!(history.warnings.is_empty(), "{:?}", history.warnings);
        assert_eq!(history.records.last().unwrap().time_ms, 1 + appended);
    }

    #[test]
    fn a_file_of_torn_records_is_ours_not_foreign() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(HISTORY_FILE);
        // Long enough to be compacted on the next append.
        let torn = format!(
            "{{\"kiln_history\":1,\"time_ms\":1,\"pad\":\"{}\n",
            "x".repeat(500)
        );
        std::fs::write(&path, torn.repeat(2 * HISTORY_LIMIT)).unwrap();
        append(dir.path(), &record(2)).unwrap();
        let history = read_history(dir.path()).unwrap();
        assert_eq!(history.records, vec![record(2)]);
    }
}
