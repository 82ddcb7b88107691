//! The salsa 0.28 half of every workload, on `salsa::DatabaseImpl` (no event callback),
//! or on `ListenedDb` (an event callback) for the listener lines.

use std::hint::black_box;
use std::time::Instant;

use salsa::{Database, DatabaseImpl, Durability, Setter};

use super::counting_alloc::live_bytes;
use super::shape::{self, count_execution, executions};
use super::{run_threads, Rep};

#[salsa::input]
pub struct Num {
    #[returns(copy)]
    value: u64,
}

#[salsa::input]
struct NumList {
    #[returns(ref)]
    items: Vec<Num>,
}

/// A database with an event callback doing what kiln's listener does per event.
#[salsa::db]
#[derive(Clone)]
pub struct ListenedDb {
    storage: salsa::Storage<Self>,
}

#[salsa::db]
impl Database for ListenedDb {}

impl ListenedDb {
    pub fn new() -> Self {
        ListenedDb {
            storage: salsa::Storage::new(Some(Box::new(|event| {
                black_box(&event.kind);
                shape::count_event();
            }))),
        }
    }
}

fn new_nums(db: &dyn Database, count: usize) -> Vec<Num> {
    (0..count)
        .map(|i| Num::new(db, shape::initial_input(i)))
        .collect()
}

// ---- hot_fetch -------------------------------------------------------------------

#[salsa::tracked(returns(copy))]
fn hot_query(db: &dyn Database, num: Num) -> u64 {
    count_execution();
    shape::hot(num.value(db))
}

/// `hot_fetch`: cached fetches in one revision.
pub struct HotFetch<D = DatabaseImpl> {
    db: D,
    keys: Vec<Num>,
    expected: u64,
}

impl HotFetch {
    pub fn new() -> Self {
        HotFetch::on(DatabaseImpl::new())
    }
}

impl<D: Database> HotFetch<D> {
    pub fn on(db: D) -> Self {
        let keys = new_nums(&db, shape::HOT_KEYS);
        let expected = keys.iter().map(|&k| hot_query(&db, k)).sum();
        HotFetch { db, keys, expected }
    }
}

impl<D: Database> Rep for HotFetch<D> {
    fn rep(&mut self) -> f64 {
        let before = executions();
        let start = Instant::now();
        for _ in 0..shape::HOT_PASSES {
            let mut sum = 0u64;
            for &key in &self.keys {
                sum += hot_query(black_box(&self.db), black_box(key));
            }
            assert_eq!(black_box(sum), self.expected);
        }
        let elapsed = start.elapsed();
        assert_eq!(executions(), before, "salsa hot_fetch executed a query");
        elapsed.as_nanos() as f64 / (shape::HOT_PASSES * shape::HOT_KEYS) as f64
    }
}

// ---- deep_verify -----------------------------------------------------------------

#[salsa::tracked(returns(copy))]
fn tree_leaf0(db: &dyn Database, num: Num) -> u64 {
    count_execution();
    shape::leaf(num.value(db), 0)
}

#[salsa::tracked(returns(copy))]
fn tree_leaf1(db: &dyn Database, num: Num) -> u64 {
    count_execution();
    shape::leaf(num.value(db), 1)
}

#[salsa::tracked(returns(copy))]
fn tree_leaf2(db: &dyn Database, num: Num) -> u64 {
    count_execution();
    shape::leaf(num.value(db), 2)
}

#[salsa::tracked(returns(copy))]
fn tree_leaf3(db: &dyn Database, num: Num) -> u64 {
    count_execution();
    shape::leaf(num.value(db), 3)
}

#[salsa::tracked(returns(copy))]
fn tree_left(db: &dyn Database, num: Num) -> u64 {
    count_execution();
    tree_leaf0(db, num) + tree_leaf1(db, num)
}

#[salsa::tracked(returns(copy))]
fn tree_right(db: &dyn Database, num: Num) -> u64 {
    count_execution();
    tree_leaf2(db, num) + tree_leaf3(db, num)
}

