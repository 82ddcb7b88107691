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
    /// Bytes of source lines scanned, each time a file is entered: its directive lines and
    /// the code lines of the blocks found active, each with its newline (WGSL's without
    /// comments, GLSL's and HLSL's as spliced, comments included). An inactive block is
    /// jumped over and costs nothing, like a file skipped by `#pragma once` or its include
    /// guard. Only what the run's file views hold counts, so that an edit a
    /// variant does not see cannot change whether it is over budget.
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
            Self::BytesRead => {
                "bytes of source lines read (directive lines and active blocks, each time a file is entered)"
            }
            Self::Includes => "include expansions",
            Self::OutputBytes => "bytes of preprocessed text (macro expansions included)",
        })
    }
}

/// What a run spent of its budget (for tests and fuzzing: a run never spends more than its
/// budget, and a guarded header included again costs nothing).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spent {
    /// Bytes of lines scanned (see [`PreprocessBudget::max_bytes_read`]).
    pub bytes_read: u64,
    /// Files entered by `#include`.
    pub includes: u64,
}

/// A run's spending so far against its budget.
#[derive(Debug)]
pub(crate) struct Meter {
    budget: PreprocessBudget,
    spent: Spent,
}

impl Meter {
    pub fn new(budget: PreprocessBudget) -> Self {
        Self {
            budget,
            spent: Spent::default(),
        }
    }

    pub fn budget(&self) -> &PreprocessBudget {
        &self.budget
    }

    pub fn spent(&self) -> Spent {
        self.spent
    }

    /// Charges entering a file by `#include`; `at` (the directive) is made only on failure.
    pub fn include(&mut self, at: impl FnOnce() -> SourceLocation) -> Result<(), PreprocessError> {
        if self.spent.includes >= self.budget.max_includes {
            return Err(exceeded(at(), BudgetKind::Includes, &self.budget));
        }
        self.spent.includes += 1;
        Ok(())
    }

    /// Charges scanning a line of `bytes` bytes; `at` (the line) is made only on failure.
    pub fn read(
        &mut self,
        bytes: usize,
        at: impl FnOnce() -> SourceLocation,
    ) -> Result<(), PreprocessError> {
        let total = self
            .spent
            .bytes_read
            .saturating_add(u64::try_from(bytes).unwrap_or(u64::MAX));
        if total > self.budget.max_bytes_read {
            return Err(exceeded(at(), BudgetKind::BytesRead, &self.budget));
        }
        self.spent.bytes_read = total;
        Ok(())
    }
}

/// The order in which a driver reads a file's lines: every line while the text is active,
/// and only directive lines while it is not, so that an inactive block costs nothing however
/// long it is (the file's view does not hold its lines, so its length must not matter).
pub(crate) struct Walk<'a> {
    /// Indices of the file's directive lines, ascending.
    directives: &'a [u32],
    /// The first of `directives` not returned yet.
    next_directive: usize,
    pos: usize,
    len: usize,
}

impl<'a> Walk<'a> {
    pub fn new(directives: &'a [u32], len: usize) -> Self {
        Self {
            directives,
            next_directive: 0,
            pos: 0,
            len,
        }
    }

    /// The index of the next line to read, given whether the text is active now.
    pub fn next(&mut self, active: bool) -> Option<usize> {
        if !active {
            self.pos = self
                .directives
                .get(self.next_directive)
                .map_or(self.len, |&d| d as usize);
        }
        if self.pos >= self.len {
            return None;
        }
        let index = self.pos;
        self.pos += 1;
        if self.directives.get(self.next_directive) == Some(&to_u32(index)) {
            self.next_directive += 1;
        }
        Some(index)
    }
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
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
    fn an_inactive_walk_visits_directives_only() {
        // Lines 1, 4 and 5 are directives.
        let directives = [1, 4, 5];
        let mut walk = Walk::new(&directives, 8);
        let mut seen = Vec::new();
        let mut active = true;
        while let Some(index) = walk.next(active) {
            seen.push(index);
            // Line 1 starts an inactive group, line 5 ends it.
            active = match index {
                1 => false,
                5 => true,
                _ => active,
            };
        }
        assert_eq!(seen, [0, 1, 4, 5, 6, 7]);
        let mut walk = Walk::new(&directives, 8);
        assert_eq!(walk.next(false), Some(1));
        assert_eq!(walk.next(false), Some(4));
        assert_eq!(walk.next(false), Some(5));
        assert_eq!(walk.next(false), None);
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
        meter.read(4, at).unwrap();
        meter.read(6, at).unwrap();
        let err = meter.read(1, at).unwrap_err();
        assert!(matches!(
            err,
            PreprocessError::BudgetExceeded {
                budget: BudgetKind::BytesRead,
                limit: 10,
                ..
            }
        ));
        meter.include(at).unwrap();
        meter.include(at).unwrap();
        let err = meter.include(at).unwrap_err();
        assert_eq!(err.location().map(|l| l.line), Some(3));
        assert!(err.to_string().contains("include expansions"), "{err}");
        // What failed was not spent.
        assert_eq!(
            meter.spent(),
            Spent {
                bytes_read: 10,
                includes: 2
            }
        );
    }
}
