//! Interned names and interned keyword sets: the global tables behind `VariantKey`.
//!
//! Every shader, pass and keyword name is interned once into a process-wide table and
//! represented by a `Symbol` (a `u32`), so comparing and hashing keys are integer
//! operations. Every distinct keyword set is interned too, so a key holds one pointer for its
//! whole set. Interned data lives for the rest of the process (it is leaked on purpose): the
//! names of a renderer's shaders are a small, bounded vocabulary, and leaking buys lookups
//! that need no lock once a thread has seen a name.
//!
//! Each thread keeps its own map in front of the global tables, so the hot path (building a
//! key from names the thread has seen) touches no shared cache line at all; the global tables
//! are locked only the first time a thread meets a name or a set.

use std::cell::RefCell;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::LazyLock;

use parking_lot::{Mutex, RwLock};
use rustc_hash::FxHashMap;

/// An interned name (shader, pass or keyword): equality and hashing are integer operations.
///
/// Two symbols are equal exactly when their names are equal byte for byte.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Symbol(u32);

impl Symbol {
    /// Fills unused stack slots; never part of a key.
    pub(crate) const PLACEHOLDER: Symbol = Symbol(u32::MAX);

    /// The symbol's number in the global table (stable only within one process).
    pub(crate) fn index(self) -> u32 {
        self.0
    }

    /// Interns `name`, returning its symbol (the same one for equal names, in every thread).
    pub fn intern(name: &str) -> Symbol {
        intern_name(name).0
    }

    /// The symbol of `name` if some thread has interned it, without interning it.
    pub fn lookup(name: &str) -> Option<Symbol> {
        lookup_name(name).map(|(symbol, _)| symbol)
    }

    /// The interned name.
    pub fn as_str(self) -> &'static str {
        // Every public `Symbol` was made by `intern_name`, which pushed its name first; only
        // the placeholder, which never leaves this crate's stack buffers, is out of range.
        NAMES
            .read()
            .by_index
            .get(self.0 as usize)
            .copied()
            .unwrap_or("")
    }
}

impl fmt::Debug for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Symbol({:?})", self.as_str())
    }
}

impl fmt::Display for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An interned, canonical keyword set: distinct keywords in ordinal (byte) order.
///
/// One instance exists per distinct set, so equality is a pointer comparison and the hash is
/// the set's number.
#[derive(Clone, Copy)]
pub struct KeywordSet(&'static SetData);

pub(crate) struct SetData {
    id: u32,
    symbols: Box<[Symbol]>,
    names: Box<[&'static str]>,
    text: Box<str>,
}

impl KeywordSet {
    /// The keywords in ordinal order.
    pub fn symbols(self) -> &'static [Symbol] {
        &self.0.symbols
    }

    /// The keyword names in ordinal order.
    pub fn names(self) -> &'static [&'static str] {
        &self.0.names
    }

    /// The text form: names joined with `;` (`FOG;SKIN`), empty for the empty set.
    pub fn text(self) -> &'static str {
        &self.0.text
    }

    /// The number of keywords.
    pub fn len(self) -> usize {
        self.0.symbols.len()
    }

    /// Whether the set has no keyword.
    pub fn is_empty(self) -> bool {
        self.0.symbols.is_empty()
    }

    /// Whether `keyword` is in the set.
    pub fn contains(self, keyword: Symbol) -> bool {
        self.0.symbols.contains(&keyword)
    }

    /// Interns a set given as (name, symbol) pairs already sorted by name and deduplicated.
    pub(crate) fn intern_sorted(sorted: &[(&'static str, Symbol)]) -> KeywordSet {
        let mut symbols = [Symbol::PLACEHOLDER; INLINE_KEYWORDS];
        let spilled: Vec<Symbol>;
        let symbols: &[Symbol] = if sorted.len() <= INLINE_KEYWORDS {
            for (slot, &(_, symbol)) in symbols.iter_mut().zip(sorted) {
                *slot = symbol;
            }
            &symbols[..sorted.len()]
        } else {
            spilled = sorted.iter().map(|&(_, symbol)| symbol).collect();
            &spilled
        };
        if let Some(found) = LOCAL.with(|local| local.borrow().sets.get(symbols).copied()) {
            return found;
        }
        let set = intern_set_globally(sorted, symbols);
        LOCAL.with(|local| local.borrow_mut().sets.insert(set.symbols(), set));
        set
    }
}

impl PartialEq for KeywordSet {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for KeywordSet {}

impl Hash for KeywordSet {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u32(self.0.id);
    }
}

impl fmt::Debug for KeywordSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeywordSet({:?})", self.text())
    }
}

