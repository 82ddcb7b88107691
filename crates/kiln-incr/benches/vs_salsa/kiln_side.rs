//! The kiln-incr half of every workload, on `kiln_incr::Database` (no event listener).
//!
//! Fetches go through `Database::get`, the call queries themselves make, so the figures
//! include kiln's query-table and key lookups just as salsa's include its id lookup; only
//! the `hot_fetch_handle` context line uses a `QueryHandle`.

use std::hint::black_box;
use std::time::Instant;

use kiln_incr::{Database, Durability, Input, Query, QueryError};

use super::counting_alloc::live_bytes;
use super::shape::{self, count_execution, executions};
use super::{run_threads, Rep};

/// The numeric inputs every workload reads, keyed by index.
struct Num;
impl Input for Num {
    type Key = u32;
    type Value = u64;
    const NAME: &'static str = "num";
}

/// Input `index`; the bench sets every input before any query reads it.
fn num(db: &Database, index: u32) -> u64 {
    db.input::<Num>(&index)
        .expect("vs_salsa sets every input before reading it")
}

/// Installs a listener that does what kiln's pipeline listener does per event.
fn install_listener<C: Send + Sync + 'static>(db: &mut Database<C>) {
    db.set_event_listener(|event| {
        black_box(event.kind);
        shape::count_event();
    });
}

fn new_database(inputs: usize) -> Database {
    let mut db = Database::default();
    for i in 0..inputs {
        db.set_input::<Num>(i as u32, shape::initial_input(i), Durability::Low);
    }
    db
}

// ---- hot_fetch -------------------------------------------------------------------

struct HotQuery;
impl Query for HotQuery {
    type Key = u32;
    type Value = u64;
    const NAME: &'static str = "hot_query";
    fn execute(db: &Database, key: &u32) -> Result<u64, QueryError> {
        count_execution();
        Ok(shape::hot(num(db, *key)))
    }
}

/// `hot_fetch`: cached fetches in one revision, through `Database::get` or, with
/// `via_handle`, through a `QueryHandle` that skips the per-call query-table lookup.
pub struct HotFetch {
    db: Database,
    via_handle: bool,
    expected: u64,
}

impl HotFetch {
    pub fn new(via_handle: bool) -> Self {
        Self::with_listener(via_handle, false)
    }

    /// `listener`: install an event listener, as kiln's pipeline does.
    pub fn with_listener(via_handle: bool, listener: bool) -> Self {
        let mut db = new_database(shape::HOT_KEYS);
        if listener {
            install_listener(&mut db);
        }
        let expected = (0..shape::HOT_KEYS as u32)
            .map(|k| db.get::<HotQuery>(&k).unwrap())
            .sum();
        HotFetch {
            db,
            via_handle,
            expected,
        }
    }

    fn pass(&self) -> u64 {
        let mut sum = 0u64;
        if self.via_handle {
            let handle = black_box(&self.db).query::<HotQuery>();
            for key in 0..shape::HOT_KEYS as u32 {
                sum += handle.get(&black_box(key)).unwrap();
            }
        } else {
            for key in 0..shape::HOT_KEYS as u32 {
                sum += black_box(&self.db)
                    .get::<HotQuery>(&black_box(key))
                    .unwrap();
            }
        }
        sum
    }
}

impl Rep for HotFetch {
    fn rep(&mut self) -> f64 {
        let before = executions();
        let start = Instant::now();
        for _ in 0..shape::HOT_PASSES {
            assert_eq!(black_box(self.pass()), self.expected);
        }
        let elapsed = start.elapsed();
        assert_eq!(executions(), before, "kiln hot_fetch executed a query");
        elapsed.as_nanos() as f64 / (shape::HOT_PASSES * shape::HOT_KEYS) as f64
    }
}

// ---- deep_verify -----------------------------------------------------------------