#[salsa::tracked(returns(copy))]
fn tree_root(db: &dyn Database, num: Num) -> u64 {
    count_execution();
    tree_left(db, num) + tree_right(db, num)
}

/// `deep_verify`: 256 trees re-verified after a write to a same-durability input nobody reads.
pub struct DeepVerify<D = DatabaseImpl> {
    db: D,
    roots: Vec<Num>,
    bystander: Num,
    bystander_value: u64,
    expected: u64,
}

impl DeepVerify {
    pub fn new() -> Self {
        DeepVerify::on(DatabaseImpl::new())
    }
}

impl<D: Database> DeepVerify<D> {
    pub fn on(db: D) -> Self {
        let roots = new_nums(&db, shape::DEEP_ROOTS);
        // Same (low) durability as the trees, so durability alone cannot skip them.
        let bystander = Num::builder(0).durability(Durability::LOW).new(&db);
        let expected = roots.iter().map(|&r| tree_root(&db, r)).sum();
        let want: u64 = (0..shape::DEEP_ROOTS)
            .map(|i| shape::tree_root(shape::initial_input(i)))
            .sum();
        assert_eq!(expected, want);
        DeepVerify {
            db,
            roots,
            bystander,
            bystander_value: 0,
            expected,
        }
    }
}

impl<D: Database> Rep for DeepVerify<D> {
    fn rep(&mut self) -> f64 {
        let before = executions();
        let mut timed_ns = 0u128;
        for _ in 0..shape::DEEP_ROUNDS {
            self.bystander_value += 1;
            self.bystander
                .set_value(&mut self.db)
                .to(self.bystander_value);
            let start = Instant::now();
            let mut sum = 0u64;
            for &root in &self.roots {
                sum += tree_root(black_box(&self.db), black_box(root));
            }
            timed_ns += start.elapsed().as_nanos();
            assert_eq!(black_box(sum), self.expected);
        }
        assert_eq!(
            executions(),
            before,
            "salsa deep_verify re-executed a query"
        );
        timed_ns as f64 / (shape::DEEP_ROUNDS * shape::DEEP_ROOTS * shape::DEEP_TREE_MEMOS) as f64
    }
}

// ---- lru_seed --------------------------------------------------------------------

#[salsa::tracked(returns(copy), lru = 1000)]
fn seed_inner(db: &dyn Database, num: Num) -> u64 {
    count_execution();
    shape::seed_inner(num.value(db))
}

#[salsa::tracked(returns(copy))]
fn seed_outer(db: &dyn Database, num: Num) -> u64 {
    count_execution();
    shape::seed_outer(seed_inner(db, num))
}

/// `lru_seed`: the founding test at 100,000 inputs; re-reads must execute nothing.
pub struct LruSeed {
    db: DatabaseImpl,
    /// The inputs in re-read order.
    read_order: Vec<Num>,
    expected: u64,
}

impl LruSeed {
    /// `order`: the outer keys (input indices), in the order each rep re-reads them.
    pub fn new(order: &[u32]) -> Self {
        let mut db = DatabaseImpl::new();
        seed_inner::set_lru_capacity(&mut db, shape::SEED_INNER_CAPACITY);
        let nums = new_nums(&db, shape::SEED_INPUTS);
        let before = executions();
        let expected = nums.iter().map(|&n| seed_outer(&db, n)).sum();
        assert_eq!(executions() - before, 2 * shape::SEED_INPUTS);
        let want: u64 = (0..shape::SEED_INPUTS)
            .map(|i| shape::seed_outer(shape::seed_inner(shape::initial_input(i))))
            .sum();
        assert_eq!(expected, want);
        let read_order = order.iter().map(|&i| nums[i as usize]).collect();
        LruSeed {
            db,
            read_order,
            expected,
        }
    }
}

impl Rep for LruSeed {
    fn rep(&mut self) -> f64 {
        // The revision boundary is where salsa evicts inner values beyond capacity.
        self.db.synthetic_write(Durability::HIGH);
        let before = executions();
        let start = Instant::now();
        let mut sum = 0u64;
        for &num in &self.read_order {
            sum += seed_outer(black_box(&self.db), black_box(num));
        }
        let elapsed = start.elapsed();
        assert_eq!(black_box(sum), self.expected);
        assert_eq!(
            executions(),
            before,
            "salsa lru_seed re-read executed a query"
        );
        elapsed.as_nanos() as f64
    }
}

