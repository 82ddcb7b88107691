//! Interned names and interned keyword sets: the global tables behind `VariantKey`.
//!
//! Every shader, pass and keyword name is interned once into a process-wide table and
//! represented by a `Symbol` (a `u32`), so comparing and hashing keys are integer
//! operations. Every distinct keyword set is interned too, so a key holds one pointer for its
//! whole set. Interned data lives for the rest of the process (it is leaked on purpose): the
//! names of a renderer's shaders are a small, bounded vocabulary, and leaking buys lookups
//! that need no lock once a thread has seen a name.
//!
//! Each thread keeps its own tables in front of the global ones (`LocalTables`), which also
//! remember which names were already validated, so building a key from names the thread has
//! seen touches no shared cache line and validates nothing twice; the global tables are
//! locked only the first time a thread meets a name or a set.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::LazyLock;

use parking_lot::{Mutex, RwLock};
use rustc_hash::{FxBuildHasher, FxHashMap};

use super::error::NameFault;

/// An interned name (shader, pass or keyword): equality and hashing are integer operations.
///
/// Two symbols are equal exactly when their names are equal byte for byte.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Symbol(u32);

impl Symbol {
    /// Fills unused stack slots; never part of a key.
    const PLACEHOLDER: Symbol = Symbol(u32::MAX);

    /// Interns `name`, returning its symbol (the same one for equal names, in every thread).
    pub fn intern(name: &str) -> Symbol {
        intern_globally(name).0
    }

    /// The symbol of `name` if it was interned, without interning it.
    pub fn lookup(name: &str) -> Option<Symbol> {
        NAMES.read().by_name.get(name).copied()
    }

