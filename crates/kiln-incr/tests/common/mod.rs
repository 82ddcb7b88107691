//! Test helpers: an event log attached to a database, and a live-value counter.

#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use kiln_incr::{Database, EventKind};
use parking_lot::Mutex;

/// Every event, as `Kind query(key)` lines, in order.
#[derive(Clone, Default)]
pub struct EventLog(Arc<Mutex<Vec<String>>>);

impl EventLog {
    pub fn attach<C: Send + Sync + 'static>(db: &mut Database<C>) -> EventLog {
        let log = EventLog::default();
        let sink = log.clone();
        db.set_event_listener(move |event| {
            sink.0
                .lock()
                .push(format!("{:?} {}({:?})", event.kind, event.query, event.key));
        });
        log
    }

    /// All lines since the last call.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock())
    }

    /// Lines of one kind since the last call (the others are dropped).
    pub fn take_kind(&self, kind: EventKind) -> Vec<String> {
        let prefix = format!("{kind:?} ");
        self.take()
            .into_iter()
            .filter(|line| line.starts_with(&prefix))
            .map(|line| line[prefix.len()..].to_owned())
            .collect()
    }

    /// The queries executed since the last call, as `query(key)`.
    pub fn executed(&self) -> Vec<String> {
        self.take_kind(EventKind::WillExecute)
    }
}

/// A value that counts how many of its kind are alive (salsa's `HotPotato`).
#[derive(Debug)]
pub struct HotPotato {
    pub id: u32,
    live: Arc<AtomicUsize>,
}

impl HotPotato {
    pub fn new(id: u32, live: &Arc<AtomicUsize>) -> Self {
        live.fetch_add(1, Ordering::SeqCst);
        HotPotato {
            id,
            live: Arc::clone(live),
        }
    }
}

impl Drop for HotPotato {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::SeqCst);
    }
}

impl PartialEq for HotPotato {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}
impl Eq for HotPotato {}
impl std::hash::Hash for HotPotato {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.id.hash(state);
    }
}

/// A context with a log that queries push to (the seed's `push_log`) and a live counter.
#[derive(Default)]
pub struct LogContext {
    pub log: Mutex<Vec<String>>,
    pub live: Arc<AtomicUsize>,
}

impl LogContext {
    pub fn push_log(&self, line: String) {
        self.log.lock().push(line);
    }

    pub fn take_logs(&self) -> Vec<String> {
        std::mem::take(&mut *self.log.lock())
    }

    pub fn live(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }
}
