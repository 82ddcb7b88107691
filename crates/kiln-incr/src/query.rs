//! The traits a user implements: [`Query`] for derived queries, [`Input`] for inputs.

use std::fmt::Debug;
use std::hash::Hash;

use crate::database::Database;
use crate::error::QueryError;

/// A 128-bit fingerprint of a value, kept after the value is evicted so that a
/// re-executed query can still be backdated.
pub type Fingerprint = u128;

/// The bounds every key (of a query or an input) satisfies.
pub trait QueryKey: Clone + Eq + Hash + Debug + Send + Sync + 'static {}
impl<T: Clone + Eq + Hash + Debug + Send + Sync + 'static> QueryKey for T {}

/// A derived query: a pure function of its key and of what it reads through the
/// database. Implement it on a unit struct; fetch with [`Database::get`].
///
/// `C` is the database's user context ([`Database::context`]).
pub trait Query<C = ()>: 'static {
    /// The key the query is memoized by.
    type Key: QueryKey;
    /// The value. `Eq` decides backdating; `Hash` feeds the default fingerprint.
    type Value: Clone + Eq + Hash + Send + Sync + 'static;
    /// A name for events and error messages.
    const NAME: &'static str;

    /// Computes the value. Read other queries and inputs only through `db` (untracked
    /// reads must call [`Database::report_untracked_read`]). Engine errors from nested
    /// fetches are propagated with `?`; returning one discards this execution (nothing
    /// is memoized) and hands the error to the caller and to every thread waiting.
    fn execute(db: &Database<C>, key: &Self::Key) -> Result<Self::Value, QueryError>;

    /// A 128-bit fingerprint of a value, compared when a re-executed query's old value was
    /// evicted. Default: xxh3-128 over the value's `Hash`.
    fn fingerprint(value: &Self::Value) -> Fingerprint {
        crate::backdate::hash_fingerprint(value)
    }

    /// The weight of a value for a byte-bounded LRU ([`Database::set_lru_bytes`]).
    /// Default: `size_of::<Value>()`; override for values that own heap memory.
    fn size_bytes(value: &Self::Value) -> usize {
        let _ = value;
        std::mem::size_of::<Self::Value>()
    }
}

/// An input query: values set from outside ([`Database::set_input`]), read by derived
/// queries with [`Database::input`]. A key never set (or removed) reads as `None`.
pub trait Input: 'static {
    /// The key the input is stored by.
    type Key: QueryKey;
    /// The value; setting an equal value (same durability) is not a change.
    type Value: Clone + Eq + Send + Sync + 'static;
    /// A name for events and error messages.
    const NAME: &'static str;
}