// ---- fan_in ----------------------------------------------------------------------

#[salsa::tracked(returns(copy))]
fn fan_sum(db: &dyn Database, list: NumList) -> u64 {
    count_execution();
    list.items(db).iter().map(|num| num.value(db)).sum()
}

/// `fan_in`: one query over 100,000 inputs, re-read after one of them changed.
pub struct FanIn {
    db: DatabaseImpl,
    nums: Vec<Num>,
    list: NumList,
    round: u64,
    base_sum: u64,
}

impl FanIn {
    pub fn new() -> Self {
        let db = DatabaseImpl::new();
        let nums = new_nums(&db, shape::FAN_INPUTS);
        let list = NumList::new(&db, nums.clone());
        let base_sum: u64 = (0..shape::FAN_INPUTS).map(shape::initial_input).sum();
        assert_eq!(fan_sum(&db, list), base_sum);
        FanIn {
            db,
            nums,
            list,
            round: 0,
            base_sum,
        }
    }
}

impl Rep for FanIn {
    fn rep(&mut self) -> f64 {
        self.round += 1;
        let edit = shape::fan_edit(self.round);
        self.nums[shape::FAN_CHANGED_INPUT]
            .set_value(&mut self.db)
            .to(edit);
        let expected = self.base_sum - shape::initial_input(shape::FAN_CHANGED_INPUT) + edit;
        let before = executions();
        let start = Instant::now();
        let sum = fan_sum(black_box(&self.db), black_box(self.list));
        let elapsed = start.elapsed();
        assert_eq!(sum, expected);
        assert_eq!(executions() - before, 1, "salsa fan_in must execute once");
        elapsed.as_nanos() as f64
    }
}

// ---- parallel_hits ---------------------------------------------------------------

#[salsa::tracked(returns(copy), lru = 2000)]
fn parallel_query(db: &dyn Database, num: Num) -> u64 {
    count_execution();
    shape::parallel_value(num.value(db))
}

/// The same query without an LRU bound.
#[salsa::tracked(returns(copy))]
fn plain_parallel_query(db: &dyn Database, num: Num) -> u64 {
    count_execution();
    shape::parallel_value(num.value(db))
}

fn parallel_pass_sum(db: &DatabaseImpl, keys: &[Num], offset: usize, lru: bool) -> u64 {
    let mut sum = 0u64;
    for pass in 0..shape::PARALLEL_PASSES {
        for i in 0..keys.len() {
            let key = keys[(i + offset + pass) % keys.len()];
            let value = if lru {
                parallel_query(black_box(db), black_box(key))
            } else {
                plain_parallel_query(black_box(db), black_box(key))
            };
            sum = sum.wrapping_add(value);
        }
    }
    sum
}

/// `parallel_hits`: `threads` threads of cached hits on an LRU-enabled query.
pub struct ParallelHits {
    db: DatabaseImpl,
    keys: Vec<Num>,
    threads: usize,
    lru: bool,
    expected_per_thread: u64,
}

impl ParallelHits {
    pub fn new(threads: usize) -> Self {
        Self::with_lru(threads, true)
    }

