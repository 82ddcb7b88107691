//! Property test against two models: random query DAGs over random inputs, random edit
//! sequences (including equal-value sets, durability changes, removals, synthetic writes
//! and LRU capacity changes). After every edit each query's value equals a plain recursive
//! recomputation (soundness), and the set of queries that executed is *exactly* the one a
//! reference model of revisions with early cutoff predicts (no spurious work, no lost
//! backdating): a query runs iff LRU evicted its value or something it read directly
//! changed, and its value then counts as changed unless it is equal and its durability
//! did not drop below the one the memo recorded (the engine's backdating rule).

use std::collections::{BTreeSet, HashMap};

use std::sync::Arc;

use kiln_incr::{Database, Durability, EventKind, Input, Query, QueryError};
use parking_lot::Mutex;
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct Node {
    inputs: Vec<usize>,
    /// Indices of earlier nodes: the graph is a DAG by construction.
    deps: Vec<usize>,
    /// Small moduli make equal results (and so backdating) frequent.
    modulus: u32,
}

#[derive(Clone, Debug)]
enum Edit {
    Set {
        input: usize,
        value: u32,
        durability: Durability,
    },
    Remove {
        input: usize,
    },
    Synthetic(Durability),
    Capacity(usize),
}

const MISSING: u32 = 7;

struct Model {
    nodes: Vec<Node>,
    executed: Mutex<Vec<usize>>,
}

struct In;
impl Input for In {
    type Key = usize;
    type Value = u32;
    const NAME: &'static str = "in";
}

struct Eval;
impl Query<Arc<Model>> for Eval {
    type Key = usize;
    type Value = u32;
    const NAME: &'static str = "eval";
    fn execute(db: &Database<Arc<Model>>, node: &usize) -> Result<u32, QueryError> {
        let model = db.context();
        model.executed.lock().push(*node);
        let spec = &model.nodes[*node];
        let mut sum = *node as u32;
        for input in &spec.inputs {
            sum += db.input::<In>(input).unwrap_or(MISSING);
        }
        for dep in &spec.deps {
            sum += db.get::<Eval>(dep)?;
        }
        Ok(sum % spec.modulus)
    }
}

/// The same function, recomputed from scratch.
fn oracle(nodes: &[Node], inputs: &HashMap<usize, u32>, node: usize) -> u32 {
    let spec = &nodes[node];
    let mut sum = node as u32;
    for input in &spec.inputs {
        sum += inputs.get(input).copied().unwrap_or(MISSING);
    }
    for dep in &spec.deps {
        sum += oracle(nodes, inputs, *dep);
    }
    sum % spec.modulus
}

/// What the engine shows of an input: its value and durability (`None`, `Low` when
/// missing: a removed or never-set input).
fn input_state(
    state: &HashMap<usize, (u32, Durability)>,
    input: usize,
) -> (Option<u32>, Durability) {
    state
        .get(&input)
        .map_or((None, Durability::Low), |(value, durability)| {
            (Some(*value), *durability)
        })
}

/// The reference model of one node's memo: its value and durability (the minimum over
/// what it read; `High` when it read nothing).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Memo {
    value: u32,
    durability: Durability,
}

/// The memo `node` gets when it executes with inputs `state` and dependencies `memos`.
fn execute_model(
    nodes: &[Node],
    state: &HashMap<usize, (u32, Durability)>,
    memos: &[Memo],
    node: usize,
) -> Memo {
    let spec = &nodes[node];
    let mut sum = node as u32;
    let mut durability = Durability::High;
    for input in &spec.inputs {
        let (value, input_durability) = input_state(state, *input);
        sum += value.unwrap_or(MISSING);
        durability = durability.min(input_durability);
    }
    for dep in &spec.deps {
        sum += memos[*dep].value;
        durability = durability.min(memos[*dep].durability);
    }
    Memo {
        value: sum % spec.modulus,
        durability,
    }
}

/// The reference model of one revision: which nodes execute, given the inputs that
/// changed and the nodes whose values LRU evicted. Nodes are in topological order (a
/// node's dependencies have lower indices). Updates `memos`.
fn expected_executions(
    nodes: &[Node],
    state: &HashMap<usize, (u32, Durability)>,
    changed_inputs: &BTreeSet<usize>,
    evicted: &BTreeSet<usize>,
    memos: &mut [Memo],
) -> BTreeSet<usize> {
    let mut executed = BTreeSet::new();
    let mut changed = vec![false; nodes.len()];
    for node in 0..nodes.len() {
        let spec = &nodes[node];
        let must_run = evicted.contains(&node)
            || spec
                .inputs
                .iter()
                .any(|input| changed_inputs.contains(input))
            || spec.deps.iter().any(|dep| changed[*dep]);
        if !must_run {
            continue;
        }
        executed.insert(node);
        let old = memos[node];
        let new = execute_model(nodes, state, memos, node);
        // Backdating: an equal value keeps its revision, unless its durability dropped.
        changed[node] = !(new.value == old.value && new.durability >= old.durability);
        memos[node] = new;
    }
    executed
}

fn durability() -> impl Strategy<Value = Durability> {
    prop_oneof![
        Just(Durability::Low),
        Just(Durability::Medium),
        Just(Durability::High)
    ]
}

