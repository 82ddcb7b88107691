//! The local disk store: one SQLite database per cache directory.
//!
//! Layout: `<root>/store.sqlite` (with SQLite's `-wal` and `-shm` companions while it is in
//! use). One row per entry holds the namespace, the content key, the payload, its length and
//! blake3 checksum, and the time it was last used. The schema version is SQLite's
//! `user_version`, and `application_id` marks the file as kiln's.
//!
//! Why SQLite rather than a file per entry: on ext4 under load, creating, renaming and
//! opening thousands of small files was the slowest thing a build did; SQLite packs small
//! blobs into pages, writes a build's entries in a few transactions, and gives atomicity,
//! crash safety and multi-process sharing (WAL mode, busy timeout) that the file store had to
//! hand-build with temporary files and renames.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use rusqlite::types::{Value, ValueRef};
use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior};
use rustc_hash::FxHashMap;

use super::checkpoint::Checkpointer;
use super::verify::{self, CorruptReason};
use super::{ArtifactStore, ContentKey, Lookup, Namespace, SaveEntry, SaveManyError, StoreError};

/// A store in one SQLite database on local disk, shareable by any number of threads and
/// processes.
///
/// Threads each borrow a connection from a small pool, so loads run in parallel (WAL mode
/// lets readers proceed while a writer commits). Saves are batched: [`ArtifactStore::save_many`]
/// writes many entries per short `BEGIN IMMEDIATE` transaction, and other processes wait for
/// it through SQLite's busy timeout.
///
/// Durability: `synchronous=NORMAL` in WAL mode. A killed process loses nothing it committed;
/// a power loss may lose the last transactions but never leaves a damaged database. For a
/// cache, losing recent entries costs a rebuild, which is cheaper than an fsync per commit.
#[derive(Debug)]
pub struct LocalStore {
    root: PathBuf,
    path: PathBuf,
    pool: Mutex<Pool>,
    /// Row ids of hits whose recency is stale, refreshed in one transaction by the next
    /// save, [`ArtifactStore::flush`], or drop: a load never writes.
    touched: Mutex<Vec<i64>>,
    /// Whether this instance looked for a file-per-entry store of older kilns.
    old_layout_checked: AtomicBool,
    /// Folds the log into the database while the build goes on (see `checkpoint`).
    checkpointer: Checkpointer,
}

#[derive(Debug, Default)]
struct Pool {
    idle: Vec<Pooled>,
    /// Bumped when the database file is replaced: connections of an older generation still
    /// point at the old file and are closed instead of returned.
    generation: u64,
}

/// A connection and what it learned of its database file.
#[derive(Debug)]
pub(crate) struct Pooled {
    pub(crate) conn: Connection,
    /// Namespace name -> row id, as read through this connection. Per connection, not per
    /// store: a connection reads one database file for its whole life, and in that file a
    /// namespace row is never deleted or renumbered, so its id can never be stale, even if
    /// another process replaced the file (an id cached per store could then name another
    /// namespace's row in the new file, and serve one target's bytes for another).
    namespaces: FxHashMap<Box<str>, i64>,
}

impl Pooled {
    /// The id of `ns` in this connection's database, if it has one: cached, else one
    /// indexed lookup (the answer "none" is not cached: another process may add it).
    fn namespace_id(&mut self, ns: &Namespace) -> rusqlite::Result<Option<i64>> {
        if let Some(&id) = self.namespaces.get(ns.dir_name()) {
            return Ok(Some(id));
        }
        let id: Option<i64> = self
            .conn
            .prepare_cached("SELECT id FROM namespaces WHERE name = ?1")?
            .query_row([ns.dir_name()], |row| row.get(0))
            .optional()?;
        if let Some(id) = id {
            self.namespaces.insert(Box::from(ns.dir_name()), id);
        }
        Ok(id)
    }

    /// The id of `ns`, inserting it (and its description for humans) if new; inside a
    /// write transaction. Cached only once the transaction commits (see `commit_namespaces`).
    fn namespace_id_for_write(
        namespaces: &FxHashMap<Box<str>, i64>,
        tx: &Connection,
        ns: &Namespace,
    ) -> rusqlite::Result<i64> {
        match namespaces.get(ns.dir_name()) {
            Some(&id) => Ok(id),
            None => namespace_id(tx, ns),
        }
    }
}

