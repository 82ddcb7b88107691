//! Writing one variant's outputs, by the worker that ran it: a file is written only when the
//! one on disk does not already hold its bytes. Writing never compiles: the bytes of every
//! output the disk lacks come from the run ([`super::super::run`]).

use crate::pipeline::build::plan::{LastBuild, Outputs};
use crate::pipeline::engine::queries::{variant_key, Artifacts};
use crate::pipeline::engine::scope::ShaderRevision;
use crate::pipeline::engine::services::VariantArtifacts;
use crate::pipeline::out_dir::holds::{find, on_disk, OnDisk};
use crate::pipeline::out_dir::recycle::Spares;
use crate::pipeline::out_dir::stat::FileStat;
use crate::pipeline::out_dir::{output_path, IndexEntry, IndexVariant};
use crate::pipeline::{Diagnostic, VariantId};
use crate::store::ContentKey;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One variant's outputs after writing.
pub(crate) struct VariantWrite {
    /// Its index entries, one per target that succeeded.
    pub entries: Vec<IndexEntry>,
    /// The stats to record of the outputs written or proven current, by index path.
    pub stats: Vec<(String, FileStat)>,
    /// Files written.
    pub written: usize,
}

/// Writing one variant's outputs: done, or why not (that variant fails alone).
pub(crate) type WriteResult = Result<VariantWrite, Diagnostic>;

/// An error naming `variant`.
pub(crate) fn failure(variant: &VariantId, message: String) -> Diagnostic {
    let mut d = Diagnostic::error(message);
    d.variant = Some(variant.to_string());
    d
}

/// Where one output of a variant goes, and what its path holds now.
pub(crate) struct Placed {
    target: crate::compile::Target,
    bytes: u64,
    hash: ContentKey,
    relative: String,
    path: PathBuf,
    found: OnDisk,
}

impl Placed {
    /// Whether the disk already holds the output's bytes.
    pub fn held(&self) -> bool {
        matches!(self.found, OnDisk::Current | OnDisk::Holds(_))
    }
}

/// Where each output of `variant` goes, and what is there now (read only). Refused, for
/// that variant alone: a path through a link under the output directory, and a file there
/// that kiln did not write (see [`super::super::super::out_dir::confine`]).
pub(crate) fn place(
    out_dir: &Path,
    variant: &VariantId,
    artifacts: &Artifacts,
    outputs: &Outputs,
) -> Result<Vec<Placed>, Diagnostic> {
    let last = &outputs.last;
    let mut placed = Vec::with_capacity(artifacts.outputs.len());
    for output in artifacts.outputs.iter() {
        let relative = output_path(
            &variant.shader,
            &variant.pass,
            &variant.keywords,
            output.target.extension(),
        );
        let path = crate::boundary::output_file(out_dir, &relative)
            .and_then(|path| outputs.real_dirs.check(out_dir, &relative).map(|()| path))
            .map_err(|e| failure(variant, format!("output path {relative}: {e}")))?;
        // An output this process wrote or verified with the same bytes needs no look on
        // disk, unless a file event said someone touched it since.
        let current = last.written_here
            && find(&last.index.entries, &relative)
                .is_some_and(|e| e.content_hash == output.hash && e.bytes == output.bytes)
            && !last.suspect.contains(&relative);
        let found = if current {
            OnDisk::Current
        } else {
            on_disk(
                &path,
                &relative,
                output.bytes,
                &output.hash,
                &last.index,
                &last.stats,
            )
        };
        let listed = || find(&last.index.entries, &relative).is_some();
        if matches!(found, OnDisk::Differs) && !outputs.killed_writer && !listed() {
            let message = format!(
                "{}: a file kiln did not write is in the way (index.json does not list it); \
                 kiln never replaces such a file: move it away, or build into another directory",
                path.display()
            );
            return Err(failure(variant, message));
        }
        placed.push(Placed {
            target: output.target,
            bytes: output.bytes,
            hash: output.hash,
            relative,
            path,
            found,
        });
    }
    Ok(placed)
}

