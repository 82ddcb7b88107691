//! The path invariant of issue 9 (items 1-3), over arbitrary names and index paths: whatever
//! a manifest, a name or `index.json` says, every path kiln joins stays inside the output
//! directory.

use kiln::boundary::{check_name, index_path, output_file};
use kiln::key::VariantKey;
use kiln::manifest::Manifest;
use kiln::pipeline::{output_path, Index};
use proptest::prelude::*;
use std::path::{Component, Path};

/// Strings rich in what paths are made of.
fn pathish() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just("/".to_owned()),
            Just("\\".to_owned()),
            Just(".".to_owned()),
            Just("..".to_owned()),
            Just("\0".to_owned()),
            Just(":".to_owned()),
            Just("C:".to_owned()),
            Just(" ".to_owned()),
            Just("|".to_owned()),
            "[a-zA-Z_]{1,4}",
            any::<char>().prop_map(String::from),
        ],
        0..8,
    )
    .prop_map(|parts| parts.concat())
}

/// `path` is `out` followed by normal components only.
fn inside(out: &Path, path: &Path) -> bool {
    path.strip_prefix(out)
        .is_ok_and(|rest| rest.components().all(|c| matches!(c, Component::Normal(_))))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn names_accepted_by_the_validator_join_inside_out(
        shader in pathish(),
        pass in pathish(),
        keywords in proptest::collection::vec(pathish(), 0..3),
    ) {
        let out = Path::new("/project/out");
        let names_ok = check_name(&shader).is_ok()
            && check_name(&pass).is_ok()
            && keywords.iter().all(|k| check_name(k).is_ok());
        // The key and the validator agree.
        prop_assert_eq!(VariantKey::new(&shader, &pass, &keywords, 1).is_ok(), names_ok);
        if names_ok {
            let relative = output_path(&shader, &pass, &keywords, "spv");
            let path = output_file(out, &relative);
            prop_assert!(path.is_ok(), "{relative:?}: {path:?}");
            let path = path.unwrap_or_default();
            prop_assert!(inside(out, &path), "{}", path.display());
            prop_assert_eq!(path.strip_prefix(out).map(|p| p.components().count()).ok(), Some(3));
        }
    }

    #[test]
    fn index_paths_that_pass_stay_inside_out(path in pathish()) {
        let out = Path::new("/project/out");
        if let Ok(relative) = index_path(&path) {
            prop_assert!(inside(out, &out.join(&relative)), "{path:?}");
        }
        // And the reader drops every other entry.
        let json = serde_json::json!({
            "kiln_version": "x",
            "entries": [{
                "shader": "S", "pass": "P", "keywords": [], "revision": "0", "digest": "0",
                "target": "spirv", "path": path, "bytes": 0, "content_hash": "0"
            }]
        });
        let (index, warnings) = Index::from_json_checked(out, json.to_string().as_bytes());
        prop_assert_eq!(index.entries.len() + warnings.len(), 1);
        for entry in &index.entries {
            prop_assert!(inside(out, &out.join(&*entry.path)));
        }
    }

    #[test]
    fn the_manifest_accepts_only_names_that_are_single_components(
        shader in pathish(),
        pass in pathish(),
    ) {
        let text = format!(
            "[project]\ntargets = [\"spirv\"]\n\n[[shader]]\nname = {}\nsource = \"a.wgsl\"\n\n[shader.passes.{}]\nstage = \"fragment\"\nentry = \"main\"\n",
            toml_string(&shader),
            toml_string(&pass),
        );
        if let Ok(manifest) = Manifest::parse(Path::new("kiln.toml"), Path::new("/p"), &text) {
            for s in &manifest.shaders {
                prop_assert!(check_name(&s.name).is_ok(), "{:?}", s.name);
                for p in &s.passes {
                    prop_assert!(check_name(&p.name).is_ok(), "{:?}", p.name);
                    let relative = output_path(&s.name, &p.name, &[] as &[&str], "spv");
                    let path = output_file(Path::new("/p/out"), &relative);
                    prop_assert!(path.is_ok_and(|p| inside(Path::new("/p/out"), &p)));
                }
            }
        }
    }
}

/// A TOML basic string holding `s` exactly.
fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