    /// The interned name.
    pub fn as_str(self) -> &'static str {
        // Every public `Symbol` was made by `intern_globally`, which pushed its name first;
        // only the placeholder, which never leaves this module's stack buffers, is out of
        // range.
        NAMES
            .read()
            .by_index
            .get(self.0 as usize)
            .copied()
            .unwrap_or("")
    }

    /// The symbol's number in the global table (stable only within one process).
    pub(crate) fn index(self) -> u32 {
        self.0
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

struct SetData {
    id: u32,
    /// The symbols in symbol-number order: the lookup key, cheap to sort on the hot path.
    by_number: Box<[Symbol]>,
    /// The symbols in ordinal order of their names: the set as users see it.
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
        self.0
            .by_number
            .binary_search_by_key(&keyword.0, |symbol| symbol.0)
            .is_ok()
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

/// The bytes of a name of at most 16 bytes, packed into integers without loss (together
/// with the length, every byte is covered), so that looking a short name up hashes and
/// compares three integers instead of hashing bytes and calling `memcmp`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Packed {
    low: u64,
    high: u64,
    len: u8,
}

impl Packed {
    #[inline]
    fn new(text: &str) -> Option<Packed> {
        let b = text.as_bytes();
        let len = b.len();
        let word = |at: usize| -> Option<u64> {
            Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
        };
        let half = |at: usize| -> Option<u64> {
            Some(u64::from(u32::from_le_bytes(
                b.get(at..at + 4)?.try_into().ok()?,
            )))
        };
        let (low, high) = match len {
            0 => (0, 0),
            // Bytes 0, len/2 and len-1 cover every byte of a 1- to 3-byte name.
            1..=3 => (
                u64::from(b[0]) | u64::from(b[len / 2]) << 8 | u64::from(b[len - 1]) << 16,
                0,
            ),
            // Two overlapping halves (or words) cover every byte.
            4..=8 => (half(0)?, half(len - 4)?),
            9..=16 => (word(0)?, word(len - 8)?),
            _ => return None,
        };
        Some(Packed {
            low,
            high,
            len: len as u8,
        })
    }
}

/// Names to symbols: short names by their packed bytes, longer ones by their text.
struct NameMap {
    short: FxHashMap<Packed, Symbol>,
    long: FxHashMap<&'static str, Symbol>,
}

impl NameMap {
    const fn new() -> Self {
        NameMap {
            short: HashMap::with_hasher(FxBuildHasher),
            long: HashMap::with_hasher(FxBuildHasher),
        }
    }

    #[inline]
    fn get(&self, text: &str) -> Option<Symbol> {
        match Packed::new(text) {
            Some(packed) => self.short.get(&packed).copied(),
            None => self.long.get(text).copied(),
        }
    }

    fn insert(&mut self, text: &'static str, symbol: Symbol) {
        match Packed::new(text) {
            Some(packed) => self.short.insert(packed, symbol),
            None => self.long.insert(text, symbol),
        };
    }
}

/// Keyword sets up to this size are canonicalised on the stack (no allocation on a hit).
const INLINE_KEYWORDS: usize = 8;

/// A thread's view of the global tables: names already validated (separately as shader or
/// pass names and as keywords, whose rules differ) and sets already interned.
pub(crate) struct LocalTables {
    names: NameMap,
    keywords: NameMap,
    sets: FxHashMap<&'static [Symbol], KeywordSet>,
}

thread_local! {
    static LOCAL: RefCell<LocalTables> = const { RefCell::new(LocalTables::new()) };
}

/// Runs `f` with this thread's tables. A nested call (a keyword iterator that itself builds
/// keys) gets fresh, empty tables: slower, never wrong.
pub(crate) fn with_local<R>(f: impl FnOnce(&mut LocalTables) -> R) -> R {
    let mut f = Some(f);
    let result = LOCAL.try_with(|local| {
        let mut local = local.try_borrow_mut().ok()?;
        let f = f.take()?;
        Some(f(&mut local))
    });
    match (result, f) {
        (Ok(Some(result)), _) => result,
        (_, Some(f)) => f(&mut LocalTables::new()),
        // `f` is taken only on the path that returns its result.
        (_, None) => unreachable!("with_local lost its closure"),
    }
}

impl LocalTables {
    const fn new() -> Self {
        LocalTables {
            names: NameMap::new(),
            keywords: NameMap::new(),
            sets: HashMap::with_hasher(FxBuildHasher),
        }
    }

    /// `text` as a shader or pass name, validated by `check` the first time.
    #[inline]
    pub(crate) fn name(
        &mut self,
        text: &str,
        check: fn(&str) -> Result<(), NameFault>,
    ) -> Result<Symbol, NameFault> {
        if let Some(symbol) = self.names.get(text) {
            return Ok(symbol);
        }
        check(text)?;
        let (symbol, interned) = intern_globally(text);
        self.names.insert(interned, symbol);
        Ok(symbol)
    }

    /// `text` as a keyword, validated by `check` the first time.
    #[inline]
    pub(crate) fn keyword(
        &mut self,
        text: &str,
        check: fn(&str) -> Result<(), NameFault>,
    ) -> Result<Symbol, NameFault> {
        if let Some(symbol) = self.keywords.get(text) {
            return Ok(symbol);
        }
        check(text)?;
        let (symbol, interned) = intern_globally(text);
        self.keywords.insert(interned, symbol);
        Ok(symbol)
    }

    /// `text` as a keyword if it was already interned (by anyone) and passes `check`; never
    /// interns.
    pub(crate) fn known_keyword(
        &mut self,
        text: &str,
        check: fn(&str) -> Result<(), NameFault>,
    ) -> Option<Symbol> {
        if let Some(symbol) = self.keywords.get(text) {
            return Some(symbol);
        }
        let (&interned, &symbol) = NAMES.read().by_name.get_key_value(text)?;
        check(text).ok()?;
        self.keywords.insert(interned, symbol);
        Some(symbol)
    }

    /// The interned set of `by_number`: distinct symbols sorted by number.
    fn set(&mut self, by_number: &[Symbol]) -> KeywordSet {
        if let Some(&set) = self.sets.get(by_number) {
            return set;
        }
        let set = intern_set_globally(by_number);
        self.sets.insert(&set.0.by_number, set);
        set
    }
}

/// Collects a key's keywords, on the stack up to `INLINE_KEYWORDS`, and turns them into the
/// canonical set.
pub(crate) struct KeywordBuf {
    len: usize,
    inline: [Symbol; INLINE_KEYWORDS],
    spilled: Vec<Symbol>,
}

impl KeywordBuf {
    pub(crate) fn new() -> Self {
        KeywordBuf {
            len: 0,
            inline: [Symbol::PLACEHOLDER; INLINE_KEYWORDS],
            spilled: Vec::new(),
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, symbol: Symbol) {
        if self.len < INLINE_KEYWORDS {
            self.inline[self.len] = symbol;
        } else {
            if self.spilled.is_empty() {
                self.spilled.extend_from_slice(&self.inline);
            }
            self.spilled.push(symbol);
        }
        self.len += 1;
    }

    /// Removes repeats and interns the set. The lookup sorts by symbol number (integers);
    /// the set itself is kept in ordinal order of the names, made once when first interned.
    pub(crate) fn intern_set(&mut self, tables: &mut LocalTables) -> KeywordSet {
        let symbols: &mut [Symbol] = if self.len <= INLINE_KEYWORDS {
            &mut self.inline[..self.len]
        } else {
            &mut self.spilled
        };
        symbols.sort_unstable_by_key(|symbol| symbol.0);
        let mut kept = 0;
        for i in 0..symbols.len() {
            if kept == 0 || symbols[kept - 1] != symbols[i] {
                symbols[kept] = symbols[i];
                kept += 1;
            }
        }
        tables.set(&symbols[..kept])
    }
}

struct NameTable {
    by_name: FxHashMap<&'static str, Symbol>,
    by_index: Vec<&'static str>,
}

static NAMES: LazyLock<RwLock<NameTable>> = LazyLock::new(|| {
    RwLock::new(NameTable {
        by_name: FxHashMap::default(),
        by_index: Vec::new(),
    })
});

static SETS: LazyLock<Mutex<FxHashMap<&'static [Symbol], KeywordSet>>> =
    LazyLock::new(|| Mutex::new(FxHashMap::default()));

#[cold]
fn intern_globally(text: &str) -> (Symbol, &'static str) {
    if let Some((&interned, &symbol)) = NAMES.read().by_name.get_key_value(text) {
        return (symbol, interned);
    }
    let mut table = NAMES.write();
    // Another thread may have interned it between the two locks.
    if let Some((&interned, &symbol)) = table.by_name.get_key_value(text) {
        return (symbol, interned);
    }
    let interned: &'static str = Box::leak(text.into());
    let symbol = Symbol(next_number(table.by_index.len(), "names"));
    table.by_index.push(interned);
    table.by_name.insert(interned, symbol);
    (symbol, interned)
}

#[cold]
fn intern_set_globally(by_number: &[Symbol]) -> KeywordSet {
    if let Some(&set) = SETS.lock().get(by_number) {
        return set;
    }
    let mut named: Vec<(&'static str, Symbol)> = {
        let names = NAMES.read();
        by_number
            .iter()
            .map(|&symbol| {
                (
                    names.by_index.get(symbol.0 as usize).copied().unwrap_or(""),
                    symbol,
                )
            })
            .collect()
    };
    // The canonical order (kiln-runtime's, the engine's too): bytes, independent of locale and
    // of interning. The symbols are distinct, so nothing is dropped.
    let distinct = kiln_runtime::canon::canonicalize_by(&mut named, |&(name, _)| name);
    named.truncate(distinct);
    let names: Box<[&'static str]> = named.iter().map(|&(name, _)| name).collect();
    let mut table = SETS.lock();
    if let Some(&set) = table.get(by_number) {
        return set;
    }
    let data: &'static SetData = Box::leak(Box::new(SetData {
        id: next_number(table.len(), "keyword sets"),
        by_number: by_number.into(),
        symbols: named.iter().map(|&(_, symbol)| symbol).collect(),
        text: kiln_runtime::canon::keyword_text(&names).into_boxed_str(),
        names,
    }));
    let set = KeywordSet(data);
    table.insert(&data.by_number, set);
    set
}

/// The number for the next entry of a table holding `len`. Four billion distinct names or
/// sets cannot come from a real project; stop rather than alias two of them.
fn next_number(len: usize, what: &str) -> u32 {
    match u32::try_from(len) {
        Ok(number) if number < u32::MAX => number,
        _ => panic!("kiln: more than {} interned {what}", u32::MAX - 1),
    }
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

    #[test]
    fn packing_short_names_loses_nothing() {
        let texts = [
            "",
            "A",
            "AB",
            "BA",
            "ABC",
            "AAC",
            "ACC",
            "ABCD",
            "ABCDE",
            "ABDDE",
            "ABCDEFGH",
            "ABCDEFGHI",
            "ABCDEFGHJ",
            "ABCDEFGIIJ",
            "0123456789abcdef",
            "é",
            "éé",
            "A\0",
            "\0A",
        ];
        for a in texts {
            for b in texts {
                assert_eq!(Packed::new(a) == Packed::new(b), a == b, "{a:?} vs {b:?}");
            }
        }
        assert!(Packed::new("0123456789abcdefg").is_none());
    }
}