/// Connections kept open between uses; more threads than this open and close their own.
const MAX_IDLE: usize = 16;

/// How long a connection waits for another process's write transaction before failing.
pub(super) const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// SQLite folds the log into the database inside a commit once it holds this many pages
/// (its default is 1,000, 4 MiB). Each fold syncs the log and the database, which waits for
/// the disk; the store's checkpoint thread normally folds the log long before this, off the
/// build's path (see `checkpoint`), so this is the bound for when that thread falls behind.
const WAL_CHECKPOINT_PAGES: u32 = 16_384;

/// After a fold, the log file is cut back to this many bytes (it is reused, not regrown).
const WAL_SIZE_LIMIT: u64 = 64 << 20;

/// One transaction writes at most this many payload bytes (and [`MAX_BATCH_ENTRIES`]
/// entries), so that other processes' writers are not kept waiting long.
const MAX_BATCH_BYTES: usize = 8 << 20;
const MAX_BATCH_ENTRIES: usize = 2048;

/// Pending recency refreshes above this many are written at once.
const MAX_TOUCHED: usize = 4096;

/// The schema this build reads and writes (SQLite's `user_version`).
const SCHEMA_VERSION: i64 = 1;
/// `PRAGMA application_id`: "KILN" in ASCII.
const APPLICATION_ID: i64 = 0x4B49_4C4E;

const SCHEMA: &str = "
CREATE TABLE namespaces (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    description TEXT NOT NULL
);
-- The payload comes last so that reading the other columns never walks its overflow pages.
CREATE TABLE entries (
    id INTEGER PRIMARY KEY,
    namespace INTEGER NOT NULL REFERENCES namespaces (id),
    key BLOB NOT NULL,
    size INTEGER NOT NULL,
    checksum BLOB NOT NULL,
    last_used INTEGER NOT NULL,
    payload BLOB NOT NULL,
    UNIQUE (namespace, key)
);
CREATE INDEX entries_by_last_use ON entries (last_used);
";

/// By namespace id (cached per connection) and key: one lookup in the unique index.
const LOAD: &str = "SELECT id, size, checksum, last_used, payload
    FROM entries WHERE namespace = ?1 AND key = ?2";

/// An entry's id, size, checksum and last use, as [`recorded_in`] reads them.
type RecordedRow = (i64, i64, Vec<u8>, i64);

/// The recorded size and checksum of a key's entries in `count` namespaces, without their
/// payloads: bound to the key, then the namespace ids.
fn recorded_in(count: usize) -> String {
    let ids: Vec<String> = (0..count).map(|n| format!("?{}", n + 2)).collect();
    format!(
        "SELECT namespace, id, size, checksum, last_used FROM entries \
         WHERE key = ?1 AND namespace IN ({})",
        ids.join(", ")
    )
}

/// The recorded size and checksum of a key's entry in one namespace, without its payload.
const RECORDED_ONE: &str =
    "SELECT id, size, checksum, last_used FROM entries WHERE namespace = ?1 AND key = ?2";

/// Whether an entry exists, without reading its columns.
const CONTAINS: &str = "SELECT 1 FROM entries WHERE namespace = ?1 AND key = ?2";

/// Identical content (another process saved the same key) is not rewritten.
const UPSERT: &str = "INSERT INTO entries (namespace, key, size, checksum, last_used, payload)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6)
    ON CONFLICT (namespace, key) DO UPDATE SET
        size = excluded.size, checksum = excluded.checksum,
        last_used = excluded.last_used, payload = excluded.payload
    WHERE entries.checksum IS NOT excluded.checksum OR entries.size IS NOT excluded.size";

impl LocalStore {
    /// The database file under the root.
    pub const DATABASE_FILE: &'static str = "store.sqlite";
    /// The directory of the file-per-entry store of older kilns, removed when found.
    pub const OLD_LAYOUT_DIR: &'static str = "v1";
    /// A hit refreshes its entry's recency (what garbage collection orders by) only when it
    /// is older than this, so a warm build that loads thousands of entries writes recency
    /// once a minute at most, in one transaction. Recency is kept to the second.
    pub const TOUCH_INTERVAL: Duration = Duration::from_secs(60);

