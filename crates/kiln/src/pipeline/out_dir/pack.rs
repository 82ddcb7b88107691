//! The packs of an output directory: with `[output] layout = "both"`, one file per target,
//! `<target>.kpack`, holding every output of that target listed in `index.json` (the
//! format is `kiln_runtime::pack`'s; an engine reads it with `kiln_runtime::Library`).
//!
//! A pack is made from the outputs the index lists, each checked against its recorded hash,
//! so that it never holds bytes the index does not name: taken from the pack it replaces
//! when that one holds them (one mapped file, artifacts found by hash), else read from the
//! loose file. A stale output (the last good one of a variant that now fails, kept under
//! `kiln watch`) is not in it: a pack serves only what the current sources build, and an
//! engine that loaded the old variant keeps it. It is rewritten whole, atomically, when the
//! index changed or the file no longer holds what kiln wrote; a build that changed nothing
//! neither rewrites nor reads it (its stat proves it, as an output's does: `holds::holds`),
//! and one no longer asked for is removed as a retired output is (`remove_output`).

use super::stat::FileStat;
use super::{write_atomic, IndexEntry, Recorded};
use crate::compile::Target;
use crate::manifest::Manifest;
use crate::store::ContentKey;
use kiln_runtime::pack::PackWriter;
use kiln_runtime::Library;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;

/// One pack, as `index.json` records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexPack {
    /// The target whose outputs it holds.
    pub target: String,
    /// Its path relative to the output directory (`<target>.kpack`).
    pub path: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// blake3 of the whole file; 64 hex digits.
    #[serde(with = "super::hex_hash")]
    pub content_hash: ContentKey,
}

impl IndexPack {
    /// What the index records of the pack's file.
    pub fn recorded(&self) -> Recorded<'_> {
        Recorded {
            path: &self.path,
            bytes: self.bytes,
            content_hash: &self.content_hash,
        }
    }
}

/// The file name of `target`'s pack in an output directory (`<target>.kpack`): the
/// runtime's rule, so that `Library::open_dir` finds what kiln wrote.
pub use kiln_runtime::pack_file_name;

/// Writes the pack of `target` in `out_dir` from the outputs `entries` list (every target's;
/// sorted by path), with the shaders, keywords and passes `manifest` declares; the bytes
/// `old` (the pack it replaces) holds are taken from it. Returns its record and stat, or why
/// it could not be made.
pub(crate) fn write_pack(
    out_dir: &Path,
    target: &str,
    manifest: &Manifest,
    entries: &[IndexEntry],
    old: Option<&Library>,
    reflections: &Reflections,
) -> Result<(IndexPack, FileStat), String> {
    let mut writer = PackWriter::new();
    writer.add_target(target).map_err(|e| e.to_string())?;
    for shader in &manifest.shaders {
        writer
            .add_shader(
                &shader.name,
                &shader.keywords,
                shader.passes.iter().map(|p| &p.name),
            )
            .map_err(|e| e.to_string())?;
    }
    for entry in entries.iter().filter(|e| *e.target == *target && !e.stale) {
        // Verified against its hash by the old pack's reader: the entry's bytes, or none.
        let kept = old.and_then(|old| {
            old.artifact_by_hash(entry.content_hash.as_bytes())
                .ok()
                .flatten()
        });
        let read;
        let bytes = match kept {
            Some(bytes) => bytes,
            None => {
                read = read_output(out_dir, entry)?;
                &read[..]
            }
        };
        let reflection = reflections.of_variant(entry);
        let v = &entry.variant;
        writer
            .add_variant(
                &v.shader,
                &v.pass,
                &v.keywords,
                target,
                &v.digest,
                bytes,
                reflection,
            )
            .map_err(|e| format!("{}: {e}", entry.path))?;
    }
    let bytes = writer.to_bytes().map_err(|e| e.to_string())?;
    let name = pack_file_name(target);
    let path = out_dir.join(&name);
    let meta =
        write_atomic(&path, &bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let record = IndexPack {
        target: target.to_owned(),
        path: name,
        bytes: bytes.len() as u64,
        content_hash: ContentKey::hash(&bytes),
    };
    Ok((record, FileStat::of(&meta)))
}

/// Each variant's reflection (its `reflection` target's output, when the manifest lists
/// that target), the blob of every pack entry of the variant: read from its file once for
/// all the packs.
pub(crate) struct Reflections {
    /// The reflections' bytes by (shader, pass, keywords).
    by_variant: FxHashMap<VariantNames, Vec<u8>>,
}

/// A variant's shader, pass and keywords, shared with its index entries.
type VariantNames = (Arc<str>, Arc<str>, Arc<[Arc<str>]>);

fn names(entry: &IndexEntry) -> VariantNames {
    let v = &entry.variant;
    (
        Arc::clone(&v.shader),
        Arc::clone(&v.pass),
        Arc::clone(&v.keywords),
    )
}

impl Reflections {
    /// The current reflection outputs among `entries`, read from `out_dir` and checked
    /// against their hashes.
    pub(crate) fn read(out_dir: &Path, entries: &[IndexEntry]) -> Result<Self, String> {
        let reflection = Target::Reflection.name();
        let by_variant = (entries.iter())
            .filter(|e| *e.target == *reflection && !e.stale)
            .map(|e| Ok((names(e), read_output(out_dir, e)?)))
            .collect::<Result<_, String>>()?;
        Ok(Self { by_variant })
    }

    /// The reflection of `entry`'s variant; empty when it has none.
    fn of_variant(&self, entry: &IndexEntry) -> &[u8] {
        self.by_variant
            .get(&names(entry))
            .map_or(&[], Vec::as_slice)
    }
}

/// The loose output of `entry`, checked against the hash the index records.
fn read_output(out_dir: &Path, entry: &IndexEntry) -> Result<Vec<u8>, String> {
    let path = out_dir.join(&*entry.path);
    let bytes = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if bytes.len() as u64 != entry.bytes || ContentKey::hash(&bytes) != entry.content_hash {
        return Err(format!(
            "{} changed behind kiln's back while the pack was made; build again",
            path.display()
        ));
    }
    Ok(bytes)
}
