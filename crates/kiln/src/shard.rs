//! Farm builds: which shard compiles which job.
//!
//! A farm build runs N copies of `kiln build --shard I/N` (a Kubernetes Indexed Job, a CI
//! matrix); each compiles its share of the project's distinct compile jobs and uploads it to
//! the remote cache, and one plain build afterwards fetches everything. The shards never
//! talk to each other, so the partition must come out the same in every one of them: it is
//! a pure function of the jobs and their expected costs, which every shard reads alike.
//!
//! Design decisions:
//! - Balanced by expected cost with the longest-processing-time rule (largest job first,
//!   to the least loaded shard; ties broken by job key, then by shard index), which keeps
//!   the largest shard within 4/3 of the optimum and, with many small jobs, within a few
//!   percent of the mean.
//! - Expected cost: the compile time an earlier build recorded in the remote; else the
//!   preprocessed text's size, scaled by what the recorded jobs cost per byte so that both
//!   kinds of estimate add up in the same unit.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;
use std::str::FromStr;

use crate::base::ContentKey;

/// Shard `index` of `count` (0-based: `0/4` .. `3/4`, as `JOB_COMPLETION_INDEX` counts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// This shard, `0..count`.
    pub index: usize,
    /// Shards in the farm run.
    pub count: usize,
}

/// A shard that is not `I/N` with `0 <= I < N`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("shard `{text}`: {problem}")]
pub struct ShardError {
    /// What was given.
    pub text: String,
    /// What is wrong with it.
    pub problem: &'static str,
}

impl Shard {
    /// Shard `index` of `count`, checked.
    pub fn new(index: usize, count: usize) -> Result<Self, ShardError> {
        let text = format!("{index}/{count}");
        if count == 0 {
            return Err(ShardError {
                text,
                problem: "the shard count must be at least 1",
            });
        }
        if index >= count {
            return Err(ShardError {
                text,
                problem: "the shard index counts from 0 and must be below the count",
            });
        }
        Ok(Self { index, count })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = ShardError;

    /// `I/N`, e.g. `0/4`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = |problem| ShardError {
            text: text.to_owned(),
            problem,
        };
        let (index, count) = text
            .split_once('/')
            .ok_or_else(|| bad("write it as INDEX/COUNT, e.g. 0/4"))?;
        let index = index
            .trim()
            .parse()
            .map_err(|_| bad("the index is not a number"))?;
        let count = count
            .trim()
            .parse()
            .map_err(|_| bad("the count is not a number"))?;
        Shard::new(index, count).map_err(|e| bad(e.problem))
    }
}

/// Expected cost of each job: its recorded compile time, else its text size scaled by the
/// recorded jobs' cost per byte (the text size itself when none is recorded).
pub fn expected_costs(recorded: &[Option<u64>], text_bytes: &[u64]) -> Vec<u64> {
    let (mut cost_sum, mut byte_sum) = (0u128, 0u128);
    for (cost, bytes) in recorded.iter().zip(text_bytes) {
        if let Some(cost) = cost {
            cost_sum += u128::from(*cost);
            byte_sum += u128::from(*bytes);
        }
    }
    recorded
        .iter()
        .zip(text_bytes)
        .map(|(cost, bytes)| match cost {
            Some(cost) => *cost,
            None if byte_sum == 0 => *bytes,
            None => {
                let scaled = u128::from(*bytes) * cost_sum / byte_sum;
                u64::try_from(scaled).unwrap_or(u64::MAX)
            }
        })
        .collect()
}