    /// A store rooted at `root` (for kiln, `.kiln/` beside the manifest). Nothing is created
    /// until the first save, so loading from a store that does not exist yet is a miss.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        let path = root.join(Self::DATABASE_FILE);
        LocalStore {
            checkpointer: Checkpointer::new(path.clone()),
            path,
            root,
            pool: Mutex::default(),
            touched: Mutex::default(),
            old_layout_checked: AtomicBool::new(false),
        }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The database file.
    pub fn database_path(&self) -> &Path {
        &self.path
    }

    /// Stores many entries: one transaction per batch of up to 8 MiB, instead of one per
    /// entry. Also writes pending recency refreshes.
    fn write_entries(
        &self,
        entries: &[SaveEntry<'_>],
        hashes: Option<&[ContentKey]>,
    ) -> Result<(), SaveManyError> {
        let now = unix_now();
        // Hash outside the write transaction, which other processes may be waiting on. The
        // checksum is the payload's blake3 hash: the caller's when it has one.
        let sums: Vec<[u8; verify::CHECKSUM_LEN]> = match hashes {
            Some(hashes) if hashes.len() == entries.len() => {
                hashes.iter().map(|hash| *hash.as_bytes()).collect()
            }
            _ => entries
                .iter()
                .map(|(_, _, bytes)| verify::checksum(bytes))
                .collect(),
        };
        self.forget_vanished_database();
        let mut failure: Option<SaveManyError> = None;
        let mut start = 0;
        while start < entries.len() {
            let mut end = start;
            let mut bytes = 0;
            while end < entries.len()
                && end - start < MAX_BATCH_ENTRIES
                && (end == start || bytes + entries[end].2.len() <= MAX_BATCH_BYTES)
            {
                bytes += entries[end].2.len();
                end += 1;
            }
            let touched = std::mem::take(&mut *self.touched.lock());
            let batch = &entries[start..end];
            let written = self.with_pooled(true, |pooled| {
                let known = &pooled.namespaces;
                let tx = pooled
                    .conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)?;
                let mut namespaces: FxHashMap<&str, i64> = FxHashMap::default();
                for ((ns, key, payload), sum) in batch.iter().zip(&sums[start..end]) {
                    let ns_id = match namespaces.get(ns.dir_name()) {
                        Some(&id) => id,
                        None => {
                            let id = Pooled::namespace_id_for_write(known, &tx, ns)?;
                            namespaces.insert(ns.dir_name(), id);
                            id
                        }
                    };
                    tx.prepare_cached(UPSERT)?.execute(rusqlite::params![
                        ns_id,
                        &key.as_bytes()[..],
                        payload.len() as i64,
                        &sum[..],
                        now,
                        payload,
                    ])?;
                }
                write_recency(&tx, &touched, now)?;
                tx.commit()?;
                let learned: Vec<(Box<str>, i64)> = namespaces
                    .into_iter()
                    .map(|(name, id)| (Box::from(name), id))
                    .collect();
                pooled.namespaces.extend(learned);
                Ok(())
            });
            if let Err(first) = written {
                // Later batches may still fit (a transient lock, a full disk freed).
                failure
                    .get_or_insert(SaveManyError { failed: 0, first })
                    .failed += end - start;
            }
            start = end;
        }
        if failure.as_ref().is_none_or(|f| f.failed < entries.len()) {
            self.checkpointer.request();
        }
        failure.map_or(Ok(()), Err)
    }

    /// If the database file was deleted (someone cleared `.kiln/` while `kiln watch` ran),
    /// pooled connections would go on writing to the unlinked file: drop them, so this
    /// save creates a new one. One `stat` per batch of saves.
    fn forget_vanished_database(&self) {
        if self.path.exists() {
            return;
        }
        let mut pool = self.pool.lock();
        if !pool.idle.is_empty() {
            pool.idle.clear();
            pool.generation += 1;
        }
    }

