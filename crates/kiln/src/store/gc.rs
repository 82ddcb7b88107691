//! Garbage collection and usage of the local store.
//!
//! Recency is each row's `last_used` (seconds): a save sets it, and a hit refreshes it in a
//! later batch (see [`LocalStore::TOUCH_INTERVAL`]). Collection runs in one write
//! transaction while other processes use the store: their loads of a removed entry miss.

use std::fs;

use rusqlite::TransactionBehavior;

use super::local::BUSY_TIMEOUT;
use super::{LocalStore, Namespace, StoreError};

/// What one [`LocalStore::gc`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Entries found.
    pub scanned: u64,
    /// Entries removed, least recently used first.
    pub removed: u64,
    /// Payload bytes of the removed entries.
    pub freed_bytes: u64,
    /// Payload bytes of the entries kept (at most the bound asked for).
    pub remaining_bytes: u64,
    /// Size of the database file (and its write-ahead log) afterwards: the payloads plus
    /// SQLite's pages and indexes.
    pub database_bytes: u64,
}

/// Entries and bytes of one namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamespaceUsage {
    /// The namespace's name ([`Namespace::dir_name`]).
    pub dir_name: String,
    /// The namespace, read back from its stored description (`None` if unreadable).
    pub namespace: Option<Namespace>,
    /// Number of entries.
    pub entries: u64,
    /// Payload bytes of the entries.
    pub bytes: u64,
}

/// What a [`LocalStore::usage`] found, namespace by namespace (sorted by name).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreUsage {
    /// One line per namespace.
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

impl LocalStore {
    /// Bounds the store to `max_bytes` of payload by removing the least recently used
    /// entries across all namespaces (ties: oldest row first), then gives the freed pages
    /// back to the file system.
    pub fn gc(&self, max_bytes: u64) -> Result<GcReport, StoreError> {
        // This instance's own hits count as uses before anything is ordered by recency.
        self.flush_recency()?;
        let max = i64::try_from(max_bytes).unwrap_or(i64::MAX);
        let report = self.with_connection(false, |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let (count, mut total): (i64, i64) = tx.query_row(
                "SELECT count(*), coalesce(sum(size), 0) FROM entries",
                [],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )?;
            let mut report = GcReport {
                scanned: count.unsigned_abs(),
                ..GcReport::default()
            };
            if total > max {
                let mut victims = Vec::new();
                {
                    let mut oldest =
                        tx.prepare("SELECT id, size FROM entries ORDER BY last_used, id")?;
                    let mut rows = oldest.query([])?;
                    while total > max {
                        let Some(row) = rows.next()? else { break };
                        let (id, size): (i64, i64) = (row.get(0)?, row.get(1)?);
                        victims.push(id);
                        total -= size;
                        report.freed_bytes += size.unsigned_abs();
                    }
                }
                let mut delete = tx.prepare("DELETE FROM entries WHERE id = ?1")?;
                for id in &victims {
                    delete.execute([id])?;
                }
                report.removed = victims.len() as u64;
            }
            report.remaining_bytes = total.unsigned_abs();
            tx.commit()?;
            // Free pages go back to the file system, and the log is folded into the file
            // and emptied, so the directory really shrinks. A reader in another process can
            // keep the checkpoint from completing; the next one finishes it.
            // Each step of this pragma frees one page: step it to the end.
            {
                let mut vacuum = conn.prepare("PRAGMA incremental_vacuum")?;
                let mut steps = vacuum.query([])?;
                while steps.next()?.is_some() {}
            }
            // The checkpoint lock is outside SQLite's busy timeout: while another
            // checkpoint holds it (this store's own thread after a save, or another
            // process's), the pragma answers "busy" at once. Wait for it like for a lock.
            let started = std::time::Instant::now();
            loop {
                let busy: i64 =
                    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| row.get(0))?;
                if busy == 0 || started.elapsed() >= BUSY_TIMEOUT {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            Ok(report)
        })?;
        let mut report = report.unwrap_or_default();
        report.database_bytes = self.database_bytes();
        Ok(report)
    }

    /// Entries and payload bytes per namespace.
    pub fn usage(&self) -> Result<StoreUsage, StoreError> {
        let namespaces = self.with_connection(false, |conn| {
            let mut query = conn.prepare(
                "SELECT n.name, n.description, count(e.id), coalesce(sum(e.size), 0)
                 FROM namespaces n LEFT JOIN entries e ON e.namespace = n.id
                 GROUP BY n.id ORDER BY n.name",
            )?;
            let rows = query.query_map([], |row| {
                let description: String = row.get(1)?;
                Ok(NamespaceUsage {
                    dir_name: row.get(0)?,
                    namespace: Namespace::from_json(&description).ok(),
                    entries: row.get::<_, i64>(2)?.unsigned_abs(),
                    bytes: row.get::<_, i64>(3)?.unsigned_abs(),
                })
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })?;
        Ok(StoreUsage {
            namespaces: namespaces.unwrap_or_default(),
        })
    }

    /// Bytes of the database file and its write-ahead log on disk (0 when absent).
    pub fn database_bytes(&self) -> u64 {
        let mut wal = self.database_path().as_os_str().to_owned();
        wal.push("-wal");
        [self.database_path().to_path_buf(), wal.into()]
            .iter()
            .filter_map(|path| fs::metadata(path).ok())
            .map(|meta| meta.len())
            .sum()
    }
}
