//! Folding the store's write-ahead log into the database on a thread of its own.
//!
//! In WAL mode every saved page is written twice: appended to the log at commit, then copied
//! into the database by a checkpoint, which syncs the log and the database to disk
//! (`synchronous=NORMAL` syncs only there). Left to SQLite, the checkpoint runs inside a
//! commit once the log is long, or when the last connection closes: a cold build of 2,000
//! variants (a 34 MB store) then waited about 55 ms on the two syncs of its close, and 12 ms
//! more to unlink the 34 MB log, with nothing else to do meanwhile (seen with `strace -T`).
//!
//! Here a save asks for a checkpoint and goes on; one thread per store runs it while the
//! build keeps compiling. A checkpoint that has folded the whole log lets the next commit
//! write the log from its start again, so the log stays about one save batch long and its
//! blocks are reused instead of allocated. Closing then folds only the last batch.
//!
//! A checkpoint is `PASSIVE`: it never waits for, or blocks, a reader or a writer of any
//! process; what it cannot fold now, the next one does. Crash safety is SQLite's own: a
//! process killed mid-checkpoint leaves a log that the next connection replays.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};
use rusqlite::{Connection, OpenFlags};

/// Runs checkpoints of one database file on request, on a thread started by the first
/// request (a build that saves nothing starts none).
#[derive(Debug)]
pub(crate) struct Checkpointer {
    path: PathBuf,
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// A save committed since the last checkpoint started.
    requested: bool,
    /// The store is closing: the thread ends (the close folds what is left).
    stopping: bool,
}

impl Checkpointer {
    pub(crate) fn new(path: PathBuf) -> Self {
        Checkpointer {
            path,
            shared: Arc::default(),
            thread: Mutex::new(None),
        }
    }

    /// Asks for a checkpoint after a commit. Requests made while one runs are folded into
    /// one more run.
    pub(crate) fn request(&self) {
        {
            let mut state = self.shared.state.lock();
            if state.stopping {
                return;
            }
            state.requested = true;
        }
        self.shared.wake.notify_one();
        let mut thread = self.thread.lock();
        if thread.is_none() {
            let shared = Arc::clone(&self.shared);
            let path = self.path.clone();
            match std::thread::Builder::new()
                .name("kiln-checkpoint".to_owned())
                .spawn(move || run(&shared, &path))
            {
                Ok(handle) => *thread = Some(handle),
                // Without the thread the log is folded where SQLite would fold it anyway.
                Err(error) => tracing::debug!(%error, "cannot start the store's checkpoint thread"),
            }
        }
    }

    /// Ends the thread, after the checkpoint it is running, if any.
    pub(crate) fn stop(&self) {
        self.shared.state.lock().stopping = true;
        self.shared.wake.notify_one();
        if let Some(handle) = self.thread.lock().take() {
            // A panic in the thread lost a checkpoint at most; the close folds the log.
            let _ = handle.join();
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(shared: &Shared, path: &Path) {
    loop {
        {
            let mut state = shared.state.lock();
            while !state.requested && !state.stopping {
                shared.wake.wait(&mut state);
            }
            if state.stopping {
                return;
            }
            state.requested = false;
        }
        if let Err(error) = checkpoint(path) {
            // Busy (another checkpoint runs), or the file is gone or damaged: the store's
            // own connections meet and report that; the next request tries again.
            tracing::debug!(%error, path = %path.display(), "store checkpoint skipped");
        }
    }
}

/// One passive checkpoint, on a connection of its own. Opened per run rather than kept:
/// the store may replace a damaged database file, and a kept connection would go on
/// folding the old one.
fn checkpoint(path: &Path) -> rusqlite::Result<()> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
        let busy: i64 = row.get(0)?;
        if busy != 0 {
            return Err(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
                Some("another checkpoint is running".to_owned()),
            ));
        }
        Ok(())
    })
}