    /// Writes pending recency refreshes now.
    pub(crate) fn flush_recency(&self) -> Result<(), StoreError> {
        let touched = std::mem::take(&mut *self.touched.lock());
        if touched.is_empty() {
            return Ok(());
        }
        let now = unix_now();
        self.with_connection(false, |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            write_recency(&tx, &touched, now)?;
            tx.commit()
        })
        .map(|_| ())
    }

    /// Counts a use of row `id` for recency, written in batches (see `flush_recency`).
    fn touch(&self, id: i64, last_used: i64) {
        let now = unix_now();
        if now.saturating_sub(last_used) < Self::TOUCH_INTERVAL.as_secs() as i64 {
            return;
        }
        let flush = {
            let mut touched = self.touched.lock();
            touched.push(id);
            touched.len() >= MAX_TOUCHED
        };
        if flush {
            if let Err(error) = self.flush_recency() {
                tracing::debug!(%error, "cannot refresh store recency");
            }
        }
    }

    /// Deletes a row that failed verification, so the rebuilt artifact can take its place
    /// and the damage is reported once. Only the row as it was read goes: if another process
    /// replaced it with good content meanwhile (a new checksum), that stays.
    fn discard_row(&self, id: i64, checksum: &Value, reason: &CorruptReason) {
        // The caller reports the corrupt entry (`Lookup::Corrupt`); only a failure to remove
        // it is news.
        tracing::debug!(path = %self.path.display(), id, %reason, "discarding corrupt store entry");
        let deleted = self.with_connection(false, |conn| {
            conn.prepare_cached("DELETE FROM entries WHERE id = ?1 AND checksum IS ?2")?
                .execute((id, checksum))
        });
        if let Err(error) = deleted {
            tracing::warn!(path = %self.path.display(), %error, "cannot remove corrupt store entry");
        }
    }

    /// Runs `f` on a pooled connection. With `create`, the database (and its directory) is
    /// created if missing; without, a missing database answers `Ok(None)`.
    ///
    /// A database that SQLite finds damaged (not a database, malformed pages) is removed
    /// with a warning and `f` runs once more on a fresh one: a cache that cannot be read is
    /// worth nothing, and keeping it would fail every build.
    pub(crate) fn with_connection<T>(
        &self,
        create: bool,
        mut f: impl FnMut(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<Option<T>, StoreError> {
        self.with_pooled(create, |pooled| f(&mut pooled.conn))
    }

    /// [`Self::with_connection`] with the connection's cached namespace ids.
    fn with_pooled<T>(
        &self,
        create: bool,
        mut f: impl FnMut(&mut Pooled) -> rusqlite::Result<T>,
    ) -> Result<Option<T>, StoreError> {
        self.remove_old_layout_once();
        let mut retried = false;
        loop {
            let Some((mut conn, generation)) = self.checkout(create)? else {
                return Ok(None);
            };
            match f(&mut conn) {
                Ok(value) => {
                    self.give_back(conn, generation);
                    return Ok(Some(value));
                }
                Err(err) if is_damage(&err) && !retried => {
                    drop(conn);
                    self.discard_damaged(&err, generation)?;
                    retried = true;
                }
                Err(source) => {
                    return Err(StoreError::Database {
                        path: self.path.clone(),
                        source,
                    })
                }
            }
        }
    }

    /// An idle connection, or a new one.
    fn checkout(&self, create: bool) -> Result<Option<(Pooled, u64)>, StoreError> {
        let generation = {
            let mut pool = self.pool.lock();
            if let Some(conn) = pool.idle.pop() {
                return Ok(Some((conn, pool.generation)));
            }
            pool.generation
        };
        if !create && !self.path.exists() {
            return Ok(None);
        }
        let mut retried = false;
        loop {
            match self.open(create) {
                Ok(conn) => {
                    let pooled = Pooled {
                        conn,
                        namespaces: FxHashMap::default(),
                    };
                    return Ok(Some((pooled, generation)));
                }
                Err(OpenError::Damaged(err)) if !retried => {
                    self.discard_damaged(&err, generation)?;
                    if !create {
                        return Ok(None);
                    }
                    retried = true;
                }
                Err(OpenError::Damaged(source) | OpenError::Sqlite(source)) => {
                    return Err(StoreError::Database {
                        path: self.path.clone(),
                        source,
                    })
                }
                Err(OpenError::Store(err)) => return Err(err),
            }
        }
    }

    fn give_back(&self, conn: Pooled, generation: u64) {
        let mut pool = self.pool.lock();
        if pool.generation == generation && pool.idle.len() < MAX_IDLE {
            pool.idle.push(conn);
        }
    }

    /// Opens the database, creating it and its schema if needed.
    fn open(&self, create: bool) -> Result<Connection, OpenError> {
        if create {
            fs::create_dir_all(&self.root).map_err(|source| {
                OpenError::Store(StoreError::CreateDir {
                    path: self.root.clone(),
                    source,
                })
            })?;
        }
        // A database file that is a link could be anybody's: it is not opened, let alone
        // switched to WAL or given kiln's schema.
        let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW;
        if create {
            flags |= OpenFlags::SQLITE_OPEN_CREATE;
        }
        let mut conn = Connection::open_with_flags(&self.path, flags).map_err(OpenError::from)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(OpenError::from)?;
        self.prepare_schema(&mut conn)?;
        Ok(conn)
    }

    fn prepare_schema(&self, conn: &mut Connection) -> Result<(), OpenError> {
        // Whose file this is, before anything is written to it: switching another
        // application's database to WAL changes its header (bytes 18-19) already.
        self.refuse_foreign(conn)?;
        // Must precede the first table; ignored afterwards. Lets gc give pages back.
        conn.execute_batch("PRAGMA auto_vacuum = INCREMENTAL")?;
        // WAL is recorded in the file; setting it again is a no-op. Switching a new database
        // to WAL while another process opens it too can fail at once with SQLITE_BUSY: SQLite
        // skips the busy handler where waiting could deadlock (a read lock to upgrade), so
        // the switch is retried here until the busy timeout.
        let started = std::time::Instant::now();
        let mode: String = loop {
            match conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0)) {
                Err(e)
                    if e.sqlite_error_code() == Some(ErrorCode::DatabaseBusy)
                        && started.elapsed() < BUSY_TIMEOUT =>
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
                other => break other?,
            }
        };
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::debug!(path = %self.path.display(), mode, "store database not in WAL mode");
        }
        conn.execute_batch(&format!(
            "PRAGMA synchronous = NORMAL; PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}; \
             PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}"
        ))?;
        if self.schema_version(conn)? == SCHEMA_VERSION {
            return Ok(());
        }
        // Racing processes: the first to take the write lock creates the schema, the others
        // find it done.
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let version = self.schema_version(&tx)?;
        if version == 0 {
            let tables: i64 =
                tx.query_row("SELECT count(*) FROM sqlite_schema", [], |row| row.get(0))?;
            if tables != 0 {
                return Err(OpenError::Store(
                    self.incompatible("holds tables of another application".to_owned()),
                ));
            }
            tx.execute_batch(SCHEMA)?;
            tx.execute_batch(&format!(
                "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {SCHEMA_VERSION};"
            ))?;
        } else if version != SCHEMA_VERSION {
            return Err(OpenError::Store(self.incompatible(format!(
                "has schema version {version}; this kiln reads version {SCHEMA_VERSION}"
            ))));
        }
        tx.commit()?;
        Ok(())
    }

    /// Refuses a database that is not kiln's: another application id, or tables without
    /// kiln's id and version. Reads only.
    fn refuse_foreign(&self, conn: &Connection) -> Result<(), OpenError> {
        // One statement, one snapshot: another process may be creating the schema.
        let (app, version, tables): (i64, i64, i64) = conn.query_row(
            "SELECT a.application_id, v.user_version, (SELECT count(*) FROM sqlite_schema)
             FROM pragma_application_id AS a, pragma_user_version AS v",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )?;
        if app != APPLICATION_ID && !(app == 0 && version == 0) {
            return Err(OpenError::Store(self.incompatible(format!(
                "belongs to another application (application_id {app:#x})"
            ))));
        }
        if app == 0 && tables != 0 {
            return Err(OpenError::Store(
                self.incompatible("holds tables of another application".to_owned()),
            ));
        }
        Ok(())
    }

    /// `user_version`, after checking the file is kiln's.
    fn schema_version(&self, conn: &Connection) -> Result<i64, OpenError> {
        // One statement, so one snapshot: read as two, another process creating the schema
        // in between showed an application id of 0 with its schema version (a new database
        // taken for another application's; `stores_opening_a_new_database_at_once_all_succeed`
        // under load).
        let (app, version): (i64, i64) = conn.query_row(
            "SELECT a.application_id, v.user_version
             FROM pragma_application_id AS a, pragma_user_version AS v",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )?;
        if app != APPLICATION_ID && !(app == 0 && version == 0) {
            return Err(OpenError::Store(self.incompatible(format!(
                "belongs to another application (application_id {app:#x})"
            ))));
        }
        Ok(version)
    }

    fn incompatible(&self, problem: String) -> StoreError {
        StoreError::Incompatible {
            path: self.path.clone(),
            problem,
        }
    }

    /// Removes a damaged database so the next connection starts an empty one. Only the
    /// first thread to see generation `seen` removes it; later ones use the new file.
    fn discard_damaged(&self, err: &rusqlite::Error, seen: u64) -> Result<(), StoreError> {
        let mut pool = self.pool.lock();
        if pool.generation != seen {
            return Ok(());
        }
        pool.idle.clear();
        pool.generation += 1;
        tracing::warn!(
            path = %self.path.display(),
            error = %err,
            "the store database is damaged; starting an empty store (its artifacts will be rebuilt)"
        );
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut name = self.path.clone().into_os_string();
            name.push(suffix);
            let path = PathBuf::from(name);
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => return Err(StoreError::Remove { path, source }),
            }
        }
        Ok(())
    }

    /// Older kilns kept one file per entry under `<root>/v1/`. Those entries are not read
    /// any more; the directory is removed (once, with one message) to give its space back.
    fn remove_old_layout_once(&self) {
        if self.old_layout_checked.swap(true, Ordering::Relaxed) {
            return;
        }
        let old = self.root.join(Self::OLD_LAYOUT_DIR);
        if !is_old_layout(&old) {
            return;
        }
        match fs::remove_dir_all(&old) {
            Ok(()) => tracing::warn!(
                path = %old.display(),
                "removed the file-per-entry store of an older kiln; artifacts now live in {}",
                self.path.display()
            ),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(error) => tracing::warn!(
                path = %old.display(),
                %error,
                "cannot remove the file-per-entry store of an older kiln; it is ignored"
            ),
        }
    }
}