    pub fn with_lru(threads: usize, lru: bool) -> Self {
        let mut db = DatabaseImpl::new();
        parallel_query::set_lru_capacity(&mut db, shape::PARALLEL_CAPACITY);
        let keys = new_nums(&db, shape::PARALLEL_KEYS);
        let one_pass: u64 = keys
            .iter()
            .map(|&k| {
                if lru {
                    parallel_query(&db, k)
                } else {
                    plain_parallel_query(&db, k)
                }
            })
            .sum();
        ParallelHits {
            db,
            keys,
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
        // salsa shares one storage between handles; each thread reads through its own clone.
        let handles: Vec<DatabaseImpl> = (0..threads).map(|_| self.db.clone()).collect();
        let keys = &self.keys;
        let lru = self.lru;
        // Each worker hands its clone back, so dropping it stays outside the timed span.
        let (elapsed, results) = run_threads(handles, |t, db| {
            (
                parallel_pass_sum(&db, keys, t * keys.len() / threads, lru),
                db,
            )
        });
        for (sum, _db) in results {
            assert_eq!(sum, self.expected_per_thread);
        }
        assert_eq!(executions(), before, "salsa parallel_hits executed a query");
        let hits = threads * shape::PARALLEL_PASSES * shape::PARALLEL_KEYS;
        elapsed.as_nanos() as f64 / hits as f64
    }
}

// ---- memo_bytes ------------------------------------------------------------------

#[salsa::tracked(returns(copy))]
fn memo_query(db: &dyn Database, num: Num) -> u64 {
    count_execution();
    shape::memo_value(num.value(db))
}

/// Live heap bytes added per memo of a one-input derived function: right after the
/// fetches, and after the next revision boundary.
pub fn memo_bytes() -> (f64, f64) {
    let mut db = DatabaseImpl::new();
    // Register the ingredient first so its one-off tables are not charged to the memos.
    let warm = Num::new(&db, 0);
    assert_eq!(memo_query(&db, warm), shape::memo_value(0));
    let nums = new_nums(&db, shape::MEMO_BYTES_KEYS);
    let before = live_bytes();
    let mut sum = 0u64;
    for &num in &nums {
        sum = sum.wrapping_add(memo_query(&db, num));
    }
    let after = live_bytes();
    black_box(sum);
    db.synthetic_write(Durability::LOW);
    let after_boundary = live_bytes();
    drop(db);
    let per_memo = |bytes: isize| (bytes - before) as f64 / shape::MEMO_BYTES_KEYS as f64;
    (per_memo(after), per_memo(after_boundary))
}

/// Live heap bytes per memo of the seven-query tree shape (`deep_verify`'s trees), over
/// `MEMO_TREE_ROOTS` trees: right after the fetches, and after the next revision boundary.
pub fn memo_bytes_tree() -> (f64, f64) {
    let roots = shape::MEMO_TREE_ROOTS;
    let mut db = DatabaseImpl::new();
    let warm = Num::new(&db, shape::initial_input(roots));
    assert_eq!(
        tree_root(&db, warm),
        shape::tree_root(shape::initial_input(roots))
    );
    let nums = new_nums(&db, roots);
    let before_runs = executions();
    let before = live_bytes();
    let mut sum = 0u64;
    for &num in &nums {
        sum = sum.wrapping_add(tree_root(&db, num));
    }
    let after = live_bytes();
    assert_eq!(executions() - before_runs, roots * shape::DEEP_TREE_MEMOS);
    black_box(sum);
    db.synthetic_write(Durability::LOW);
    let after_boundary = live_bytes();
    drop(db);
    let memos = (roots * shape::DEEP_TREE_MEMOS) as f64;
    let per_memo = |bytes: isize| (bytes - before) as f64 / memos;
    (per_memo(after), per_memo(after_boundary))
}

// ---- keyed_hot_fetch / keyed_deep_verify: the keys kiln itself uses --------------
//
// salsa keys tracked functions by salsa structs, so a caller holding a path or a variant
// id interns it (`PathKey::new`) and passes the id: every timed fetch does both, as
// every kiln fetch hashes and looks up its key.

#[salsa::interned]
pub struct PathKey<'db> {
    #[returns(ref)]
    path: std::path::PathBuf,
    num: Num,
}

#[salsa::interned]
pub struct VariantKey<'db> {
    #[returns(ref)]
    shader: std::sync::Arc<str>,
    #[returns(ref)]
    pass: std::sync::Arc<str>,
    #[returns(ref)]
    keywords: std::sync::Arc<[std::sync::Arc<str>]>,
    num: Num,
}

