//! Byte-capacity eviction in `VariantCache`: least recently used artifacts go first, checked
//! step by step and against a reference LRU model.

use std::convert::Infallible;

use kiln::key::VariantKey;
use kiln::variant_cache::VariantCache;
use proptest::prelude::*;

fn key(name: &str) -> VariantKey {
    VariantKey::new("Lit", "Forward", [name], 1).unwrap()
}

fn request(cache: &VariantCache<Vec<u8>>, k: &VariantKey, bytes: usize) -> bool {
    let mut compiled = false;
    cache
        .get_or_compile(k, |_| {
            compiled = true;
            Ok::<_, Infallible>(vec![0; bytes])
        })
        .unwrap();
    compiled
}

#[test]
fn the_least_recently_used_artifact_is_evicted_first() {
    let cache = VariantCache::<Vec<u8>>::with_capacity(100);
    let [a, b, c, d] = ["A", "B", "C", "D"].map(key);
    request(&cache, &a, 40);
    request(&cache, &b, 40);
    // A is used after B, so B is now the least recently used.
    assert!(!request(&cache, &a, 40));
    request(&cache, &c, 40);
    assert!(cache.contains(&a) && !cache.contains(&b) && cache.contains(&c));
    assert_eq!((cache.bytes(), cache.stats().evicted), (80, 1));
    // A peek is a use too: now C is the oldest.
    assert!(cache.get(&a).is_some());
    request(&cache, &d, 40);
    assert!(cache.contains(&a) && !cache.contains(&c) && cache.contains(&d));
    assert_eq!(cache.stats().evicted, 2);
    // `contains` is not a use: A stays the oldest and goes next.
    assert!(cache.contains(&a));
    request(&cache, &b, 40);
    assert!(!cache.contains(&a) && cache.contains(&d) && cache.contains(&b));
    // One insert can evict several.
    request(&cache, &c, 100);
    assert_eq!(cache.shader_keys("Lit"), [c]);
    assert_eq!(cache.stats().evicted, 5);
}

#[test]
fn an_artifact_larger_than_the_capacity_is_returned_but_not_held() {
    let cache = VariantCache::<Vec<u8>>::with_capacity(100);
    let (small, huge) = (key("SMALL"), key("HUGE"));
    request(&cache, &small, 10);
    let artifact = cache
        .get_or_compile(&huge, |_| Ok::<_, Infallible>(vec![7; 101]))
        .unwrap();
    assert_eq!(artifact.len(), 101);
    assert!(!cache.contains(&huge) && cache.contains(&small));
    assert_eq!(cache.stats().evicted, 1);
    assert_eq!(cache.bytes(), 10);
}

#[test]
fn invalidated_and_removed_artifacts_free_their_bytes() {
    let cache = VariantCache::<Vec<u8>>::with_capacity(100);
    request(&cache, &key("A"), 60);
    assert_eq!(cache.invalidate_shader("Lit", 2), 1);
    assert_eq!(cache.bytes(), 0);
    let fresh = key("B").at_revision(2);
    request(&cache, &fresh, 60);
    request(&cache, &key("C").at_revision(2), 30);
    assert_eq!(cache.stats().evicted, 0);
    cache.remove(&fresh);
    assert_eq!(cache.bytes(), 30);
}

/// What an exact LRU cache of `capacity` bytes holds: oldest first.
struct Model {
    capacity: u64,
    order: Vec<(usize, u64)>,
    evicted: u64,
}

impl Model {
    fn bytes(&self) -> u64 {
        self.order.iter().map(|&(_, b)| b).sum()
    }

    /// Returns whether the request compiles.
    fn request(&mut self, id: usize, bytes: u64) -> bool {
        if self.use_(id) {
            return false;
        }
        if bytes > self.capacity {
            self.evicted += 1;
            return true;
        }
        self.order.push((id, bytes));
        while self.bytes() > self.capacity {
            self.order.remove(0);
            self.evicted += 1;
        }
        true
    }

    fn use_(&mut self, id: usize) -> bool {
        match self.order.iter().position(|&(i, _)| i == id) {
            Some(at) => {
                let entry = self.order.remove(at);
                self.order.push(entry);
                true
            }
            None => false,
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Request(usize, u64),
    Peek(usize),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        3 => (0usize..150, 1u64..60).prop_map(|(id, bytes)| Op::Request(id, bytes)),
        1 => (0usize..150).prop_map(Op::Peek),
    ];
    prop::collection::vec(op, 1..600)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Many entries and many evictions, so that the eviction queue is refilled often.
    #[test]
    fn eviction_matches_an_exact_lru_model(ops in ops(), capacity in 50u64..2_000) {
        let cache = VariantCache::<Vec<u8>>::with_capacity(capacity);
        let mut model = Model { capacity, order: Vec::new(), evicted: 0 };
        let keys: Vec<VariantKey> = (0..150).map(|i| key(&format!("K{i}"))).collect();
        for op in ops {
            match op {
                Op::Request(id, bytes) => {
                    let compiled = request(&cache, &keys[id], bytes as usize);
                    prop_assert_eq!(compiled, model.request(id, bytes));
                }
                Op::Peek(id) => {
                    prop_assert_eq!(cache.get(&keys[id]).is_some(), model.use_(id));
                }
            }
            prop_assert_eq!(cache.bytes(), model.bytes());
            prop_assert_eq!(cache.len(), model.order.len());
            prop_assert_eq!(cache.stats().evicted, model.evicted);
        }
        for (id, k) in keys.iter().enumerate() {
            prop_assert_eq!(cache.contains(k), model.order.iter().any(|&(i, _)| i == id));
        }
    }
}
