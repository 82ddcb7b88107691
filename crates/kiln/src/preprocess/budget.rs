//! What one variant's preprocessing may cost: text scanned, includes entered, output made.
//!
//! A file may be at most `max_source_bytes` long, but includes and macros multiply it: a
//! header included twice by each of 40 levels is 2^40 inclusions, a 1 MiB macro used 3,000
//! times is 3 GiB of text. Each run therefore carries a [`PreprocessBudget`], multiples of
//! that cap, and stops with [`PreprocessError::BudgetExceeded`] at the directive or line that
//! went over, so that the variant fails alone instead of hanging or aborting the process.

use super::error::{PreprocessError, SourceLocation};

/// The most one preprocessing run (one variant, all its files) may do. Every run has one;
/// [`PreprocessBudget::for_max_source_bytes`] derives it from the project's per-file cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PreprocessBudget {
    /// Bytes of source scanned: each file's full size, each time it is entered (the entry
    /// once, every `#include` that is not skipped by `#pragma once` or its include guard).
    pub max_bytes_read: u64,
    /// Files entered by `#include` (not counting the entry, nor includes skipped by
    /// `#pragma once` or a defined include guard).
    pub max_includes: u64,
    /// Bytes of preprocessed text, checked while macros expand (also bounds what an `#if`
    /// or `#line` expands to).
    pub max_output_bytes: u64,
}

/// `max_bytes_read` per byte of `max_source_bytes`.
pub const BYTES_READ_PER_SOURCE_BYTE: u64 = 16;
/// `max_output_bytes` per byte of `max_source_bytes`.
pub const OUTPUT_BYTES_PER_SOURCE_BYTE: u64 = 8;
/// `max_includes` is one per this many bytes of `max_source_bytes`, ...
pub const SOURCE_BYTES_PER_INCLUDE: u64 = 64;
/// ... and at least this many, so that a project with a tiny file cap can still include.
pub const MIN_INCLUDES: u64 = 1024;

impl PreprocessBudget {
    /// The budget of a project whose files may be `max_source_bytes` long: 16 times that
    /// read, 8 times that output, one include per 64 bytes of it (at least 1,024). At the
    /// default 4 MiB: 64 MiB read, 32 MiB output, 65,536 includes.
    pub fn for_max_source_bytes(max_source_bytes: u64) -> Self {
        Self {
            max_bytes_read: max_source_bytes.saturating_mul(BYTES_READ_PER_SOURCE_BYTE),
            max_includes: (max_source_bytes / SOURCE_BYTES_PER_INCLUDE).max(MIN_INCLUDES),
            max_output_bytes: max_source_bytes.saturating_mul(OUTPUT_BYTES_PER_SOURCE_BYTE),
        }
    }

    /// The output limit as a length of the output string.
    pub(crate) fn output_limit(&self) -> usize {
        usize::try_from(self.max_output_bytes).unwrap_or(usize::MAX)
    }
}

impl Default for PreprocessBudget {
    /// The budget of the default `max_source_bytes` (4 MiB).
    fn default() -> Self {
        Self::for_max_source_bytes(crate::boundary::DEFAULT_MAX_SOURCE_BYTES)
    }
}

/// Which part of a [`PreprocessBudget`] a run went over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BudgetKind {
    /// [`PreprocessBudget::max_bytes_read`].
    BytesRead,
    /// [`PreprocessBudget::max_includes`].
    Includes,
    /// [`PreprocessBudget::max_output_bytes`].
    OutputBytes,
}

impl std::fmt::Display for BudgetKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::BytesRead => "bytes of source read (each file counted each time it is entered)",
            Self::Includes => "include expansions",
            Self::OutputBytes => "bytes of preprocessed text (macro expansions included)",
        })
    }
}

/// A run's spending so far against its budget.
#[derive(Debug)]
pub(crate) struct Meter {
    budget: PreprocessBudget,
    bytes_read: u64,
    includes: u64,
}

impl Meter {
    pub fn new(budget: PreprocessBudget) -> Self {
        Self {
            budget,
            bytes_read: 0,
            includes: 0,
        }
    }

    pub fn budget(&self) -> &PreprocessBudget {
        &self.budget
    }

    /// Charges entering a file of `bytes` bytes, by an `#include` when `include` is true;
    /// `at` (the directive, or the entry) is made only on failure.
    pub fn enter(
        &mut self,
        bytes: usize,
        include: bool,
        at: impl FnOnce() -> SourceLocation,
    ) -> Result<(), PreprocessError> {
        if include {
            self.includes += 1;
            if self.includes > self.budget.max_includes {
                return Err(exceeded(at(), BudgetKind::Includes, &self.budget));
            }
        }
        self.bytes_read = self
            .bytes_read
            .saturating_add(u64::try_from(bytes).unwrap_or(u64::MAX));
        if self.bytes_read > self.budget.max_bytes_read {
            return Err(exceeded(at(), BudgetKind::BytesRead, &self.budget));
        }
        Ok(())
    }
}

/// The error for going over `kind` at `at`.
pub(crate) fn exceeded(
    at: SourceLocation,
    kind: BudgetKind,
    budget: &PreprocessBudget,
) -> PreprocessError {
    let limit = match kind {
        BudgetKind::BytesRead => budget.max_bytes_read,
        BudgetKind::Includes => budget.max_includes,
        BudgetKind::OutputBytes => budget.max_output_bytes,
    };
    PreprocessError::BudgetExceeded {
        at,
        budget: kind,
        limit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_scales_with_the_file_cap() {
        let default = PreprocessBudget::default();
        assert_eq!(default.max_bytes_read, 64 << 20);
        assert_eq!(default.max_output_bytes, 32 << 20);
        assert_eq!(default.max_includes, 65_536);
        let small = PreprocessBudget::for_max_source_bytes(100);
        assert_eq!(
            (
                small.max_bytes_read,
                small.max_output_bytes,
                small.max_includes
            ),
            (1600, 800, MIN_INCLUDES)
        );
        let huge = PreprocessBudget::for_max_source_bytes(u64::MAX);
        assert_eq!(huge.max_bytes_read, u64::MAX);
    }

    #[test]
    fn the_meter_stops_at_the_first_charge_over_a_limit() {
        let at = || SourceLocation {
            file: "a".into(),
            line: 3,
            columns: 0..1,
        };
        let mut meter = Meter::new(PreprocessBudget {
            max_bytes_read: 10,
            max_includes: 2,
            max_output_bytes: 0,
        });
        meter.enter(4, false, at).unwrap();
        meter.enter(4, true, at).unwrap();
        let err = meter.enter(4, true, at).unwrap_err();
        assert!(matches!(
            err,
            PreprocessError::BudgetExceeded {
                budget: BudgetKind::BytesRead,
                limit: 10,
                ..
            }
        ));
        let mut meter = Meter::new(PreprocessBudget {
            max_bytes_read: 100,
            max_includes: 1,
            max_output_bytes: 0,
        });
        meter.enter(1, true, at).unwrap();
        let err = meter.enter(1, true, at).unwrap_err();
        assert_eq!(err.location().map(|l| l.line), Some(3));
        assert!(err.to_string().contains("include expansions"), "{err}");
    }
}
