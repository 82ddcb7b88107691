//! Engine errors: what reaches the caller of a fetch when a query cannot produce a value.

use std::fmt;

/// One member of a cycle, or the query that failed: a query name and its key's `Debug`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct QueryFrame {
    /// [`Query::NAME`](crate::Query::NAME) of the query.
    pub query: &'static str,
    /// The key, formatted with `{:?}`.
    pub key: String,
}

impl fmt::Display for QueryFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.query, self.key)
    }
}

/// Why a fetch produced no value. Engine errors are not memoized: the memo keeps its last
/// good state and a later fetch tries again.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// A query (transitively) asked for itself. `members` lists the cycle from the
    /// first re-entered query to the query that closed it.
    #[error("cycle detected: {}", display_cycle(.members))]
    Cycle {
        /// The queries forming the cycle, in call order.
        members: Vec<QueryFrame>,
    },
    /// A query's `execute` panicked. Every thread waiting on that query receives this.
    #[error("query {frame} panicked: {message}")]
    Panicked {
        /// The query that panicked.
        frame: QueryFrame,
        /// The panic message, when it was a string.
        message: String,
    },
}

fn display_cycle(members: &[QueryFrame]) -> String {
    let mut text = members
        .iter()
        .map(|member| member.to_string())
        .collect::<Vec<_>>()
        .join(" -> ");
    if let Some(first) = members.first() {
        text.push_str(" -> ");
        text.push_str(&first.to_string());
    }
    text
}

impl QueryError {
    /// The cycle's members, if this is a cycle error.
    pub fn cycle_members(&self) -> Option<&[QueryFrame]> {
        match self {
            QueryError::Cycle { members } => Some(members),
            QueryError::Panicked { .. } => None,
        }
    }
}
