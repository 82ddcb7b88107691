//! Deserializing `index.json`'s repeated strings once: a shader's name, its passes, the
//! targets, a keyword set and a variant's hashes recur in every entry of the index (three
//! entries per variant with three targets), so each distinct one is allocated once and
//! shared (`Arc`) for the duration of one [`parse`], which is both faster than a `String` per
//! field and smaller in memory. Consecutive entries of one variant share its
//! [`IndexVariant`].

use super::output::IndexVariant;
use rustc_hash::FxHashMap;
use serde::de::{Deserializer, SeqAccess, Visitor};
use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;

/// A list of shared strings (a keyword set).
type List = Arc<[Arc<str>]>;

#[derive(Default)]
struct Interner {
    strings: FxHashMap<Box<str>, Arc<str>>,
    lists: FxHashMap<Box<[Arc<str>]>, List>,
    /// The variant of the entry parsed last: a variant's entries differ only in their
    /// extension, so in an index sorted by path they come one after another.
    last_variant: Option<Arc<IndexVariant>>,
}

thread_local! {
    static INTERNER: RefCell<Option<Interner>> = const { RefCell::new(None) };
}

/// Runs `f` (a deserialization) with an interner for [`string`] and [`list`], dropped after.
pub(super) fn parse<T>(f: impl FnOnce() -> T) -> T {
    let outer = INTERNER.with(|i| i.replace(Some(Interner::default())));
    let result = f();
    INTERNER.with(|i| i.replace(outer));
    result
}

fn intern_str(text: &str) -> Arc<str> {
    INTERNER.with(|i| match &mut *i.borrow_mut() {
        Some(interner) => {
            if let Some(shared) = interner.strings.get(text) {
                return Arc::clone(shared);
            }
            let shared: Arc<str> = Arc::from(text);
            interner
                .strings
                .insert(Box::from(text), Arc::clone(&shared));
            shared
        }
        // Outside `parse`: nothing to share with.
        None => Arc::from(text),
    })
}

fn intern_list(items: Vec<Arc<str>>) -> List {
    INTERNER.with(|i| match &mut *i.borrow_mut() {
        Some(interner) => {
            if let Some(shared) = interner.lists.get(items.as_slice()) {
                return Arc::clone(shared);
            }
            let shared: List = Arc::from(items.as_slice());
            interner
                .lists
                .insert(items.into_boxed_slice(), Arc::clone(&shared));
            shared
        }
        None => Arc::from(items),
    })
}

/// `variant`, shared with the entry parsed just before when they belong to one variant.
pub(super) fn variant(variant: IndexVariant) -> Arc<IndexVariant> {
    INTERNER.with(|i| match &mut *i.borrow_mut() {
        Some(interner) => match &interner.last_variant {
            Some(last) if **last == variant => Arc::clone(last),
            _ => Arc::clone(interner.last_variant.insert(Arc::new(variant))),
        },
        None => Arc::new(variant),
    })
}

struct StrVisitor;

impl<'de> Visitor<'de> for StrVisitor {
    type Value = Arc<str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Arc<str>, E> {
        Ok(intern_str(text))
    }
}

/// `deserialize_with` for a shared string field.
pub(super) fn string<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<str>, D::Error> {
    d.deserialize_str(StrVisitor)
}

struct ListVisitor;

impl<'de> Visitor<'de> for ListVisitor {
    type Value = List;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of strings")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(4));
        while let Some(item) = seq.next_element_seed(StrSeed)? {
            items.push(item);
        }
        Ok(intern_list(items))
    }
}

struct StrSeed;

impl<'de> serde::de::DeserializeSeed<'de> for StrSeed {
    type Value = Arc<str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Arc<str>, D::Error> {
        string(d)
    }
}

/// `deserialize_with` for a shared list of shared strings.
pub(super) fn list<'de, D: Deserializer<'de>>(d: D) -> Result<List, D::Error> {
    d.deserialize_seq(ListVisitor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct Pair {
        #[serde(deserialize_with = "string")]
        a: Arc<str>,
        #[serde(deserialize_with = "list")]
        b: Arc<[Arc<str>]>,
    }

    #[test]
    fn equal_strings_and_lists_of_one_parse_share_one_allocation() {
        let json = r#"[{"a":"Lit","b":["FOG","SKIN"]},{"a":"Lit","b":["FOG","SKIN"]},
                       {"a":"L\u0069t","b":["FOG"]}]"#;
        let pairs: Vec<Pair> = parse(|| serde_json::from_str(json)).unwrap();
        assert!(Arc::ptr_eq(&pairs[0].a, &pairs[1].a));
        assert!(
            Arc::ptr_eq(&pairs[0].a, &pairs[2].a),
            "an escaped equal string too"
        );
        assert!(Arc::ptr_eq(&pairs[0].b, &pairs[1].b));
        assert!(Arc::ptr_eq(&pairs[0].b[0], &pairs[2].b[0]));
        assert_eq!(&*pairs[2].b, &[Arc::from("FOG")][..]);
        // Outside a parse nothing is kept.
        let alone: Vec<Pair> = serde_json::from_str(json).unwrap();
        assert!(!Arc::ptr_eq(&alone[0].a, &alone[1].a));
    }
}
