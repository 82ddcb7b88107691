//! Summaries of timed reps, shared by the pipeline and watch benches: the median and the
//! minimum (these VMs have slow phases, so both are printed), and the units they print in.

use std::time::Duration;

/// Median and minimum of some reps.
pub struct Stats {
    /// The middle rep (the upper one of an even count).
    pub median: Duration,
    /// The fastest rep.
    pub min: Duration,
}

impl Stats {
    /// The median and minimum of `samples`; zeros when there are none.
    pub fn of(samples: &[Duration]) -> Stats {
        Stats {
            median: median_by_key(samples, |d| *d),
            min: samples.iter().min().copied().unwrap_or_default(),
        }
    }
}

/// The sample in the middle when ordered by `key` (the upper one of an even count); the
/// default when there are none. Equal keys keep their order, so the pick is deterministic.
pub fn median_by_key<T: Copy + Default, K: Ord>(samples: &[T], key: impl FnMut(&T) -> K) -> T {
    let mut sorted = samples.to_vec();
    sorted.sort_by_key(key);
    sorted.get(sorted.len() / 2).copied().unwrap_or_default()
}

/// `d` in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// `a / b`, with `b` kept off zero.
pub fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-12)
}
