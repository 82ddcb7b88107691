//! How each variant whose artifacts were (re)computed in a build got them.
//!
//! A cold build of 100,000 variants has an outcome for each: held as a position in the
//! build's list of variants (shared, not copied) and one byte, not as a map from a copy of
//! every variant's name (7 MB at that size, at the build's peak).

use super::services::Outcome;
use super::VariantId;
use std::sync::Arc;

/// Per variant that was (re)computed in a build, how its artifacts were obtained, in the
/// order the build ran them. A variant the engine re-verified, or found up to date on disk,
/// has none.
#[derive(Clone, Debug, Default)]
pub struct Outcomes {
    variants: Arc<[VariantId]>,
    recorded: Vec<(u32, Outcome)>,
}

impl Outcomes {
    /// No outcome yet, for variants from `variants`.
    pub(super) fn of(variants: Arc<[VariantId]>) -> Self {
        Self {
            variants,
            recorded: Vec::new(),
        }
    }

    /// Records the outcome of `variants[at]`.
    pub(super) fn record(&mut self, at: usize, outcome: Outcome) {
        // Positions index a list of at most `u32::MAX` variants: `Limits` caps a project far
        // below that.
        if let Ok(at) = u32::try_from(at) {
            if at < self.variants.len() as u32 {
                self.recorded.push((at, outcome));
            }
        }
    }

    /// How many variants have an outcome.
    pub fn len(&self) -> usize {
        self.recorded.len()
    }

    /// Whether no variant has an outcome.
    pub fn is_empty(&self) -> bool {
        self.recorded.is_empty()
    }

    /// Each variant with its outcome.
    pub fn iter(&self) -> impl Iterator<Item = (&VariantId, &Outcome)> + '_ {
        self.recorded
            .iter()
            .map(|(at, outcome)| (&self.variants[*at as usize], outcome))
    }

    /// The variants that have an outcome.
    pub fn keys(&self) -> impl Iterator<Item = &VariantId> + '_ {
        self.iter().map(|(variant, _)| variant)
    }

    /// The outcome of `variant`, if it has one (a linear search).
    pub fn get(&self, variant: &VariantId) -> Option<Outcome> {
        self.iter()
            .find(|(v, _)| *v == variant)
            .map(|(_, outcome)| *outcome)
    }
}
