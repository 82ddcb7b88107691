//! The pipeline as the engine sees it: the queries (`queries.rs`), the untracked services
//! they reach (`services.rs`: store, variant cache, per-build deduplication), the scope a
//! variant's artifacts query runs in (`scope.rs`: the build's revisions in, byproducts out)
//! and the counts of what the engine did (`events.rs`).

pub(crate) mod events;
pub(crate) mod queries;
pub(crate) mod scope;
pub(crate) mod services;
