//! The output directory's boundary: which `index.json` entries are trusted, and which files
//! kiln may remove. `index.json` is a file anyone can edit; nothing it says makes kiln write,
//! read or delete outside the output directory.

use super::{IndexEntry, Recorded};
use crate::boundary::{check_index_path, index_path, UnsafePath};
use crate::pipeline::Diagnostic;
use std::io;
use std::path::{Path, PathBuf};

/// Drops the entries whose path is not a normal relative path (no `..`, no root, no `\`, no
/// NUL), with one warning per entry dropped.
pub(crate) fn retain_safe_entries(
    out_dir: &Path,
    entries: &mut Vec<IndexEntry>,
) -> Vec<Diagnostic> {
    let mut warnings = Vec::new();
    entries.retain(|entry| match check_index_path(&entry.path) {
        Ok(_) => true,
        Err(why) => {
            warnings.push(ignored(out_dir, &why));
            false
        }
    });
    warnings
}

/// Drops the pack records of an index whose path is not `<target>.kpack` for a valid target
/// name: anyone can edit `index.json`, and kiln reads and removes the packs it lists.
pub(crate) fn retain_safe_packs(
    out_dir: &Path,
    packs: &mut Vec<super::pack::IndexPack>,
) -> Vec<Diagnostic> {
    let mut warnings = Vec::new();
    packs.retain(|pack| {
        let safe = kiln_runtime::canon::check_name(&pack.target).is_ok()
            && pack.path == super::pack::pack_file_name(&pack.target);
        if !safe {
            warnings.push(Diagnostic::warning(format!(
                "ignored the pack {:?} of {}: a pack is `<target>.kpack` in the output directory",
                pack.path,
                out_dir.join(super::INDEX_FILE).display()
            )));
        }
        safe
    });
    warnings
}

fn ignored(out_dir: &Path, why: &UnsafePath) -> Diagnostic {
    Diagnostic::warning(format!(
        "ignored an entry of {}: {why}; kiln reads, writes and removes only inside the output directory",
        out_dir.join(super::INDEX_FILE).display()
    ))
}

/// The `file` under `out_dir` if kiln may remove it: a checked relative path, a
/// directory inside `out_dir` once symbolic links are resolved, a regular file (not a link),
/// with the size and blake3 hash the index recorded. `None` when it is missing or any check
/// fails (a file that is not provably kiln's is left alone).
pub(crate) fn removable_output(out_dir: &Path, file: &Recorded<'_>) -> io::Result<Option<PathBuf>> {
    let Ok(relative) = index_path(file.path) else {
        return Ok(None);
    };
    let path = out_dir.join(relative);
    match crate::boundary::resolved_parent_inside(out_dir, &path, file.path) {
        Ok(Some(())) => {}
        Ok(None) | Err(_) => return Ok(None),
    }
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if !meta.file_type().is_file() || meta.len() != file.bytes {
        return Ok(None);
    }
    let bytes = std::fs::read(&path)?;
    if crate::store::ContentKey::hash(&bytes) != *file.content_hash {
        return Ok(None);
    }
    Ok(Some(path))
}

/// One warning for every artifact a build could not save to the store, with the count and the
/// first error (a read-only store would otherwise print one warning per artifact).
pub(crate) fn store_save_warning(failure: &crate::store::SaveManyError) -> Diagnostic {
    let first = &failure.first;
    Diagnostic::warning(match failure.failed {
        1 => format!("could not save an artifact to the store: {first}"),
        n => format!("could not save {n} artifacts to the store (the first: {first})"),
    })
}