/// Leaf `WHICH` of a tree: reads the root's input.
struct TreeLeaf<const WHICH: u64>;
impl<const WHICH: u64> Query for TreeLeaf<WHICH> {
    type Key = u32;
    type Value = u64;
    const NAME: &'static str = "tree_leaf";
    fn execute(db: &Database, key: &u32) -> Result<u64, QueryError> {
        count_execution();
        Ok(shape::leaf(num(db, *key), WHICH))
    }
}

struct TreeLeft;
impl Query for TreeLeft {
    type Key = u32;
    type Value = u64;
    const NAME: &'static str = "tree_left";
    fn execute(db: &Database, key: &u32) -> Result<u64, QueryError> {
        count_execution();
        Ok(db.get::<TreeLeaf<0>>(key)? + db.get::<TreeLeaf<1>>(key)?)
    }
}

struct TreeRight;
impl Query for TreeRight {
    type Key = u32;
    type Value = u64;
    const NAME: &'static str = "tree_right";
    fn execute(db: &Database, key: &u32) -> Result<u64, QueryError> {
        count_execution();
        Ok(db.get::<TreeLeaf<2>>(key)? + db.get::<TreeLeaf<3>>(key)?)
    }
}

struct TreeRoot;
impl Query for TreeRoot {
    type Key = u32;
    type Value = u64;
    const NAME: &'static str = "tree_root";
    fn execute(db: &Database, key: &u32) -> Result<u64, QueryError> {
        count_execution();
        Ok(db.get::<TreeLeft>(key)? + db.get::<TreeRight>(key)?)
    }
}

/// An input key no query reads.
const BYSTANDER: u32 = u32::MAX;

/// `deep_verify`: 256 trees re-verified after a write to a same-durability input nobody reads.
pub struct DeepVerify {
    db: Database,
    bystander_value: u64,
    expected: u64,
}

impl DeepVerify {
    pub fn new() -> Self {
        Self::with_listener(false)
    }

    /// `listener`: install an event listener, as kiln's pipeline does.
    pub fn with_listener(listener: bool) -> Self {
        let mut db = new_database(shape::DEEP_ROOTS);
        if listener {
            install_listener(&mut db);
        }
        // Same (low) durability as the trees, so durability alone cannot skip them.
        db.set_input::<Num>(BYSTANDER, 0, Durability::Low);
        let expected = (0..shape::DEEP_ROOTS as u32)
            .map(|r| db.get::<TreeRoot>(&r).unwrap())
            .sum();
        let want: u64 = (0..shape::DEEP_ROOTS)
            .map(|i| shape::tree_root(shape::initial_input(i)))
            .sum();
        assert_eq!(expected, want);
        DeepVerify {
            db,
            bystander_value: 0,
            expected,
        }
    }
}

impl Rep for DeepVerify {
    fn rep(&mut self) -> f64 {
        let before = executions();
        let mut timed_ns = 0u128;
        for _ in 0..shape::DEEP_ROUNDS {
            self.bystander_value += 1;
            self.db
                .set_input::<Num>(BYSTANDER, self.bystander_value, Durability::Low);
            let start = Instant::now();
            let mut sum = 0u64;
            for root in 0..shape::DEEP_ROOTS as u32 {
                sum += black_box(&self.db)
                    .get::<TreeRoot>(&black_box(root))
                    .unwrap();
            }
            timed_ns += start.elapsed().as_nanos();
            assert_eq!(black_box(sum), self.expected);
        }
        assert_eq!(executions(), before, "kiln deep_verify re-executed a query");
        timed_ns as f64 / (shape::DEEP_ROUNDS * shape::DEEP_ROOTS * shape::DEEP_TREE_MEMOS) as f64
    }
}

// ---- lru_seed --------------------------------------------------------------------

struct SeedInner;
impl Query for SeedInner {
    type Key = u32;
    type Value = u64;
    const NAME: &'static str = "seed_inner";
    fn execute(db: &Database, key: &u32) -> Result<u64, QueryError> {
        count_execution();
        Ok(shape::seed_inner(num(db, *key)))
    }
}