/// A key kind of the keyed workloads: its raw keys and how to intern one.
pub trait SalsaKey {
    type Raw;
    fn make(index: usize) -> Self::Raw;
    /// Interns `raw` (with its input) and fetches the hot query.
    fn hot(db: &dyn Database, raw: &Self::Raw, num: Num) -> u64;
    /// Interns `raw` (with its input) and fetches the tree root.
    fn root(db: &dyn Database, raw: &Self::Raw, num: Num) -> u64;
}

macro_rules! keyed_queries {
    ($module:ident, $key:ident) => {
        mod $module {
            use super::{count_execution, shape, $key, Database};

            #[salsa::tracked(returns(copy))]
            pub fn hot<'db>(db: &'db dyn Database, key: $key<'db>) -> u64 {
                count_execution();
                shape::hot(key.num(db).value(db))
            }

            #[salsa::tracked(returns(copy))]
            fn leaf0<'db>(db: &'db dyn Database, key: $key<'db>) -> u64 {
                count_execution();
                shape::leaf(key.num(db).value(db), 0)
            }

            #[salsa::tracked(returns(copy))]
            fn leaf1<'db>(db: &'db dyn Database, key: $key<'db>) -> u64 {
                count_execution();
                shape::leaf(key.num(db).value(db), 1)
            }

            #[salsa::tracked(returns(copy))]
            fn leaf2<'db>(db: &'db dyn Database, key: $key<'db>) -> u64 {
                count_execution();
                shape::leaf(key.num(db).value(db), 2)
            }

            #[salsa::tracked(returns(copy))]
            fn leaf3<'db>(db: &'db dyn Database, key: $key<'db>) -> u64 {
                count_execution();
                shape::leaf(key.num(db).value(db), 3)
            }

            #[salsa::tracked(returns(copy))]
            fn left<'db>(db: &'db dyn Database, key: $key<'db>) -> u64 {
                count_execution();
                leaf0(db, key) + leaf1(db, key)
            }

            #[salsa::tracked(returns(copy))]
            fn right<'db>(db: &'db dyn Database, key: $key<'db>) -> u64 {
                count_execution();
                leaf2(db, key) + leaf3(db, key)
            }

            #[salsa::tracked(returns(copy))]
            pub fn root<'db>(db: &'db dyn Database, key: $key<'db>) -> u64 {
                count_execution();
                left(db, key) + right(db, key)
            }
        }
    };
}

keyed_queries!(path_queries, PathKey);
keyed_queries!(variant_queries, VariantKey);

/// Path keys (kiln's `SourceFile` and `ClosureQ` keys).
pub struct Paths;
impl SalsaKey for Paths {
    type Raw = std::path::PathBuf;
    fn make(index: usize) -> Self::Raw {
        shape::path_key(index)
    }
    fn hot(db: &dyn Database, raw: &Self::Raw, num: Num) -> u64 {
        path_queries::hot(db, PathKey::new(db, raw, num))
    }
    fn root(db: &dyn Database, raw: &Self::Raw, num: Num) -> u64 {
        path_queries::root(db, PathKey::new(db, raw, num))
    }
}

/// Composite variant ids (kiln's `VariantId` keys).
pub struct Variants;
impl SalsaKey for Variants {
    type Raw = shape::VariantParts;
    fn make(index: usize) -> Self::Raw {
        shape::variant_parts(index)
    }
    fn hot(db: &dyn Database, raw: &Self::Raw, num: Num) -> u64 {
        variant_queries::hot(db, VariantKey::new(db, &raw.0, &raw.1, &raw.2, num))
    }
    fn root(db: &dyn Database, raw: &Self::Raw, num: Num) -> u64 {
        variant_queries::root(db, VariantKey::new(db, &raw.0, &raw.1, &raw.2, num))
    }
}

/// `hot_fetch` with keys of kind `K`.
pub struct KeyedHotFetch<K: SalsaKey, D = DatabaseImpl> {
    db: D,
    keys: Vec<(K::Raw, Num)>,
    expected: u64,
}

