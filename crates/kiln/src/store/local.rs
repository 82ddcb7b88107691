//! The local disk store: one checksummed file per entry, written by atomic rename.
//!
//! Layout: `<root>/v1/<namespace dir>/<first 2 hex of key>/<64 hex of key>`, plus
//! `<root>/v1/<namespace dir>/namespace.json` describing the namespace to humans. `v1` is the
//! layout version: a future layout gets a sibling directory instead of misreading this one.

use std::fs::{self, File, Metadata};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use rustc_hash::FxHashSet;
use tempfile::NamedTempFile;

use super::entry::{self, CorruptReason, HEADER_LEN};
use super::{ArtifactStore, ContentKey, Lookup, Namespace, StoreError};

/// A store in a directory on local disk, shareable by any number of threads and processes.
///
/// No locks are taken, on disk or in memory, on the load path. Concurrent processes are safe
/// because an entry's content is a function of its key and an entry appears by `rename`:
/// writers of one key race to rename identical bytes into place, and readers see either no
/// file or a whole one.
///
/// Durability: by default a save does not `fsync`. A crash can then leave an entry empty or
/// partly written, but the checksum detects it on the next load, which reports
/// [`Lookup::Corrupt`] and the caller rebuilds: for a cache, that is cheaper than an fsync per
/// artifact. [`LocalStore::with_sync_writes`] turns fsync on for stores that must survive
/// crashes intact (e.g. one shared by a build farm).
#[derive(Debug)]
pub struct LocalStore {
    root: PathBuf,
    sync_writes: bool,
    /// Namespace directories this instance has created (with their `namespace.json`), so
    /// saves do not re-check them.
    prepared: Mutex<FxHashSet<String>>,
}

impl LocalStore {
    /// The layout version directory under the root.
    pub const LAYOUT_DIR: &'static str = "v1";
    /// The human-readable description inside each namespace directory.
    pub const NAMESPACE_FILE: &'static str = "namespace.json";
    /// Prefix of temporary files; garbage collection removes stale ones.
    pub const TEMP_PREFIX: &'static str = ".tmp-";
    /// A hit refreshes its entry's modification time (the recency that garbage collection
    /// orders by) only when it is older than this, so a warm build that loads thousands of
    /// entries twice within a minute pays one `futimens` per entry, not one per load. Garbage
    /// collection therefore sees recency to within this interval.
    pub const TOUCH_INTERVAL: Duration = Duration::from_secs(60);

