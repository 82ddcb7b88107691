//! What kiln knows of the output files it wrote or verified: size, modification time (ns) and
//! inode, the way git's index knows the work tree. An output is trusted without reading it
//! only when all three still match; otherwise it is re-hashed, and rewritten if it differs.
//!
//! Kept beside `index.json` in `.kiln-stat` (not in the index, which must be the same bytes
//! whoever built it). A missing or unreadable file only costs re-hashing the outputs.
//!
//! Like git, kiln treats a file modified in the same clock tick as its recording as "racy":
//! a stat recorded less than [`RACY_NS`] before the set was sealed does not prove the
//! contents, so the file is re-hashed once and recorded again.

use super::output::write_atomic;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::fs::Metadata;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// The name of the stat file in the output directory.
pub const STAT_FILE: &str = ".kiln-stat";

/// Modification times this close to the sealing of the set may hide a later write in the
/// same tick of the file system's clock (ext4 stamps files with a coarse clock).
const RACY_NS: i128 = 100_000_000;

/// Size, modification time and inode of one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FileStat {
    len: u64,
    mtime_ns: i128,
    ino: u64,
}

impl FileStat {
    pub(crate) fn of(meta: &Metadata) -> Self {
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i128);
        Self {
            len: meta.len(),
            mtime_ns,
            ino: inode(meta),
        }
    }
}

#[cfg(unix)]
fn inode(meta: &Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::ino(meta)
}

#[cfg(not(unix))]
fn inode(_: &Metadata) -> u64 {
    0
}

fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

/// The recorded stats of an output directory's files, by index path.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct OutputStats {
    /// When the set was last sealed (end of a build): stats recorded before then, and not
    /// racy, prove their file's contents.
    sealed_ns: i128,
    files: FxHashMap<String, FileStat>,
    /// Changed since read or sealed.
    #[serde(skip)]
    changed: bool,
}

impl OutputStats {
    /// Reads `dir/.kiln-stat`; missing or unreadable is empty.
    pub(crate) fn read(dir: &Path) -> Self {
        std::fs::read(dir.join(STAT_FILE))
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    /// Seals the set (see [`OutputStats::trusts`]) and writes it atomically.
    pub(crate) fn seal_and_write(&mut self, dir: &Path) -> std::io::Result<()> {
        self.sealed_ns = now_ns();
        let json = serde_json::to_vec(self).map_err(std::io::Error::other)?;
        write_atomic(&dir.join(STAT_FILE), &json)?;
        self.changed = false;
        Ok(())
    }

    /// Records the stat of a file whose contents kiln wrote or verified.
    pub(crate) fn record(&mut self, path: &str, stat: FileStat) {
        if self.files.get(path) != Some(&stat) {
            self.files.insert(path.to_owned(), stat);
            self.changed = true;
        }
    }

    /// Forgets a file (removed, or not to be trusted).
    pub(crate) fn forget(&mut self, path: &str) {
        self.changed |= self.files.remove(path).is_some();
    }

    /// Keeps only the files for which `keep` holds.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        let before = self.files.len();
        self.files.retain(|path, _| keep(path));
        self.changed |= self.files.len() != before;
    }

    /// Whether the set must be written again: it changed, or a stat in it is still racy
    /// and sealing it now makes it proof.
    pub(crate) fn needs_write(&self) -> bool {
        self.changed
            || self
                .files
                .values()
                .any(|stat| stat.mtime_ns + RACY_NS >= self.sealed_ns)
    }

    /// Whether the file at `path`, now stat'ed as `current`, certainly still holds the
    /// contents it held when recorded.
    pub(crate) fn trusts(&self, path: &str, current: &FileStat) -> bool {
        self.files.get(path).is_some_and(|recorded| {
            recorded == current && recorded.mtime_ns + RACY_NS < self.sealed_ns
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_same_size_rewrite_is_not_trusted() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("a.spv");
        std::fs::write(&path, b"1f").expect("write");
        let mut stats = OutputStats::default();
        let first = FileStat::of(&std::fs::metadata(&path).expect("stat"));
        stats.record("a.spv", first);
        // Sealed long after the write: not racy.
        stats.sealed_ns = first.mtime_ns + 10 * RACY_NS;
        assert!(stats.trusts("a.spv", &first));
        // Rewritten in place with the same size: another mtime (or, in the same tick, the
        // racy rule) stops the trust.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&path, b"9f").expect("write");
        let second = FileStat::of(&std::fs::metadata(&path).expect("stat"));
        assert_eq!(second.len, first.len);
        assert!(!stats.trusts("a.spv", &second));
    }

    #[test]
    fn a_stat_recorded_just_before_sealing_is_racy() {
        let mut stats = OutputStats::default();
        let stat = FileStat {
            len: 2,
            mtime_ns: now_ns(),
            ino: 7,
        };
        stats.record("a.spv", stat);
        stats.sealed_ns = stat.mtime_ns + RACY_NS / 2;
        assert!(!stats.trusts("a.spv", &stat));
        stats.sealed_ns = stat.mtime_ns + 2 * RACY_NS;
        assert!(stats.trusts("a.spv", &stat));
        assert!(!stats.trusts("b.spv", &stat));
    }
}