impl<K: SalsaKey, D: Database> KeyedHotFetch<K, D> {
    pub fn on(db: D) -> Self {
        let keys: Vec<(K::Raw, Num)> = (0..shape::HOT_KEYS)
            .map(|i| (K::make(i), Num::new(&db, shape::initial_input(i))))
            .collect();
        let expected = keys.iter().map(|(raw, num)| K::hot(&db, raw, *num)).sum();
        KeyedHotFetch { db, keys, expected }
    }
}

impl<K: SalsaKey, D: Database> Rep for KeyedHotFetch<K, D> {
    fn rep(&mut self) -> f64 {
        let before = executions();
        let start = Instant::now();
        for _ in 0..shape::HOT_PASSES {
            let mut sum = 0u64;
            for (raw, num) in &self.keys {
                sum += K::hot(black_box(&self.db), black_box(raw), *num);
            }
            assert_eq!(black_box(sum), self.expected);
        }
        let elapsed = start.elapsed();
        assert_eq!(
            executions(),
            before,
            "salsa keyed hot_fetch executed a query"
        );
        elapsed.as_nanos() as f64 / (shape::HOT_PASSES * shape::HOT_KEYS) as f64
    }
}

/// `deep_verify` with keys of kind `K`.
pub struct KeyedDeepVerify<K: SalsaKey, D = DatabaseImpl> {
    db: D,
    roots: Vec<(K::Raw, Num)>,
    bystander: Num,
    bystander_value: u64,
    expected: u64,
}

impl<K: SalsaKey, D: Database> KeyedDeepVerify<K, D> {
    pub fn on(db: D) -> Self {
        let roots: Vec<(K::Raw, Num)> = (0..shape::DEEP_ROOTS)
            .map(|i| (K::make(i), Num::new(&db, shape::initial_input(i))))
            .collect();
        let bystander = Num::builder(0).durability(Durability::LOW).new(&db);
        let expected = roots.iter().map(|(raw, num)| K::root(&db, raw, *num)).sum();
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

impl<K: SalsaKey, D: Database> Rep for KeyedDeepVerify<K, D> {
    fn rep(&mut self) -> f64 {
        let before = executions();
        let mut timed_ns = 0u128;
        for _ in 0..shape::DEEP_ROUNDS {
            self.bystander_value += 1;
            self.bystander
                .set_value(&mut self.db)
                .to(self.bystander_value);
            let start = Instant::now();
            let mut sum = 0u64;
            for (raw, num) in &self.roots {
                sum += K::root(black_box(&self.db), black_box(raw), *num);
            }
            timed_ns += start.elapsed().as_nanos();
            assert_eq!(black_box(sum), self.expected);
        }
        assert_eq!(
            executions(),
            before,
            "salsa keyed deep_verify re-executed a query"
        );
        timed_ns as f64 / (shape::DEEP_ROUNDS * shape::DEEP_ROOTS * shape::DEEP_TREE_MEMOS) as f64
    }
}

// ---- depth -----------------------------------------------------------------------

#[salsa::tracked(returns(copy))]
fn link(db: &dyn Database, bottom: Num, n: u32) -> u64 {
    count_execution();
    if n == 0 {
        return bottom.value(db);
    }
    link(db, bottom, n - 1) + 1
}

/// The same chain as kiln's `depth_chain`, with the same three steps.
pub fn depth_chain(levels: u32) -> [f64; 3] {
    let mut db = DatabaseImpl::new();
    let base = shape::initial_input(0);
    let bottom = Num::new(&db, base);
    let top = levels - 1;
    let timed = |db: &DatabaseImpl, expected_runs: usize, value: u64| {
        let before = executions();
        let start = Instant::now();
        assert_eq!(link(db, bottom, top), value + u64::from(top));
        let ms = start.elapsed().as_secs_f64() * 1e3;
        assert_eq!(
            executions() - before,
            expected_runs,
            "salsa depth executions"
        );
        ms
    };
    let build = timed(&db, levels as usize, base);
    bottom.set_value(&mut db).to(base + 1);
    let edit = timed(&db, levels as usize, base + 1);
    db.synthetic_write(Durability::LOW);
    let verify = timed(&db, 0, base + 1);
    [build, edit, verify]
}
