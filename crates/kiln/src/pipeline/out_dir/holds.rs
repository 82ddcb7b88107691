//! What the output directory holds against what kiln recorded: whether a file still has the
//! bytes an index entry names (proven by its recorded stat, else by reading it), and the
//! entries at a path.

use super::stat::{FileStat, OutputStats};
use super::{Index, IndexEntry, Recorded, INDEX_FILE};
use crate::store::ContentKey;
use std::path::Path;

/// What an output's path holds, as far as writing it is concerned.
pub(crate) enum OnDisk {
    /// This process wrote or verified these bytes there: not looked at.
    Current,
    /// Exactly the output's bytes: proven by the stat kiln recorded for the same contents,
    /// else by reading them. The stat is recorded.
    Holds(FileStat),
    /// Something else (other bytes, a directory, a link): replaced.
    Differs,
    /// Nothing: created.
    Missing,
}

/// What the file at `path` holds against the output of `len` bytes hashing to `hash`.
pub(crate) fn on_disk(
    path: &Path,
    relative: &str,
    len: u64,
    hash: &ContentKey,
    last: &Index,
    stats: &OutputStats,
) -> OnDisk {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return OnDisk::Missing,
        Err(_) => return OnDisk::Differs,
    };
    if !meta.is_file() || meta.len() != len {
        return OnDisk::Differs;
    }
    let stat = FileStat::of(&meta);
    // The recorded stat proves the bytes the previous index names (entries sorted by path).
    let recorded_same = find(&last.entries, relative).is_some_and(|e| e.content_hash == *hash);
    if recorded_same && stats.trusts(relative, &stat) {
        return OnDisk::Holds(stat);
    }
    match std::fs::read(path) {
        Ok(bytes) if ContentKey::hash(&bytes) == *hash => OnDisk::Holds(stat),
        _ => OnDisk::Differs,
    }
}

/// The entry at `path` among entries sorted by path.
pub(crate) fn find<'e>(entries: &'e [IndexEntry], path: &str) -> Option<&'e IndexEntry> {
    let at = entries.binary_search_by(|e| (*e.path).cmp(path)).ok()?;
    entries.get(at)
}

/// The entries at `relative` or under it as a directory, among entries sorted by path;
/// every entry for the empty path (the whole output directory).
pub(crate) fn entries_at<'e>(
    entries: &'e [IndexEntry],
    relative: &str,
) -> impl Iterator<Item = &'e IndexEntry> {
    let (exact, under) = if relative.is_empty() {
        (None, entries)
    } else {
        let prefix = format!("{relative}/");
        let start = entries.partition_point(|e| *e.path < *prefix);
        // Sorted strings sharing a prefix are contiguous.
        let len = entries[start..].partition_point(|e| e.path.starts_with(&prefix));
        (find(entries, relative), &entries[start..start + len])
    };
    exact.into_iter().chain(under)
}

/// Whether `index.json` still holds `index`: proven by its recorded stat, else by reading
/// it (then its stat is recorded).
pub(crate) fn index_holds(out_dir: &Path, index: &Index, stats: &mut OutputStats) -> bool {
    let path = out_dir.join(INDEX_FILE);
    let Ok(meta) = std::fs::symlink_metadata(&path) else {
        return false;
    };
    let stat = FileStat::of(&meta);
    if stats.trusts(INDEX_FILE, &stat) {
        return true;
    }
    let same = std::fs::read(&path)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Index>(&bytes).ok())
        .is_some_and(|on_disk| on_disk == *index);
    if same {
        stats.record(INDEX_FILE, stat);
    }
    same
}

/// Whether `file` (an output or a pack) still holds the bytes the index recorded; records
/// its stat when that had to be proven by reading it.
pub(crate) fn holds(out_dir: &Path, file: &Recorded<'_>, stats: &mut OutputStats) -> bool {
    let path = out_dir.join(file.path);
    let Ok(meta) = std::fs::symlink_metadata(&path) else {
        return false;
    };
    if !meta.is_file() || meta.len() != file.bytes {
        return false;
    }
    let stat = FileStat::of(&meta);
    if stats.trusts(file.path, &stat) {
        return true;
    }
    let same =
        std::fs::read(&path).is_ok_and(|bytes| ContentKey::hash(&bytes) == *file.content_hash);
    if same {
        stats.record(file.path, stat);
    }
    same
}
