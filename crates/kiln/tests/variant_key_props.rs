//! Property tests of `VariantKey`: order and repeats never change a key; any difference in
//! shader, pass, keyword set or revision always does.

use std::collections::BTreeSet;

use kiln::key::{DeclaredKeywords, KeyError, VariantKey};
use kiln_runtime::pack::PackWriter;
use kiln_runtime::{Library, LookupError};
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

    /// kiln's keys and the engine's lookup share one rule: a pack written from kiln's keys
    /// finds each of them by any permutation with repeats, with kiln's canonical set and
    /// digest, and both refuse an undeclared keyword by name.
    #[test]
    fn kilns_keys_and_the_runtimes_lookup_agree(
        declared in prop::collection::btree_set(name(), 1..6),
        sets in prop::collection::vec(prop::collection::vec(any::<prop::sample::Index>(), 0..5), 1..6),
        seed in any::<u64>(),
        stranger in name(),
    ) {
        let declared: Vec<String> = declared.into_iter().collect();
        let legal = DeclaredKeywords::new("Lit", &declared).unwrap();
        let mut writer = PackWriter::new();
        writer.add_target("spirv").unwrap();
        writer.add_shader("Lit", &declared, ["Forward"]).unwrap();
        let mut keys = Vec::new();
        for set in &sets {
            let words: Vec<&str> = set.iter().map(|i| i.get(&declared).as_str()).collect();
            let key = legal.key("Forward", &words, 7).unwrap();
            if keys.iter().any(|(k, _): &(VariantKey, _)| *k == key) {
                continue;
            }
            writer
                .add_variant("Lit", "Forward", key.keywords().names(), "spirv", &key.digest(), key.keyword_text().as_bytes(), b"")
                .unwrap();
            keys.push((key, words));
        }
        let library = Library::from_bytes(writer.to_bytes().unwrap()).unwrap();
        let mut state = seed | 1;
        for (key, words) in &keys {
            let mut query = words.clone();
            query.extend(words.iter().take(2));
            for i in (1..query.len()).rev() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                query.swap(i, (state % (i as u64 + 1)) as usize);
            }
            let variant = library.get("Lit", "Forward", &query, "spirv").unwrap();
            prop_assert_eq!(variant.keywords.iter().collect::<Vec<_>>(), key.keywords().names());
            prop_assert_eq!(variant.keywords.text(), key.keyword_text());
            prop_assert_eq!(variant.digest, key.digest());
            prop_assert_eq!(variant.bytes, key.keyword_text().as_bytes());
        }
        if !declared.contains(&stranger) {
            let kiln = legal.key("Forward", [stranger.as_str()], 7).unwrap_err();
            let runtime = library.get("Lit", "Forward", &[stranger.as_str()], "spirv").unwrap_err();
            let kiln_names_it = matches!(&kiln, KeyError::UnknownKeyword { keyword, .. } if *keyword == stranger);
            let runtime_names_it = matches!(
                &runtime,
                LookupError::UnknownKeyword { keyword, declared: d, .. } if *keyword == stranger && *d == declared
            );
            prop_assert!(kiln_names_it, "{kiln:?}");
            prop_assert!(runtime_names_it, "{runtime:?}");
        }
    }
}