/// Whether `dir` is an older kiln's store: a real directory holding only namespace
/// directories (`<target>-<16 hex>`), at least one. `--cache-dir` may point anywhere, so a
/// `v1` that is anything else is somebody's data and is left alone.
fn is_old_layout(dir: &Path) -> bool {
    if !fs::symlink_metadata(dir).is_ok_and(|meta| meta.is_dir()) {
        return false;
    }
    let Ok(items) = fs::read_dir(dir) else {
        return false;
    };
    let mut namespaces = 0;
    for item in items {
        let Ok(item) = item else { return false };
        let is_dir = item.file_type().is_ok_and(|kind| kind.is_dir());
        let name = item.file_name();
        let looks_like_namespace =
            name.to_str()
                .and_then(|n| n.rsplit_once('-'))
                .is_some_and(|(target, hash)| {
                    !target.is_empty()
                        && hash.len() == 16
                        && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
                });
        if !is_dir || !looks_like_namespace {
            return false;
        }
        namespaces += 1;
    }
    namespaces > 0
}

/// The failures of opening a connection, with damage told apart.
enum OpenError {
    Damaged(rusqlite::Error),
    Sqlite(rusqlite::Error),
    Store(StoreError),
}

impl From<rusqlite::Error> for OpenError {
    fn from(err: rusqlite::Error) -> Self {
        if is_damage(&err) {
            OpenError::Damaged(err)
        } else {
            OpenError::Sqlite(err)
        }
    }
}

