//! Deserializing `index.json`'s repeated strings once: a shader's name, its passes, the
//! targets, a keyword set and a variant's hashes recur in every entry of the index (three
//! entries per variant with three targets). Each entry's strings are read where they lie in
//! the bytes ([`Text`]); consecutive entries of one variant share its [`IndexVariant`],
//! found by comparing the strings with the previous entry's, and a new variant's names and
//! keyword list are allocated once and shared (`Arc`) for the duration of one [`parse`]
//! ([`entry`]): faster than a `String` per field, and smaller in memory.

use super::IndexVariant;
use rustc_hash::FxHashMap;
use serde::de::{Deserialize, Deserializer, Visitor};
use std::borrow::Cow;
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

impl Interner {
    fn string(&mut self, text: &str) -> Arc<str> {
        if let Some(shared) = self.strings.get(text) {
            return Arc::clone(shared);
        }
        let shared: Arc<str> = Arc::from(text);
        self.strings.insert(Box::from(text), Arc::clone(&shared));
        shared
    }

    fn list(&mut self, items: &[Text<'_>]) -> List {
        let items: Vec<Arc<str>> = items.iter().map(|item| self.string(item)).collect();
        if let Some(shared) = self.lists.get(items.as_slice()) {
            return Arc::clone(shared);
        }
        let shared: List = Arc::from(items.as_slice());
        self.lists
            .insert(items.into_boxed_slice(), Arc::clone(&shared));
        shared
    }
}

/// A string as it lies in the parsed bytes, copied only when it holds escapes.
pub(super) struct Text<'a>(Cow<'a, str>);

impl Text<'_> {
    /// An absent field's value.
    pub(super) fn empty() -> Self {
        Text(Cow::Borrowed(""))
    }
}

impl std::ops::Deref for Text<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(TextVisitor(std::marker::PhantomData))
    }
}

struct TextVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for TextVisitor<'a> {
    type Value = Text<'a>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E: serde::de::Error>(self, text: &'de str) -> Result<Text<'a>, E> {
        Ok(Text(Cow::Borrowed(text)))
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Text<'a>, E> {
        Ok(Text(Cow::Owned(text.to_owned())))
    }
}

/// The fields of one entry's variant, as parsed.
pub(super) struct VariantText<'a> {
    pub shader: Text<'a>,
    pub pass: Text<'a>,
    pub keywords: Vec<Text<'a>>,
    pub revision: Text<'a>,
    pub digest: Text<'a>,
    pub inputs: Text<'a>,
}

impl VariantText<'_> {
    fn is(&self, variant: &IndexVariant) -> bool {
        *self.shader == *variant.shader
            && *self.pass == *variant.pass
            && *self.revision == *variant.revision
            && *self.digest == *variant.digest
            && *self.inputs == *variant.inputs
            && self.keywords.len() == variant.keywords.len()
            && self
                .keywords
                .iter()
                .zip(variant.keywords.iter())
                .all(|(a, b)| **a == **b)
    }
}

/// One entry's variant and target, shared with what this parse made before: the variant of
/// the entry just before when equal (a variant's entries differ only in their extension, so
/// in an index sorted by path they come one after another: no string of theirs is looked
/// up), else a new variant of shared names and keyword lists. Its digest and input stamp
/// are the variant's own and are not looked up.
pub(super) fn entry(variant: VariantText<'_>, target: &str) -> (Arc<IndexVariant>, Arc<str>) {
    INTERNER.with(|i| match &mut *i.borrow_mut() {
        Some(interner) => interner.entry(variant, target),
        // Outside `parse`: nothing to share with.
        None => Interner::default().entry(variant, target),
    })
}

impl Interner {
    fn entry(&mut self, variant: VariantText<'_>, target: &str) -> (Arc<IndexVariant>, Arc<str>) {
        let target = self.string(target);
        if let Some(last) = self.last_variant.as_ref().filter(|last| variant.is(last)) {
            return (Arc::clone(last), target);
        }
        let made = Arc::new(IndexVariant {
            shader: self.string(&variant.shader),
            pass: self.string(&variant.pass),
            keywords: self.list(&variant.keywords),
            revision: self.string(&variant.revision),
            digest: Arc::from(&*variant.digest),
            inputs: Arc::from(&*variant.inputs),
        });
        (Arc::clone(self.last_variant.insert(made)), target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct Entry<'a> {
        #[serde(borrow)]
        s: Text<'a>,
        #[serde(borrow)]
        k: Vec<Text<'a>>,
        #[serde(borrow)]
        d: Text<'a>,
        #[serde(borrow)]
        t: Text<'a>,
    }

    fn entries(json: &str) -> Vec<(Arc<IndexVariant>, Arc<str>)> {
        let parsed: Vec<Entry> = serde_json::from_str(json).unwrap();
        parsed
            .into_iter()
            .map(|e| {
                let variant = VariantText {
                    shader: e.s,
                    pass: Text::empty(),
                    keywords: e.k,
                    revision: Text::empty(),
                    digest: e.d,
                    inputs: Text::empty(),
                };
                entry(variant, &e.t)
            })
            .collect()
    }

    #[test]
    fn equal_strings_and_lists_of_one_parse_share_one_allocation() {
        let json = r#"[{"s":"Lit","k":["FOG","SKIN"],"d":"1","t":"spirv"},
                       {"s":"Lit","k":["FOG","SKIN"],"d":"1","t":"msl"},
                       {"s":"L\u0069t","k":["FOG","SKIN"],"d":"2","t":"spirv"},
                       {"s":"Lit","k":["FOG"],"d":"2","t":"spirv"},
                       {"s":"Lit","k":["FOG","SKIN"],"d":"1","t":"msl"}]"#;
        let e = parse(|| entries(json));
        // One variant's entries share it; its target is its own.
        assert!(Arc::ptr_eq(&e[0].0, &e[1].0));
        assert_eq!((&*e[0].1, &*e[1].1), ("spirv", "msl"));
        // An escaped equal name, a new variant of the same names.
        assert!(!Arc::ptr_eq(&e[1].0, &e[2].0));
        assert!(Arc::ptr_eq(&e[0].0.shader, &e[2].0.shader));
        assert!(Arc::ptr_eq(&e[0].0.keywords, &e[2].0.keywords));
        assert!(Arc::ptr_eq(&e[0].1, &e[2].1));
        assert!(Arc::ptr_eq(&e[0].0.keywords[0], &e[3].0.keywords[0]));
        assert_eq!(&*e[3].0.keywords, &[Arc::from("FOG")][..]);
        // Only the entry just before is shared whole; equal fields are still one string.
        assert!(!Arc::ptr_eq(&e[0].0, &e[4].0));
        assert_eq!(e[0].0, e[4].0);
        assert!(Arc::ptr_eq(&e[0].0.keywords, &e[4].0.keywords));
        // Outside a parse nothing is kept.
        let alone = entries(json);
        assert!(!Arc::ptr_eq(&alone[0].0, &alone[1].0));
        assert!(!Arc::ptr_eq(&alone[0].0.shader, &alone[2].0.shader));
        assert_eq!(alone[0].0, e[0].0);
    }
}
