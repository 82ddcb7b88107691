//! Events: what the engine did and why, for tests, logs and `kiln explain`.

use std::fmt::Debug;

use crate::revision::Revision;

/// What happened. Events are only built when a listener is installed
/// ([`Database::set_event_listener`](crate::Database::set_event_listener)).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventKind {
    /// The query is about to run its `execute` function.
    WillExecute,
    /// A memo from an earlier revision was found still valid (by durability or by its
    /// edges) and is now verified at the current revision; nothing was executed for it.
    DidValidateMemoizedValue,
    /// The memo could not be validated by durability alone and its dependency edges were
    /// walked (deep verification). Followed by either `DidValidateMemoizedValue` or
    /// `WillExecute` for the same memo.
    DidDeepVerify,
    /// A re-executed query produced a value equal to its previous one (compared by value,
    /// or by fingerprint when the old value had been evicted): its `changed_at` was kept,
    /// so its dependents are not re-executed. Sent once the new value is published: a
    /// listener that reads the memo sees it.
    Backdated,
    /// LRU dropped the memo's value; its edges, revisions and fingerprint are kept.
    Evicted,
    /// This thread waits for another thread that is executing or verifying the same memo.
    WillBlockOn,
    /// An input was set, changed or removed (the key names it).
    DidSetInput,
}

/// One thing the engine did, for one `(query, key)`.
#[derive(Copy, Clone)]
pub struct Event<'a> {
    /// What happened.
    pub kind: EventKind,
    /// [`Query::NAME`](crate::Query::NAME) or [`Input::NAME`](crate::Input::NAME).
    pub query: &'static str,
    /// The key, printable with `{:?}`.
    pub key: &'a dyn Debug,
    /// The revision current when it happened.
    pub revision: Revision,
}

impl Debug for Event<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} {}({:?})", self.kind, self.query, self.key)
    }
}

/// A listener installed with [`Database::set_event_listener`](crate::Database::set_event_listener).
pub(crate) type Listener = Box<dyn Fn(&Event<'_>) + Send + Sync>;