/// Writes the outputs `placed` says the disk lacks, from `bytes`, and makes the variant's
/// index entries at `revision`.
pub(crate) fn write(
    spares: &Spares,
    variant: &VariantId,
    placed: Vec<Placed>,
    bytes: Option<&VariantArtifacts>,
    last: &LastBuild,
    revision: &ShaderRevision,
) -> WriteResult {
    let mut done = VariantWrite {
        entries: Vec::with_capacity(placed.len()),
        stats: Vec::new(),
        written: 0,
    };
    let Some(first) = placed.first() else {
        return Ok(done);
    };
    let shared = index_variant(variant, first, last, revision)?;
    for output in placed {
        // What the entry records: the artifact's size and hash, or, when its bytes had to
        // be loaded (the artifacts query took them from the store's record), those of the
        // bytes written, so that the index never names bytes the disk lacks.
        let (mut len, mut hash) = (output.bytes, output.hash);
        match output.found {
            OnDisk::Current => {}
            OnDisk::Holds(stat) => done.stats.push((output.relative.clone(), stat)),
            OnDisk::Differs | OnDisk::Missing => {
                let (stat, written_len, written_hash) = write_one(spares, variant, &output, bytes)?;
                done.stats.push((output.relative.clone(), stat));
                done.written += 1;
                (len, hash) = (written_len, written_hash);
            }
        }
        done.entries.push(IndexEntry {
            variant: Arc::clone(&shared),
            target: output.target.shared_name(),
            path: output.relative.into(),
            bytes: len,
            content_hash: hash,
            stale: false,
            failed_revision: None,
        });
    }
    Ok(done)
}

/// Writes one output the disk lacks from the variant's `bytes`; returns the file's stat and
/// the size and hash of the bytes written.
fn write_one(
    spares: &Spares,
    variant: &VariantId,
    output: &Placed,
    bytes: Option<&VariantArtifacts>,
) -> Result<(FileStat, u64, ContentKey), Diagnostic> {
    let (written, hash) = bytes
        .and_then(|all| {
            all.outputs
                .iter()
                .zip(&all.hashes)
                .find(|((t, _), _)| *t == output.target)
                .map(|((_, b), h)| (b, *h))
        })
        .ok_or_else(|| {
            let path = output.path.display();
            let message = format!("{path}: the artifact vanished from the store; build again");
            failure(variant, message)
        })?;
    let meta = match output.found {
        OnDisk::Missing => spares.write_new(&output.path, written),
        _ => spares.write(&output.path, written),
    }
    .map_err(|e| {
        let path = output.path.display();
        failure(variant, format!("cannot write output {path}: {e}"))
    })?;
    Ok((FileStat::of(&meta), written.len() as u64, hash))
}

/// What a variant's index entries share: the previous build's, when this process wrote it
/// and it names the same variant at the same revision, else made anew.
fn index_variant(
    variant: &VariantId,
    first: &Placed,
    last: &LastBuild,
    revision: &ShaderRevision,
) -> Result<Arc<IndexVariant>, Diagnostic> {
    let previous = Some(first)
        .filter(|_| last.written_here)
        .and_then(|first| find(&last.index.entries, &first.relative));
    if let Some(e) = previous.filter(|e| e.variant.names(variant, &revision.name)) {
        return Ok(Arc::clone(&e.variant));
    }
    let key = variant_key(variant, revision.revision.short())?;
    Ok(Arc::new(IndexVariant {
        shader: Arc::clone(&variant.shader),
        pass: Arc::clone(&variant.pass),
        keywords: Arc::clone(&variant.keywords),
        revision: Arc::clone(&revision.name),
        digest: key.digest().into(),
        inputs: revision
            .input_stamp(&variant.pass, &variant.keywords)
            .into(),
    }))
}
