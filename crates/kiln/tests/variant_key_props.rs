//! Property tests of `VariantKey`: order and repeats never change a key; any difference in
//! shader, pass, keyword set or revision always does.

use std::collections::BTreeSet;

use kiln::key::{KeyError, VariantKey};
use proptest::prelude::*;

fn name() -> impl Strategy<Value = String> {
    // Non-ASCII letters included: order must be by bytes, not by locale or interning order.
    "[A-Za-z_é0-9]{1,6}"
}

fn keywords() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(name(), 0..8)
}

fn pooled(pool: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop::sample::select(pool).prop_map(str::to_owned)
}

fn pooled_set() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(pooled(&["FOG", "SKIN", "Fog"]), 0..4)
}

proptest! {
    #[test]
    fn permutations_and_repeats_give_one_key_and_one_digest(
        words in keywords(),
        repeats in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
        seed in any::<u64>(),
        revision in any::<u64>(),
    ) {
        let mut shuffled = words.clone();
        if !words.is_empty() {
            for index in &repeats {
                shuffled.push(index.get(&words).clone());
            }
        }
        // A cheap deterministic shuffle driven by `seed`.
        let mut state = seed | 1;
        for i in (1..shuffled.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            shuffled.swap(i, (state % (i as u64 + 1)) as usize);
        }
        let a = VariantKey::new("Lit", "Forward", &words, revision).unwrap();
        let b = VariantKey::new("Lit", "Forward", &shuffled, revision).unwrap();
        prop_assert_eq!(a, b);
        prop_assert_eq!(a.digest(), b.digest());
        let canonical: BTreeSet<&str> = words.iter().map(String::as_str).collect();
        let text = canonical.into_iter().collect::<Vec<_>>().join(";");
        prop_assert_eq!(a.keyword_text(), text.as_str());
    }

    // Small pools, so that equal and unequal fields both come up often.
    #[test]
    fn distinct_fields_give_distinct_keys(
        shaders in (pooled(&["Lit", "Unlit"]), pooled(&["Lit", "Unlit"])),
        passes in (pooled(&["Forward", "Shadow"]), pooled(&["Forward", "Shadow"])),
        sets in (pooled_set(), pooled_set()),
        revisions in (0u64..2, 0u64..2),
    ) {
        let a = VariantKey::new(&shaders.0, &passes.0, &sets.0, revisions.0).unwrap();
        let b = VariantKey::new(&shaders.1, &passes.1, &sets.1, revisions.1).unwrap();
        let set = |words: &Vec<String>| words.iter().cloned().collect::<BTreeSet<String>>();
        let same = shaders.0 == shaders.1
            && passes.0 == passes.1
            && set(&sets.0) == set(&sets.1)
            && revisions.0 == revisions.1;
        prop_assert_eq!(a == b, same);
        prop_assert_eq!(a.digest() == b.digest(), same);
        prop_assert_eq!(a.to_string() == b.to_string(), same);
    }

    #[test]
    fn a_keyword_with_a_separator_or_whitespace_is_refused_by_name(
        prefix in name(),
        bad in prop::sample::select(vec![";", "|", " ", "\t", "\n", "\u{3000}"]),
        suffix in name(),
    ) {
        let keyword = format!("{prefix}{bad}{suffix}");
        let err = VariantKey::new("Lit", "Forward", ["FOG", keyword.as_str()], 1).unwrap_err();
        let named = matches!(&err, KeyError::InvalidKeyword { keyword: k, .. } if *k == keyword);
        prop_assert!(named, "{err:?}");
    }
}