/// SQLite's verdict that the file is not (or no longer) a sound database.
fn is_damage(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase)
    )
}

/// The id of `ns`, inserting it (and its description for humans) if new.
fn namespace_id(conn: &Connection, ns: &Namespace) -> rusqlite::Result<i64> {
    conn.prepare_cached("INSERT OR IGNORE INTO namespaces (name, description) VALUES (?1, ?2)")?
        .execute((ns.dir_name(), ns.to_json()))?;
    conn.prepare_cached("SELECT id FROM namespaces WHERE name = ?1")?
        .query_row([ns.dir_name()], |row| row.get(0))
}

fn write_recency(conn: &Connection, ids: &[i64], now: i64) -> rusqlite::Result<()> {
    // A row id reused since the hit (gc removed the entry, a save reused the id) gets a
    // fresh recency it did not earn: harmless, it only delays its eviction.
    let mut update =
        conn.prepare_cached("UPDATE entries SET last_used = ?1 WHERE id = ?2 AND last_used < ?1")?;
    for id in ids {
        update.execute((now, id))?;
    }
    Ok(())
}

/// Seconds since the epoch (0 for a clock before 1970).
pub(crate) fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// What a load read from a row, before verification.
struct Row {
    id: i64,
    size: i64,
    /// As stored, whatever its type, so that a corrupt row can be deleted by its value.
    checksum: Value,
    last_used: i64,
    payload: Result<Vec<u8>, &'static str>,
}