    /// A store rooted at `root` (for kiln, `.kiln/` beside the manifest). Nothing is created
    /// until the first save, so loading from a store that does not exist yet is a miss.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        LocalStore {
            root: root.into(),
            sync_writes: false,
            prepared: Mutex::new(FxHashSet::default()),
        }
    }

    /// Whether saves `fsync` the entry and its directory before returning (default: no).
    pub fn with_sync_writes(mut self, sync: bool) -> Self {
        self.sync_writes = sync;
        self
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<root>/v1`: the directory holding every namespace.
    pub fn layout_dir(&self) -> PathBuf {
        self.root.join(Self::LAYOUT_DIR)
    }

    /// The directory of `ns`.
    pub fn namespace_dir(&self, ns: &Namespace) -> PathBuf {
        self.layout_dir().join(ns.dir_name())
    }

    /// The file an entry lives in (whether or not it exists).
    pub fn entry_path(&self, ns: &Namespace, key: &ContentKey) -> PathBuf {
        let hex = key.to_hex();
        let mut path = self.namespace_dir(ns);
        path.push(&hex[..2]);
        path.push(hex);
        path
    }

    /// Creates the namespace directory and its `namespace.json`, once per instance unless
    /// `force`d (after the directory vanished under us).
    fn prepare_namespace(&self, ns: &Namespace, force: bool) -> Result<(), StoreError> {
        if !force && self.prepared.lock().contains(ns.dir_name()) {
            return Ok(());
        }
        let dir = self.namespace_dir(ns);
        create_dir_all(&dir)?;
        let description = dir.join(Self::NAMESPACE_FILE);
        if !description.is_file() {
            // Racing processes write identical text; the last rename wins harmlessly.
            let mut temp = self.create_temp(&dir).map_err(|source| StoreError::Write {
                path: description.clone(),
                source,
            })?;
            self.write_parts(&mut temp, &[ns.to_json().as_bytes()])
                .and_then(|()| persist(temp, &description, self.sync_writes, &dir))
                .map_err(|source| StoreError::Write {
                    path: description.clone(),
                    source,
                })?;
        }
        self.prepared.lock().insert(ns.dir_name().to_owned());
        Ok(())
    }

    fn create_temp(&self, dir: &Path) -> io::Result<NamedTempFile> {
        let mut builder = tempfile::Builder::new();
        builder.prefix(Self::TEMP_PREFIX);
        // tempfile's default 0600 would keep other users sharing the cache from reading it;
        // 0666 is narrowed by the umask like any other new file.
        #[cfg(unix)]
        builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
        builder.tempfile_in(dir)
    }

    /// Writes `parts` to `temp`, fsyncing the file if this store syncs writes.
    fn write_parts(&self, temp: &mut NamedTempFile, parts: &[&[u8]]) -> io::Result<()> {
        for part in parts {
            temp.write_all(part)?;
        }
        if self.sync_writes {
            temp.as_file().sync_all()?;
        }
        Ok(())
    }
}

impl ArtifactStore for LocalStore {
    /// Four system calls for a hit (`open`, `fstat`, one `read`, `close`), plus one
    /// `futimens` for an entry not used within [`LocalStore::TOUCH_INTERVAL`]; one (`open`)
    /// for a miss. No directory is listed and no lock is taken.
    fn load(&self, ns: &Namespace, key: &ContentKey) -> Result<Lookup, StoreError> {
        let path = self.entry_path(ns, key);
        let mut file = match File::open(&path) {
            Ok(file) => file,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Lookup::Miss),
            Err(source) => return Err(StoreError::Read { path, source }),
        };
        let verified = file
            .metadata()
            .and_then(|meta| Ok((read_verified(&mut file, meta.len(), key)?, meta)));
        match verified {
            Ok((Ok(payload), meta)) => {
                refresh_recency(&file, &meta, &path);
                Ok(Lookup::Hit(payload))
            }
            Ok((Err(reason), _)) => {
                drop(file);
                discard(&path, &reason);
                Ok(Lookup::Corrupt { path, reason })
            }
            Err(source) => Err(StoreError::Read { path, source }),
        }
    }

    fn save(&self, ns: &Namespace, key: &ContentKey, bytes: &[u8]) -> Result<(), StoreError> {
        let path = self.entry_path(ns, key);
        let Some(shard) = path.parent().map(Path::to_path_buf) else {
            // entry_path always has a parent; keep the error typed rather than panic.
            return Err(StoreError::Write {
                path,
                source: io::Error::other("entry path has no parent directory"),
            });
        };
        let write_err = |source| StoreError::Write {
            path: path.clone(),
            source,
        };
        self.prepare_namespace(ns, false)?;
        let mut temp = match self.create_temp(&shard) {
            Ok(temp) => temp,
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                // First entry of this shard, or the store was deleted under us.
                self.prepare_namespace(ns, true)?;
                create_dir_all(&shard)?;
                self.create_temp(&shard).map_err(write_err)?
            }
            Err(source) => return Err(write_err(source)),
        };
        let header = entry::encode_header(key, bytes);
        self.write_parts(&mut temp, &[&header, bytes])
            .map_err(write_err)?;
        match persist(temp, &path, self.sync_writes, &shard) {
            Ok(()) => Ok(()),
            // Where rename cannot replace a file (Windows, while a reader holds it open),
            // another writer got there first; its bytes are ours if they verify.
            Err(source) if holds_valid_entry(&path, key) => {
                tracing::debug!(
                    path = %path.display(),
                    error = %source,
                    "store entry already written by another writer"
                );
                Ok(())
            }
            Err(source) => Err(write_err(source)),
        }
    }
}

/// Renames `temp` to `path`, then (if `sync`) fsyncs `dir` so the rename itself is durable.
fn persist(temp: NamedTempFile, path: &Path, sync: bool, dir: &Path) -> io::Result<()> {
    // On failure the returned temp file is dropped, which deletes it.
    temp.persist(path).map_err(|err| err.error)?;
    if sync {
        sync_dir(dir)?;
    }
    Ok(())
}

#[cfg(unix)]
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> io::Result<()> {
    // Directories cannot be opened for syncing here; the rename is as durable as the OS makes it.
    Ok(())
}

fn create_dir_all(dir: &Path) -> Result<(), StoreError> {
    fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })
}

/// Reads an entry of `file_len` bytes and verifies it against `key`. The outer error is an
/// io failure; the inner one is a verdict on the bytes.
///
/// The whole file is read with one `read` into one buffer sized by `fstat` (never by the
/// header's claims), and the header is then shifted out: a `memmove` is cheaper than the
/// extra `read` calls of reading header and payload separately.
fn read_verified(
    file: &mut File,
    file_len: u64,
    key: &ContentKey,
) -> io::Result<Result<Vec<u8>, CorruptReason>> {
    // A file too large to hold in memory is an io failure (reported with its path), not an
    // allocation abort.
    let too_large = || io::Error::new(io::ErrorKind::OutOfMemory, "store entry too large to load");
    let capacity = usize::try_from(file_len).map_err(|_| too_large())?;
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(capacity).map_err(|_| too_large())?;
    bytes.resize(capacity, 0);
    let read = read_up_to(file, &mut bytes)?;
    bytes.truncate(read);
    if let Err(reason) = entry::decode(&bytes, key) {
        return Ok(Err(reason));
    }
    bytes.drain(..HEADER_LEN);
    Ok(Ok(bytes))
}

/// Fills as much of `buf` as the file has, returning how much that was.
fn read_up_to(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(filled)
}

fn holds_valid_entry(path: &Path, key: &ContentKey) -> bool {
    let Ok(mut file) = File::open(path) else {
        return false;
    };
    let Ok(meta) = file.metadata() else {
        return false;
    };
    matches!(read_verified(&mut file, meta.len(), key), Ok(Ok(_)))
}

/// Marks a hit entry as recently used, for garbage collection, unless it already is.
/// Best effort: a store shared with other users may not let us touch their files.
fn refresh_recency(file: &File, meta: &Metadata, path: &Path) {
    let now = SystemTime::now();
    let stale = meta
        .modified()
        .ok()
        .and_then(|modified| now.duration_since(modified).ok())
        .is_some_and(|age| age >= LocalStore::TOUCH_INTERVAL);
    if stale {
        if let Err(error) = file.set_modified(now) {
            tracing::debug!(path = %path.display(), %error, "cannot refresh store entry mtime");
        }
    }
}

/// Removes a corrupt entry so the rebuilt artifact can take its place.
///
/// Another process may have removed it already (fine), or replaced it with a valid entry
/// between our read and this removal; then that good entry is lost too, which costs one
/// rebuild and never serves bad bytes.
fn discard(path: &Path, reason: &CorruptReason) {
    // The caller reports the corrupt entry (`Lookup::Corrupt`); only a failure to remove it
    // is news.
    tracing::debug!(path = %path.display(), %reason, "discarding corrupt store entry");
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "cannot remove corrupt store entry")
        }
    }
}