/// The shard of each job (same order as `jobs`): longest first, to the least loaded shard.
/// Deterministic: the result depends only on the jobs' keys and costs, not their order.
pub fn partition(jobs: &[(ContentKey, u64)], count: usize) -> Vec<usize> {
    // Shards past the number of jobs would stay empty whatever the rule: they are never
    // made, so a count of four billion costs nothing (every shard but the first `jobs.len()`
    // simply finds no work).
    let count = count.clamp(1, jobs.len().max(1));
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by(|&a, &b| {
        jobs[b]
            .1
            .cmp(&jobs[a].1)
            .then_with(|| jobs[a].0.cmp(&jobs[b].0))
    });
    // Least loaded first; among equals, the lowest index.
    let mut loads: BinaryHeap<Reverse<(u128, usize)>> =
        (0..count).map(|shard| Reverse((0, shard))).collect();
    let mut assigned = vec![0; jobs.len()];
    for job in order {
        let Some(Reverse((load, shard))) = loads.pop() else {
            break;
        };
        assigned[job] = shard;
        loads.push(Reverse((load + u128::from(jobs[job].1), shard)));
    }
    assigned
}

/// Largest shard's cost over the mean shard cost (1.0 is perfect balance).
pub fn imbalance(costs: &[u64], assigned: &[usize], count: usize) -> f64 {
    // Only the shards that own a job can be the largest; the others count in the mean.
    let mut loads = std::collections::HashMap::<usize, u128>::new();
    for (cost, shard) in costs.iter().zip(assigned) {
        *loads.entry(*shard).or_default() += u128::from(*cost);
    }
    let total: u128 = loads.values().sum();
    if total == 0 {
        return 1.0;
    }
    let max = loads.values().copied().max().unwrap_or(0);
    max as f64 * count.max(1) as f64 / total as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u32) -> ContentKey {
        ContentKey::hash(&i.to_le_bytes())
    }

    #[test]
    fn shards_parse_and_are_checked() {
        assert_eq!(
            "2/4".parse::<Shard>().unwrap(),
            Shard { index: 2, count: 4 }
        );
        for bad in ["4/4", "1/0", "x/2", "1", "-1/2", "1/2/3"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_partition_covers_every_job_once_whatever_the_order() {
        let jobs: Vec<(ContentKey, u64)> =
            (0..500).map(|i| (key(i), u64::from(i % 37) + 1)).collect();
        let assigned = partition(&jobs, 4);
        assert!(assigned.iter().all(|s| *s < 4));
        let mut reversed = jobs.clone();
        reversed.reverse();
        let again = partition(&reversed, 4);
        for (i, shard) in assigned.iter().enumerate() {
            assert_eq!(again[jobs.len() - 1 - i], *shard);
        }
        assert!(imbalance(&jobs.iter().map(|j| j.1).collect::<Vec<_>>(), &assigned, 4) < 1.02);
    }

    #[test]
    fn a_count_far_above_the_jobs_allocates_nothing_per_shard() {
        // 2^32 shards: one heap slot or load per shard would be a 100 GB allocation.
        let count = 1usize << 32;
        let shard: Shard = format!("0/{count}").parse().unwrap();
        assert_eq!(shard.count, count);
        let jobs: Vec<(ContentKey, u64)> = (0..5).map(|i| (key(i), u64::from(i) + 1)).collect();
        let assigned = partition(&jobs, count);
        let mut owners = assigned.clone();
        owners.sort_unstable();
        owners.dedup();
        assert_eq!(owners.len(), 5, "each job a shard of its own: {assigned:?}");
        assert!(assigned.iter().all(|s| *s < 5));
        let costs: Vec<u64> = jobs.iter().map(|j| j.1).collect();
        assert!(imbalance(&costs, &assigned, count) > 1e8);
        assert_eq!(partition(&[], count), Vec::<usize>::new());
    }

    #[test]
    fn one_huge_job_gets_a_shard_of_its_own() {
        let mut jobs: Vec<(ContentKey, u64)> = (0..10).map(|i| (key(i), 1)).collect();
        jobs.push((key(99), 100));
        let assigned = partition(&jobs, 2);
        let huge = assigned[10];
        assert!(assigned[..10].iter().all(|s| *s != huge));
    }

    #[test]
    fn unrecorded_costs_are_scaled_text_sizes() {
        assert_eq!(expected_costs(&[None, None], &[10, 30]), vec![10, 30]);
        // Recorded: 100 µs for 10 bytes, so 10 µs per byte.
        assert_eq!(
            expected_costs(&[Some(100), None], &[10, 30]),
            vec![100, 300]
        );
    }
}