impl ArtifactStore for LocalStore {
    /// One indexed `SELECT` on a pooled connection; no write (recency is batched).
    fn load(&self, ns: &Namespace, key: &ContentKey) -> Result<Lookup, StoreError> {
        let found = self.with_pooled(false, |pooled| {
            let Some(ns_id) = pooled.namespace_id(ns)? else {
                return Ok(None);
            };
            pooled
                .conn
                .prepare_cached(LOAD)?
                .query_row((ns_id, &key.as_bytes()[..]), |row| {
                    let payload = match row.get_ref(4)? {
                        ValueRef::Blob(bytes) => Ok(bytes.to_vec()),
                        ValueRef::Null => Err("NULL"),
                        ValueRef::Integer(_) => Err("an integer"),
                        ValueRef::Real(_) => Err("a real number"),
                        ValueRef::Text(_) => Err("text"),
                    };
                    Ok(Row {
                        id: row.get(0)?,
                        size: row.get(1)?,
                        checksum: row.get(2)?,
                        last_used: row.get(3)?,
                        payload,
                    })
                })
                .optional()
        })?;
        let Some(Some(row)) = found else {
            return Ok(Lookup::Miss);
        };
        let verdict = match &row.payload {
            Ok(payload) => {
                let recorded = match &row.checksum {
                    Value::Blob(bytes) => bytes.as_slice(),
                    _ => &[],
                };
                verify::verify(
                    u64::try_from(row.size).unwrap_or(u64::MAX),
                    recorded,
                    payload,
                )
            }
            Err(found) => Err(CorruptReason::NotABlob { found }),
        };
        match (verdict, row.payload) {
            (Err(reason), _) => {
                self.discard_row(row.id, &row.checksum, &reason);
                Ok(Lookup::Corrupt {
                    path: self.path.clone(),
                    entry: format!("{}/{}", ns.dir_name(), key.to_hex()),
                    reason,
                })
            }
            (Ok(()), payload) => {
                // `verify` passed, so the payload was a blob.
                let payload = payload.unwrap_or_default();
                self.touch(row.id, row.last_used);
                Ok(Lookup::Hit(payload))
            }
        }
    }

    /// One indexed `SELECT` of the size and checksum (the payload's blake3), not the payload.
    fn recorded(&self, ns: &Namespace, key: &ContentKey) -> Option<(u64, ContentKey)> {
        self.recorded_all(&[ns], key)?.pop()
    }