fn scenario() -> impl Strategy<Value = (usize, Vec<Node>, Vec<Edit>, Vec<usize>)> {
    (1..5usize, 1..9usize).prop_flat_map(|(input_count, node_count)| {
        let nodes = (0..node_count)
            .map(|index| {
                let deps = if index == 0 {
                    Just(Vec::new()).boxed()
                } else {
                    prop::collection::vec(0..index, 0..3).boxed()
                };
                (prop::collection::vec(0..input_count, 0..3), deps, 2..5u32).prop_map(
                    |(inputs, deps, modulus)| Node {
                        inputs,
                        deps,
                        modulus,
                    },
                )
            })
            .collect::<Vec<_>>();
        let edit = prop_oneof![
            6 => (0..input_count, 0..3u32, durability()).prop_map(|(input, value, durability)| {
                Edit::Set { input, value, durability }
            }),
            1 => (0..input_count).prop_map(|input| Edit::Remove { input }),
            1 => durability().prop_map(Edit::Synthetic),
            1 => (0..4usize).prop_map(Edit::Capacity),
        ];
        (
            Just(input_count),
            nodes,
            prop::collection::vec(edit, 1..14),
            // A fetch order (a permutation is derived from it per round).
            prop::collection::vec(0..node_count, node_count..=node_count),
        )
    })
}

/// Cases per run; `KILN_MODEL_CASES=N` runs it longer.
fn model_cases() -> u32 {
    std::env::var("KILN_MODEL_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: model_cases(), ..ProptestConfig::default() })]

    #[test]
    fn matches_from_scratch_and_does_no_spurious_work(
        (input_count, nodes, edits, order_seed) in scenario(),
        initial_capacity in 0..4usize,
    ) {
        let model = Arc::new(Model { nodes: nodes.clone(), executed: Mutex::new(Vec::new()) });
        let mut db = Database::new(Arc::clone(&model));
        let evicted = Arc::new(Mutex::new(Vec::<usize>::new()));
        let sink = Arc::clone(&evicted);
        db.set_event_listener(move |event| {
            if event.kind == EventKind::Evicted {
                let key: usize = format!("{:?}", event.key).parse().unwrap();
                sink.lock().push(key);
            }
        });
        db.set_lru_capacity::<Eval>(initial_capacity);

        // Input state: value and durability; absent = missing.
        let mut state: HashMap<usize, (u32, Durability)> = HashMap::new();
        for input in 0..input_count {
            if input % 2 == 0 {
                db.set_input::<In>(input, input as u32, Durability::Low);
                state.insert(input, (input as u32, Durability::Low));
            }
        }
        let order: Vec<usize> = {
            let mut order: Vec<usize> = (0..nodes.len()).collect();
            order.sort_by_key(|node| (order_seed[*node], *node));
            order
        };
        let fetch_all = |db: &Database<Arc<Model>>, state: &HashMap<usize, (u32, Durability)>| {
            let values: HashMap<usize, u32> = state.iter().map(|(k, (v, _))| (*k, *v)).collect();
            for node in &order {
                let expected = oracle(&nodes, &values, *node);
                assert_eq!(db.get::<Eval>(node).unwrap(), expected, "node {}", node);
            }
        };

        fetch_all(&db, &state);
        let mut first: Vec<usize> = std::mem::take(&mut *model.executed.lock());
        first.sort();
        prop_assert_eq!(first, (0..nodes.len()).collect::<Vec<_>>());
        evicted.lock().clear();
        let mut memos: Vec<Memo> = Vec::with_capacity(nodes.len());
        for node in 0..nodes.len() {
            let memo = execute_model(&nodes, &state, &memos, node);
            memos.push(memo);
        }

        for edit in &edits {
            // The durability each memo recorded. The engine keeps a memo's recorded
            // durability when it only refills an evicted value that a dependent's walk
            // already verified (fetch order decides which), and a lower recorded
            // durability is sound, only more cautious: backdating compares with it.
            for (node, memo) in memos.iter_mut().enumerate() {
                memo.durability = db.memo_info::<Eval>(&node).unwrap().durability;
            }
            let before = state.clone();
            match edit {
                Edit::Set { input, value, durability } => {
                    db.set_input::<In>(*input, *value, *durability);
                    state.insert(*input, (*value, *durability));
                }
                Edit::Remove { input } => {
                    db.remove_input::<In>(input);
                    state.remove(input);
                }
                Edit::Synthetic(durability) => db.synthetic_write(*durability),
                Edit::Capacity(capacity) => db.set_lru_capacity::<Eval>(*capacity),
            }
            let changed: BTreeSet<usize> = (0..input_count)
                .filter(|input| input_state(&before, *input) != input_state(&state, *input))
                .collect();
            let evicted_now: BTreeSet<usize> = std::mem::take(&mut *evicted.lock()).into_iter().collect();

            fetch_all(&db, &state);

            let executed = std::mem::take(&mut *model.executed.lock());
            let unique: BTreeSet<usize> = executed.iter().copied().collect();
            prop_assert_eq!(unique.len(), executed.len(), "a node ran twice in one revision: {:?}", executed);
            let expected = expected_executions(&nodes, &state, &changed, &evicted_now, &mut memos);
            prop_assert_eq!(
                &unique, &expected,
                "after {:?} (changed inputs {:?}, evicted {:?}): executed {:?}, the reference model \
                 of early cutoff runs {:?}",
                edit, changed, evicted_now, unique, expected
            );
        }
    }
}
