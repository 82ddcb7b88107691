//! What the engine did during a build, for the build report: which memos were evicted
//! (counted here), and, per variant, whether its preprocessing re-executed (told to the
//! variant's scope, which makes the early cutoffs countable per variant).

use super::queries::{CompileTextQ, PreprocessQ};
use super::scope::VariantScope;
use super::services::Services;
use kiln_incr::{Event, EventKind, Query};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Counters fed by the engine's event listener (no lock on the engine's path).
#[derive(Debug, Default)]
pub(crate) struct EventCounts {
    evicted: AtomicUsize,
}

/// One build's share of the counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub evicted: usize,
}

impl EventCounts {
    pub(crate) fn record(&self, event: &Event<'_>) {
        match event.kind {
            EventKind::Evicted => {
                self.evicted.fetch_add(1, Relaxed);
            }
            // The variant's own preprocessing ran again (these two are keyed by variant, so
            // they run in its scope; the per-file and per-shader queries below them are
            // shared, and run in whichever variant's scope asked first): if its artifacts
            // then re-verify, that was an early cutoff.
            EventKind::WillExecute if Self::per_variant_text(event.query) => {
                VariantScope::record(|made| made.inputs_reran = true);
            }
            _ => {}
        }
    }

    fn per_variant_text(query: &str) -> bool {
        query == <PreprocessQ as Query<Services>>::NAME
            || query == <CompileTextQ as Query<Services>>::NAME
    }

    /// The counts since the last call.
    pub(crate) fn take(&self) -> Counts {
        Counts {
            evicted: self.evicted.swap(0, Relaxed),
        }
    }
}
