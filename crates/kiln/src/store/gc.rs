//! Garbage collection and usage of the local store: the only code that lists its directories.
//!
//! Recency is each entry file's modification time: a save sets it, and a hit refreshes it
//! (see [`LocalStore::TOUCH_INTERVAL`]). Collection runs while other processes use the store:
//! an entry removed under a reader is a miss for it, and files vanishing during the scan are
//! skipped.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::content_key::is_key_file_name;
use super::{LocalStore, Namespace, StoreError};

/// What one [`LocalStore::gc`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Entries found.
    pub scanned: u64,
    /// Entries removed, least recently used first.
    pub removed: u64,
    /// Bytes of the removed entries and stale temporary files.
    pub freed_bytes: u64,
    /// Bytes of the entries kept (at most the bound asked for).
    pub remaining_bytes: u64,
    /// Stale temporary files removed (left by writers that crashed or were killed).
    pub temps_removed: u64,
}

/// Entries and bytes of one namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamespaceUsage {
    /// The namespace's directory name.
    pub dir_name: String,
    /// The namespace, read back from its `namespace.json` (`None` if missing or unreadable).
    pub namespace: Option<Namespace>,
    /// Number of entries.
    pub entries: u64,
    /// Bytes of the entry files (headers included).
    pub bytes: u64,
}

/// What a [`LocalStore::usage`] found, namespace by namespace (sorted by directory name).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreUsage {
    /// One line per namespace directory.
    pub namespaces: Vec<NamespaceUsage>,
}

impl StoreUsage {
    /// Entries over all namespaces.
    pub fn entries(&self) -> u64 {
        self.namespaces.iter().map(|ns| ns.entries).sum()
    }

    /// Bytes over all namespaces.
    pub fn bytes(&self) -> u64 {
        self.namespaces.iter().map(|ns| ns.bytes).sum()
    }
}

/// A file found by the scan.
struct ScannedFile {
    path: PathBuf,
    bytes: u64,
    modified: SystemTime,
}

/// One namespace directory's entries and temporary files.
struct ScannedNamespace {
    dir_name: String,
    dir: PathBuf,
    entries: Vec<ScannedFile>,
    temps: Vec<ScannedFile>,
}

impl LocalStore {
    /// Temporary files older than this belong to a writer that died; gc removes them.
    /// (A live write takes milliseconds.)
    pub const TEMP_MAX_AGE: Duration = Duration::from_secs(15 * 60);

    /// Bounds the store to `max_bytes` of entry files by removing the least recently used
    /// entries across all namespaces, and removes stale temporary files.
    pub fn gc(&self, max_bytes: u64) -> Result<GcReport, StoreError> {
        let now = SystemTime::now();
        let mut report = GcReport::default();
        let mut entries = Vec::new();
        for namespace in self.scan()? {
            for temp in namespace.temps {
                let stale = now
                    .duration_since(temp.modified)
                    .is_ok_and(|age| age >= Self::TEMP_MAX_AGE);
                if stale && remove(&temp.path)? {
                    report.temps_removed += 1;
                    report.freed_bytes += temp.bytes;
                }
            }
            entries.extend(namespace.entries);
        }
        report.scanned = entries.len() as u64;
        let mut total: u64 = entries.iter().map(|entry| entry.bytes).sum();
        // Oldest first; the path breaks ties so equal mtimes evict in a stable order.
        entries.sort_unstable_by(|a, b| (a.modified, &a.path).cmp(&(b.modified, &b.path)));
        for entry in &entries {
            if total <= max_bytes {
                break;
            }
            if remove(&entry.path)? {
                report.removed += 1;
                report.freed_bytes += entry.bytes;
            }
            // Removed by us or by someone else: either way it no longer counts.
            total -= entry.bytes;
        }
        report.remaining_bytes = total;
        Ok(report)
    }

    /// Entries and bytes per namespace. Lists every directory: not for the build's hot path.
    pub fn usage(&self) -> Result<StoreUsage, StoreError> {
        let namespaces = self
            .scan()?
            .into_iter()
            .map(|namespace| NamespaceUsage {
                namespace: fs::read_to_string(namespace.dir.join(Self::NAMESPACE_FILE))
                    .ok()
                    .and_then(|text| Namespace::from_json(&text).ok()),
                entries: namespace.entries.len() as u64,
                bytes: namespace.entries.iter().map(|entry| entry.bytes).sum(),
                dir_name: namespace.dir_name,
            })
            .collect();
        Ok(StoreUsage { namespaces })
    }

    /// Lists every namespace's entries and temporary files; anything else is left alone.
    fn scan(&self) -> Result<Vec<ScannedNamespace>, StoreError> {
        let mut namespaces = Vec::new();
        for (dir_name, dir, is_dir) in list(&self.layout_dir())? {
            if !is_dir {
                continue;
            }
            let mut namespace = ScannedNamespace {
                dir_name,
                dir,
                entries: Vec::new(),
                temps: Vec::new(),
            };
            for (name, path, is_dir) in list(&namespace.dir)? {
                if is_dir && is_shard_name(&name) {
                    for (name, path, is_dir) in list(&path)? {
                        if !is_dir {
                            classify(name, path, &mut namespace);
                        }
                    }
                } else if !is_dir {
                    // Only temporaries of namespace.json live here.
                    classify(name, path, &mut namespace);
                }
            }
            namespaces.push(namespace);
        }
        namespaces.sort_unstable_by(|a, b| a.dir_name.cmp(&b.dir_name));
        Ok(namespaces)
    }
}

/// Files as `(name, path, is_dir)`; a directory that vanished lists as empty. Names that are
/// not UTF-8 cannot be kiln's and are skipped.
fn list(dir: &Path) -> Result<Vec<(String, PathBuf, bool)>, StoreError> {
    let scan_err = |source| StoreError::Scan {
        path: dir.to_path_buf(),
        source,
    };
    let reader = match fs::read_dir(dir) {
        Ok(reader) => reader,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(scan_err(source)),
    };
    let mut found = Vec::new();
    for item in reader {
        let item = item.map_err(scan_err)?;
        let Ok(name) = item.file_name().into_string() else {
            continue;
        };
        let is_dir = match item.file_type() {
            Ok(kind) => kind.is_dir(),
            Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
            Err(source) => return Err(scan_err(source)),
        };
        found.push((name, item.path(), is_dir));
    }
    Ok(found)
}

/// Files an entry or a temporary file under its namespace; ignores anything else and
/// anything that vanished since it was listed.
fn classify(name: String, path: PathBuf, namespace: &mut ScannedNamespace) {
    let is_entry = is_key_file_name(&name);
    if !is_entry && !name.starts_with(LocalStore::TEMP_PREFIX) {
        return;
    }
    let Ok(meta) = fs::metadata(&path) else {
        return;
    };
    let file = ScannedFile {
        path,
        bytes: meta.len(),
        modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
    };
    if is_entry {
        namespace.entries.push(file);
    } else {
        namespace.temps.push(file);
    }
}

fn is_shard_name(name: &str) -> bool {
    name.len() == 2 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Removes a file; `false` if it was already gone.
fn remove(path: &Path) -> Result<bool, StoreError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(StoreError::Remove {
            path: path.to_path_buf(),
            source,
        }),
    }
}
