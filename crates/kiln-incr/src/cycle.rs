//! Cycle reporting: turning the memos that form a cycle into an error naming each member.

use crate::database::Database;
use crate::error::{QueryError, QueryFrame};
use crate::memo::Edge;

impl<C: Send + Sync + 'static> Database<C> {
    /// A cycle error whose members are `members`, in call order (found by the claim
    /// protocol, same-thread or across threads: see `sync.rs`).
    #[cold]
    pub(crate) fn cycle_error(&self, members: Vec<Edge>) -> QueryError {
        QueryError::Cycle {
            members: members
                .into_iter()
                .map(|edge| self.frame_of(edge))
                .collect(),
        }
    }

    /// The query name and key of a memo, for messages.
    #[cold]
    pub(crate) fn frame_of(&self, edge: Edge) -> QueryFrame {
        match self.ingredient_by_id(edge.query) {
            Some(ingredient) => ingredient.frame(edge.key),
            None => QueryFrame {
                query: "<unknown query>",
                key: edge.key.to_string(),
            },
        }
    }
}