impl fmt::Display for KeywordSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text())
    }
}

/// Keyword sets up to this size are canonicalised on the stack (no allocation on a hit).
pub(crate) const INLINE_KEYWORDS: usize = 16;

struct NameTable {
    by_name: FxHashMap<&'static str, Symbol>,
    by_index: Vec<&'static str>,
}

struct SetTable {
    by_symbols: FxHashMap<&'static [Symbol], KeywordSet>,
}

#[derive(Default)]
struct LocalTables {
    names: FxHashMap<&'static str, (Symbol, &'static str)>,
    sets: FxHashMap<&'static [Symbol], KeywordSet>,
}

static NAMES: LazyLock<RwLock<NameTable>> = LazyLock::new(|| {
    RwLock::new(NameTable {
        by_name: FxHashMap::default(),
        by_index: Vec::new(),
    })
});

static SETS: LazyLock<Mutex<SetTable>> = LazyLock::new(|| {
    Mutex::new(SetTable {
        by_symbols: FxHashMap::default(),
    })
});

thread_local! {
    static LOCAL: RefCell<LocalTables> = RefCell::new(LocalTables::default());
}

/// Interns `name`, returning its symbol and the interned (static) copy of the name.
pub(crate) fn intern_name(name: &str) -> (Symbol, &'static str) {
    if let Some(found) = LOCAL.with(|local| local.borrow().names.get(name).copied()) {
        return found;
    }
    let found = intern_name_globally(name);
    LOCAL.with(|local| local.borrow_mut().names.insert(found.1, found));
    found
}

/// The symbol and interned copy of `name` if it was interned, without interning it.
pub(crate) fn lookup_name(name: &str) -> Option<(Symbol, &'static str)> {
    if let Some(found) = LOCAL.with(|local| local.borrow().names.get(name).copied()) {
        return Some(found);
    }
    let found = NAMES
        .read()
        .by_name
        .get_key_value(name)
        .map(|(&interned, &symbol)| (symbol, interned))?;
    LOCAL.with(|local| local.borrow_mut().names.insert(found.1, found));
    Some(found)
}

#[cold]
fn intern_name_globally(name: &str) -> (Symbol, &'static str) {
    if let Some((&interned, &symbol)) = NAMES.read().by_name.get_key_value(name) {
        return (symbol, interned);
    }
    let mut table = NAMES.write();
    // Another thread may have interned it between the two locks.
    if let Some((&interned, &symbol)) = table.by_name.get_key_value(name) {
        return (symbol, interned);
    }
    let interned: &'static str = Box::leak(name.into());
    let index = u32::try_from(table.by_index.len()).unwrap_or_else(|_| too_many("names"));
    let symbol = Symbol(index);
    table.by_index.push(interned);
    table.by_name.insert(interned, symbol);
    (symbol, interned)
}

#[cold]
fn intern_set_globally(sorted: &[(&'static str, Symbol)], symbols: &[Symbol]) -> KeywordSet {
    let mut table = SETS.lock();
    if let Some(&set) = table.by_symbols.get(symbols) {
        return set;
    }
    let names: Box<[&'static str]> = sorted.iter().map(|&(name, _)| name).collect();
    let id = u32::try_from(table.by_symbols.len()).unwrap_or_else(|_| too_many("keyword sets"));
    let data: &'static SetData = Box::leak(Box::new(SetData {
        id,
        symbols: symbols.into(),
        text: names.join(";").into_boxed_str(),
        names,
    }));
    let set = KeywordSet(data);
    table.by_symbols.insert(set.symbols(), set);
    set
}

/// Four billion distinct names cannot come from a real project; stop rather than alias two.
#[cold]
fn too_many(what: &str) -> ! {
    panic!("kiln: more than u32::MAX interned {what}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_is_stable_across_threads() {
        let here = Symbol::intern("symbol_test_Lit");
        let there = std::thread::spawn(|| Symbol::intern("symbol_test_Lit"))
            .join()
            .unwrap();
        assert_eq!(here, there);
        assert_eq!(here.as_str(), "symbol_test_Lit");
        assert_ne!(here, Symbol::intern("symbol_test_Unlit"));
    }

    #[test]
    fn lookup_does_not_intern() {
        assert_eq!(Symbol::lookup("symbol_test_never_interned"), None);
        let s = Symbol::intern("symbol_test_now_interned");
        assert_eq!(Symbol::lookup("symbol_test_now_interned"), Some(s));
    }
}