struct SeedOuter;
impl Query for SeedOuter {
    type Key = u32;
    type Value = u64;
    const NAME: &'static str = "seed_outer";
    fn execute(db: &Database, key: &u32) -> Result<u64, QueryError> {
        count_execution();
        Ok(shape::seed_outer(db.get::<SeedInner>(key)?))
    }
}

/// `lru_seed`: the founding test at 100,000 inputs; re-reads must execute nothing.
pub struct LruSeed {
    db: Database,
    order: Vec<u32>,
    expected: u64,
}

impl LruSeed {
    /// `order`: the outer keys, in the order each rep re-reads them.
    pub fn new(order: Vec<u32>) -> Self {
        let db = new_database(shape::SEED_INPUTS);
        db.set_lru_capacity::<SeedInner>(shape::SEED_INNER_CAPACITY);
        let before = executions();
        let expected = (0..shape::SEED_INPUTS as u32)
            .map(|k| db.get::<SeedOuter>(&k).unwrap())
            .sum();
        assert_eq!(executions() - before, 2 * shape::SEED_INPUTS);
        let want: u64 = (0..shape::SEED_INPUTS)
            .map(|i| shape::seed_outer(shape::seed_inner(shape::initial_input(i))))
            .sum();
        assert_eq!(expected, want);
        LruSeed {
            db,
            order,
            expected,
        }
    }
}

impl Rep for LruSeed {
    fn rep(&mut self) -> f64 {
        // The revision boundary is where kiln evicts inner values beyond capacity.
        self.db.synthetic_write(Durability::High);
        let inner = self.db.memo_stats::<SeedInner>();
        assert!(
            inner.values <= shape::SEED_INNER_CAPACITY,
            "kiln kept {} inner values over a capacity of {}",
            inner.values,
            shape::SEED_INNER_CAPACITY
        );
        let before = executions();
        let start = Instant::now();
        let mut sum = 0u64;
        for &key in &self.order {
            sum += black_box(&self.db)
                .get::<SeedOuter>(&black_box(key))
                .unwrap();
        }
        let elapsed = start.elapsed();
        assert_eq!(black_box(sum), self.expected);
        assert_eq!(
            executions(),
            before,
            "kiln lru_seed re-read executed a query"
        );
        elapsed.as_nanos() as f64
    }
}

// ---- fan_in ----------------------------------------------------------------------

struct FanSum;
impl Query for FanSum {
    type Key = ();
    type Value = u64;
    const NAME: &'static str = "fan_sum";
    fn execute(db: &Database, _: &()) -> Result<u64, QueryError> {
        count_execution();
        Ok((0..shape::FAN_INPUTS as u32).map(|i| num(db, i)).sum())
    }
}

/// `fan_in`: one query over 100,000 inputs, re-read after one of them changed.
pub struct FanIn {
    db: Database,
    round: u64,
    base_sum: u64,
}

impl FanIn {
    pub fn new() -> Self {
        let db = new_database(shape::FAN_INPUTS);
        let base_sum: u64 = (0..shape::FAN_INPUTS).map(shape::initial_input).sum();
        assert_eq!(db.get::<FanSum>(&()).unwrap(), base_sum);
        FanIn {
            db,
            round: 0,
            base_sum,
        }
    }
}

impl Rep for FanIn {
    fn rep(&mut self) -> f64 {
        self.round += 1;
        let edit = shape::fan_edit(self.round);
        self.db
            .set_input::<Num>(shape::FAN_CHANGED_INPUT as u32, edit, Durability::Low);
        let expected = self.base_sum - shape::initial_input(shape::FAN_CHANGED_INPUT) + edit;
        let before = executions();
        let start = Instant::now();
        let sum = black_box(&self.db).get::<FanSum>(&()).unwrap();
        let elapsed = start.elapsed();
        assert_eq!(sum, expected);
        assert_eq!(executions() - before, 1, "kiln fan_in must execute once");
        elapsed.as_nanos() as f64
    }
}

// ---- parallel_hits ---------------------------------------------------------------

