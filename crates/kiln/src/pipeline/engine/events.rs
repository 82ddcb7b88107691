//! Counts of what the engine did during a build, for the build report: which variants were
//! re-verified, cut off early, or evicted.

use super::queries::{ArtifactsQ, CompileTextQ, PreprocessQ};
use super::services::Services;
use kiln_incr::{Event, EventKind, Query};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Atomic counters fed by the engine's event listener (no lock on the engine's path).
#[derive(Debug, Default)]
pub(crate) struct EventCounts {
    artifacts_validated: AtomicUsize,
    backdated: AtomicUsize,
    evicted: AtomicUsize,
}

/// One build's share of the counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub artifacts_validated: usize,
    pub backdated: usize,
    pub evicted: usize,
}

impl EventCounts {
    pub(crate) fn record(&self, event: &Event<'_>) {
        let artifacts = event.query == <ArtifactsQ as Query<Services>>::NAME;
        // A variant's chain has one cutoff point at most: whichever of these came out equal.
        let text = event.query == <CompileTextQ as Query<Services>>::NAME
            || event.query == <PreprocessQ as Query<Services>>::NAME;
        let counter = match event.kind {
            EventKind::DidValidateMemoizedValue if artifacts => &self.artifacts_validated,
            EventKind::Backdated if artifacts || text => &self.backdated,
            EventKind::Evicted => &self.evicted,
            _ => return,
        };
        counter.fetch_add(1, Relaxed);
    }

    /// The counts since the last call.
    pub(crate) fn take(&self) -> Counts {
        Counts {
            artifacts_validated: self.artifacts_validated.swap(0, Relaxed),
            backdated: self.backdated.swap(0, Relaxed),
            evicted: self.evicted.swap(0, Relaxed),
        }
    }
}