    /// One connection for all of them: the first target's entry, then the others' in one
    /// statement.
    fn recorded_all(
        &self,
        namespaces: &[&Namespace],
        key: &ContentKey,
    ) -> Option<Vec<(u64, ContentKey)>> {
        if namespaces.is_empty() {
            return Some(Vec::new());
        }
        let found = self.with_pooled(false, |pooled| {
            let mut ids = Vec::with_capacity(namespaces.len());
            for ns in namespaces {
                let Some(ns_id) = pooled.namespace_id(ns)? else {
                    return Ok(None);
                };
                ids.push(ns_id);
            }
            let key_bytes = &key.as_bytes()[..];
            // The first target alone first: a cold build's lookups all miss, and one point
            // lookup answers that (a statement over every target cost four times as much).
            let first: Option<RecordedRow> = pooled
                .conn
                .prepare_cached(RECORDED_ONE)?
                .query_row((ids[0], key_bytes), |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
                })
                .optional()?;
            let Some(first) = first else {
                return Ok(None);
            };
            let mut rows: Vec<Option<RecordedRow>> = vec![None; ids.len()];
            rows[0] = Some(first);
            if ids.len() > 1 {
                // The others in one statement: one read transaction, one walk of the index
                // (a statement each took its own read lock, a third of the lookup's time).
                let rest = &ids[1..];
                let mut statement = pooled.conn.prepare_cached(&recorded_in(rest.len()))?;
                let mut params: Vec<&dyn rusqlite::ToSql> = Vec::with_capacity(rest.len() + 1);
                params.push(&key_bytes);
                params.extend(rest.iter().map(|id| id as &dyn rusqlite::ToSql));
                let mut found = statement.query(params.as_slice())?;
                while let Some(row) = found.next()? {
                    let ns_id: i64 = row.get(0)?;
                    let recorded = (row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?);
                    // A namespace named twice gets the row twice.
                    for (id, slot) in rest.iter().zip(rows[1..].iter_mut()) {
                        if *id == ns_id {
                            *slot = Some(recorded.clone());
                        }
                    }
                }
            }
            Ok(rows.into_iter().collect::<Option<Vec<_>>>())
        });
        let rows = found.ok().flatten().flatten()?;
        let mut recorded = Vec::with_capacity(rows.len());
        for (id, size, checksum, last_used) in rows {
            // A malformed row is not vouched for here; `load` reports and drops it.
            let size = u64::try_from(size).ok()?;
            let hash = ContentKey::from_bytes(checksum.try_into().ok()?);
            self.touch(id, last_used);
            recorded.push((size, hash));
        }
        Some(recorded)
    }

    fn save(&self, ns: &Namespace, key: &ContentKey, bytes: &[u8]) -> Result<(), StoreError> {
        self.write_entries(&[(ns, key, bytes)], None)
            .map_err(|failure| failure.first)
    }

    fn save_many(&self, entries: &[SaveEntry<'_>]) -> Result<(), SaveManyError> {
        self.write_entries(entries, None)
    }

    fn save_many_hashed(
        &self,
        entries: &[SaveEntry<'_>],
        hashes: &[ContentKey],
    ) -> Result<(), SaveManyError> {
        self.write_entries(entries, Some(hashes))
    }

    fn contains_many(&self, entries: &[(Namespace, ContentKey)]) -> Vec<bool> {
        let held = self.with_pooled(false, |pooled| {
            let mut held = Vec::with_capacity(entries.len());
            for (ns, key) in entries {
                let found = match pooled.namespace_id(ns)? {
                    Some(ns_id) => pooled
                        .conn
                        .prepare_cached(CONTAINS)?
                        .exists((ns_id, &key.as_bytes()[..]))?,
                    None => false,
                };
                held.push(found);
            }
            Ok(held)
        });
        match held {
            Ok(Some(held)) => held,
            // No database yet, or it cannot be read: nothing is held.
            Ok(None) | Err(_) => vec![false; entries.len()],
        }
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.flush_recency()
    }
}

impl Drop for LocalStore {
    fn drop(&mut self) {
        if let Err(error) = self.flush_recency() {
            tracing::debug!(%error, "cannot refresh store recency");
        }
        // Before the connections close: the last to close folds what is left of the log,
        // and a checkpoint still running would keep it from being the last.
        self.checkpointer.stop();
    }
}