struct ParallelQuery;
impl Query for ParallelQuery {
    type Key = u32;
    type Value = u64;
    const NAME: &'static str = "parallel_query";
    fn execute(db: &Database, key: &u32) -> Result<u64, QueryError> {
        count_execution();
        Ok(shape::parallel_value(num(db, *key)))
    }
}

fn parallel_pass_sum(db: &Database, offset: usize) -> u64 {
    let keys = shape::PARALLEL_KEYS;
    let mut sum = 0u64;
    for pass in 0..shape::PARALLEL_PASSES {
        for i in 0..keys {
            let key = ((i + offset + pass) % keys) as u32;
            sum = sum.wrapping_add(black_box(db).get::<ParallelQuery>(&black_box(key)).unwrap());
        }
    }
    sum
}

/// The same query without an LRU bound.
struct PlainParallelQuery;
impl Query for PlainParallelQuery {
    type Key = u32;
    type Value = u64;
    const NAME: &'static str = "plain_parallel_query";
    fn execute(db: &Database, key: &u32) -> Result<u64, QueryError> {
        count_execution();
        Ok(shape::parallel_value(num(db, *key)))
    }
}

fn plain_parallel_pass_sum(db: &Database, offset: usize) -> u64 {
    let keys = shape::PARALLEL_KEYS;
    let mut sum = 0u64;
    for pass in 0..shape::PARALLEL_PASSES {
        for i in 0..keys {
            let key = ((i + offset + pass) % keys) as u32;
            sum = sum.wrapping_add(
                black_box(db)
                    .get::<PlainParallelQuery>(&black_box(key))
                    .unwrap(),
            );
        }
    }
    sum
}

/// `parallel_hits`: `threads` threads of cached hits on an LRU-enabled query (or, with
/// `lru` false, on one without an LRU bound).
pub struct ParallelHits {
    db: Database,
    threads: usize,
    lru: bool,
    expected_per_thread: u64,
}

impl ParallelHits {
    pub fn new(threads: usize) -> Self {
        Self::with_lru(threads, true)
    }

    pub fn with_lru(threads: usize, lru: bool) -> Self {
        let db = new_database(shape::PARALLEL_KEYS);
        db.set_lru_capacity::<ParallelQuery>(shape::PARALLEL_CAPACITY);
        let one_pass: u64 = (0..shape::PARALLEL_KEYS as u32)
            .map(|k| {
                if lru {
                    db.get::<ParallelQuery>(&k).unwrap()
                } else {
                    db.get::<PlainParallelQuery>(&k).unwrap()
                }
            })
            .sum();
        ParallelHits {
            db,
            threads,
            lru,
            expected_per_thread: one_pass.wrapping_mul(shape::PARALLEL_PASSES as u64),
        }
    }
}

impl Rep for ParallelHits {
    fn rep(&mut self) -> f64 {
        let before = executions();
        let threads = self.threads;
        let shared = vec![&self.db; threads];
        let lru = self.lru;
        let (elapsed, sums) = run_threads(shared, |t, db| {
            let offset = t * shape::PARALLEL_KEYS / threads;
            if lru {
                parallel_pass_sum(db, offset)
            } else {
                plain_parallel_pass_sum(db, offset)
            }
        });
        for sum in sums {
            assert_eq!(sum, self.expected_per_thread);
        }
        assert_eq!(executions(), before, "kiln parallel_hits executed a query");
        let hits = threads * shape::PARALLEL_PASSES * shape::PARALLEL_KEYS;
        elapsed.as_nanos() as f64 / hits as f64
    }
}

// ---- memo_bytes ------------------------------------------------------------------

/// A database whose input `warm_key` is set first, then inputs `0..inputs`, as salsa's
/// side creates its warm-up input first. Keys get ids in the order they are first seen,
/// and memos live in pages by id: the warm-up memo's page then holds the first ids (at most
/// 31 measured memos of each query land in it, uncounted), where a warm-up key set last
/// would put a whole page of measured memos before the measurement.
fn warm_first_database(warm_key: u32, warm_value: u64, inputs: usize) -> Database {
    let mut db = Database::default();
    db.set_input::<Num>(warm_key, warm_value, Durability::Low);
    for i in 0..inputs {
        db.set_input::<Num>(i as u32, shape::initial_input(i), Durability::Low);
    }
    db
}

struct MemoQuery;
impl Query for MemoQuery {
    type Key = u32;
    type Value = u64;
    const NAME: &'static str = "memo_query";
    fn execute(db: &Database, key: &u32) -> Result<u64, QueryError> {
        count_execution();
        Ok(shape::memo_value(num(db, *key)))
    }
}

/// Live heap bytes added per memo of a one-input derived function: right after the
/// fetches, and after the next revision boundary (where kiln frees index tables that a
/// resize replaced while readers might still probe them).
pub fn memo_bytes() -> (f64, f64) {
    // One extra input, fetched first, registers the query's table so its one-off
    // structures are not charged to the memos.
    let warm_key = shape::MEMO_BYTES_KEYS as u32;
    let mut db = warm_first_database(warm_key, 0, shape::MEMO_BYTES_KEYS);
    assert_eq!(
        db.get::<MemoQuery>(&warm_key).unwrap(),
        shape::memo_value(0)
    );
    let before = live_bytes();
    let mut sum = 0u64;
    for key in 0..shape::MEMO_BYTES_KEYS as u32 {
        sum = sum.wrapping_add(db.get::<MemoQuery>(&key).unwrap());
    }
    let after = live_bytes();
    black_box(sum);
    db.synthetic_write(Durability::Low);
    let after_boundary = live_bytes();
    drop(db);
    let per_memo = |bytes: isize| (bytes - before) as f64 / shape::MEMO_BYTES_KEYS as f64;
    (per_memo(after), per_memo(after_boundary))
}

/// Live heap bytes per memo of the seven-query tree shape (`deep_verify`'s trees: one key
/// read by seven queries), over `MEMO_TREE_ROOTS` trees: right after the fetches, and
/// after the next revision boundary.
pub fn memo_bytes_tree() -> (f64, f64) {
    let roots = shape::MEMO_TREE_ROOTS;
    let warm_key = roots as u32;
    let mut db = warm_first_database(warm_key, shape::initial_input(roots), roots);
    // One tree first registers the seven query tables.
    assert_eq!(
        db.get::<TreeRoot>(&warm_key).unwrap(),
        shape::tree_root(shape::initial_input(roots))
    );
    let before_runs = executions();
    let before = live_bytes();
    let mut sum = 0u64;
    for key in 0..roots as u32 {
        sum = sum.wrapping_add(db.get::<TreeRoot>(&key).unwrap());
    }
    let after = live_bytes();
    assert_eq!(executions() - before_runs, roots * shape::DEEP_TREE_MEMOS);
    black_box(sum);
    db.synthetic_write(Durability::Low);
    let after_boundary = live_bytes();
    drop(db);
    let memos = (roots * shape::DEEP_TREE_MEMOS) as f64;
    let per_memo = |bytes: isize| (bytes - before) as f64 / memos;
    (per_memo(after), per_memo(after_boundary))
}

// ---- keyed_hot_fetch / keyed_deep_verify: the keys kiln itself uses --------------

/// The key kiln uses for variants (its `VariantId`): shader, pass, sorted keywords.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VariantId {
    shader: std::sync::Arc<str>,
    pass: std::sync::Arc<str>,
    keywords: std::sync::Arc<[std::sync::Arc<str>]>,
}

/// The key types of the keyed workloads.
pub trait BenchKey: kiln_incr::QueryKey {
    fn make(index: usize) -> Self;
}

impl BenchKey for std::path::PathBuf {
    fn make(index: usize) -> Self {
        shape::path_key(index)
    }
}

impl BenchKey for VariantId {
    fn make(index: usize) -> Self {
        let (shader, pass, keywords) = shape::variant_parts(index);
        VariantId {
            shader,
            pass,
            keywords,
        }
    }
}

/// A numeric input keyed by `K`.
struct KeyedNum<K>(std::marker::PhantomData<K>);
impl<K: BenchKey> Input for KeyedNum<K> {
    type Key = K;
    type Value = u64;
    const NAME: &'static str = "keyed_num";
}

fn keyed_num<K: BenchKey>(db: &Database, key: &K) -> u64 {
    db.input::<KeyedNum<K>>(key)
        .expect("vs_salsa sets every input before reading it")
}

fn keyed_database<K: BenchKey>(keys: &[K], listener: bool) -> Database {
    let mut db = Database::default();
    for (i, key) in keys.iter().enumerate() {
        db.set_input::<KeyedNum<K>>(key.clone(), shape::initial_input(i), Durability::Low);
    }
    if listener {
        install_listener(&mut db);
    }
    db
}

struct KeyedHot<K>(std::marker::PhantomData<K>);
impl<K: BenchKey> Query for KeyedHot<K> {
    type Key = K;
    type Value = u64;
    const NAME: &'static str = "keyed_hot";
    fn execute(db: &Database, key: &K) -> Result<u64, QueryError> {
        count_execution();
        Ok(shape::hot(keyed_num(db, key)))
    }
}

/// `hot_fetch` with keys of type `K`.
pub struct KeyedHotFetch<K: BenchKey> {
    db: Database,
    keys: Vec<K>,
    expected: u64,
}

impl<K: BenchKey> KeyedHotFetch<K> {
    pub fn new(listener: bool) -> Self {
        let keys: Vec<K> = (0..shape::HOT_KEYS).map(K::make).collect();
        let db = keyed_database(&keys, listener);
        let expected = keys.iter().map(|k| db.get::<KeyedHot<K>>(k).unwrap()).sum();
        KeyedHotFetch { db, keys, expected }
    }
}

impl<K: BenchKey> Rep for KeyedHotFetch<K> {
    fn rep(&mut self) -> f64 {
        let before = executions();
        let start = Instant::now();
        for _ in 0..shape::HOT_PASSES {
            let mut sum = 0u64;
            for key in &self.keys {
                sum += black_box(&self.db)
                    .get::<KeyedHot<K>>(black_box(key))
                    .unwrap();
            }
            assert_eq!(black_box(sum), self.expected);
        }
        let elapsed = start.elapsed();
        assert_eq!(
            executions(),
            before,
            "kiln keyed hot_fetch executed a query"
        );
        elapsed.as_nanos() as f64 / (shape::HOT_PASSES * shape::HOT_KEYS) as f64
    }
}

struct KeyedLeaf<const WHICH: u64, K>(std::marker::PhantomData<K>);
impl<const WHICH: u64, K: BenchKey> Query for KeyedLeaf<WHICH, K> {
    type Key = K;
    type Value = u64;
    const NAME: &'static str = "keyed_leaf";
    fn execute(db: &Database, key: &K) -> Result<u64, QueryError> {
        count_execution();
        Ok(shape::leaf(keyed_num(db, key), WHICH))
    }
}

struct KeyedLeft<K>(std::marker::PhantomData<K>);
impl<K: BenchKey> Query for KeyedLeft<K> {
    type Key = K;
    type Value = u64;
    const NAME: &'static str = "keyed_left";
    fn execute(db: &Database, key: &K) -> Result<u64, QueryError> {
        count_execution();
        Ok(db.get::<KeyedLeaf<0, K>>(key)? + db.get::<KeyedLeaf<1, K>>(key)?)
    }
}

struct KeyedRight<K>(std::marker::PhantomData<K>);
impl<K: BenchKey> Query for KeyedRight<K> {
    type Key = K;
    type Value = u64;
    const NAME: &'static str = "keyed_right";
    fn execute(db: &Database, key: &K) -> Result<u64, QueryError> {
        count_execution();
        Ok(db.get::<KeyedLeaf<2, K>>(key)? + db.get::<KeyedLeaf<3, K>>(key)?)
    }
}

struct KeyedRoot<K>(std::marker::PhantomData<K>);
impl<K: BenchKey> Query for KeyedRoot<K> {
    type Key = K;
    type Value = u64;
    const NAME: &'static str = "keyed_root";
    fn execute(db: &Database, key: &K) -> Result<u64, QueryError> {
        count_execution();
        Ok(db.get::<KeyedLeft<K>>(key)? + db.get::<KeyedRight<K>>(key)?)
    }
}

/// `deep_verify` with keys of type `K`.
pub struct KeyedDeepVerify<K: BenchKey> {
    db: Database,
    roots: Vec<K>,
    bystander: K,
    bystander_value: u64,
    expected: u64,
}

impl<K: BenchKey> KeyedDeepVerify<K> {
    pub fn new(listener: bool) -> Self {
        let roots: Vec<K> = (0..shape::DEEP_ROOTS).map(K::make).collect();
        let mut db = keyed_database(&roots, listener);
        let bystander = K::make(usize::MAX >> 8);
        db.set_input::<KeyedNum<K>>(bystander.clone(), 0, Durability::Low);
        let expected = roots
            .iter()
            .map(|r| db.get::<KeyedRoot<K>>(r).unwrap())
            .sum();
        let want: u64 = (0..shape::DEEP_ROOTS)
            .map(|i| shape::tree_root(shape::initial_input(i)))
            .sum();
        assert_eq!(expected, want);
        KeyedDeepVerify {
            db,
            roots,
            bystander,
            bystander_value: 0,
            expected,
        }
    }
}

impl<K: BenchKey> Rep for KeyedDeepVerify<K> {
    fn rep(&mut self) -> f64 {
        let before = executions();
        let mut timed_ns = 0u128;
        for _ in 0..shape::DEEP_ROUNDS {
            self.bystander_value += 1;
            self.db.set_input::<KeyedNum<K>>(
                self.bystander.clone(),
                self.bystander_value,
                Durability::Low,
            );
            let start = Instant::now();
            let mut sum = 0u64;
            for root in &self.roots {
                sum += black_box(&self.db)
                    .get::<KeyedRoot<K>>(black_box(root))
                    .unwrap();
            }
            timed_ns += start.elapsed().as_nanos();
            assert_eq!(black_box(sum), self.expected);
        }
        assert_eq!(
            executions(),
            before,
            "kiln keyed deep_verify re-executed a query"
        );
        timed_ns as f64 / (shape::DEEP_ROUNDS * shape::DEEP_ROOTS * shape::DEEP_TREE_MEMOS) as f64
    }
}

// ---- depth -----------------------------------------------------------------------

/// `depth`: `link(0) = bottom`, `link(n) = link(n - 1) + 1`.
struct Link;
impl Query for Link {
    type Key = u32;
    type Value = u64;
    const NAME: &'static str = "link";
    fn execute(db: &Database, n: &u32) -> Result<u64, QueryError> {
        count_execution();
        if *n == 0 {
            return Ok(num(db, 0));
        }
        Ok(db.get::<Link>(&(n - 1))? + 1)
    }
}

/// Builds a chain `levels` deep, edits its bottom and fetches the top again, then
/// deep-verifies it after an unrelated write; returns the three times in ms. Run on the
/// caller's (small) stack: a stack overflow aborts the process.
pub fn depth_chain(levels: u32) -> [f64; 3] {
    let mut db = new_database(1);
    let top = levels - 1;
    let base = shape::initial_input(0);
    let timed = |db: &Database, expected_runs: usize, bottom: u64| {
        let before = executions();
        let start = Instant::now();
        assert_eq!(db.get::<Link>(&top), Ok(bottom + u64::from(top)));
        let ms = start.elapsed().as_secs_f64() * 1e3;
        assert_eq!(
            executions() - before,
            expected_runs,
            "kiln depth executions"
        );
        ms
    };
    let build = timed(&db, levels as usize, base);
    db.set_input::<Num>(0, base + 1, Durability::Low);
    let edit = timed(&db, levels as usize, base + 1);
    db.synthetic_write(Durability::Low);
    let verify = timed(&db, 0, base + 1);
    [build, edit, verify]
}
