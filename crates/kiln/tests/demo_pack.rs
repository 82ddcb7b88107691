//! The bundled demo built as its manifest asks (`[output] layout = "both"`), read back the
//! way an engine reads it (issue 27): every variant of every target is served by its
//! target's pack through `kiln_runtime::Library` with exactly the loose file's bytes and the
//! index's digest; every permutation of each keyword set, with a keyword repeated, finds the
//! same artifact; an unknown keyword and a legal set that was not built are their errors.

use kiln::pipeline::{BuildOptions, Index, Project};
use kiln_runtime::{Library, LookupError};
use std::path::Path;

fn permutations<'a>(set: &[&'a str]) -> Vec<Vec<&'a str>> {
    if set.len() <= 1 {
        return vec![set.to_vec()];
    }
    let mut all = Vec::new();
    for (i, first) in set.iter().enumerate() {
        let mut rest = set.to_vec();
        rest.remove(i);
        for mut tail in permutations(&rest) {
            tail.insert(0, first);
            all.push(tail);
        }
    }
    all
}

#[test]
fn the_demo_pack_serves_every_variant_as_the_loose_build_wrote_it() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/demo/kiln.toml");
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("out");
    let mut project = Project::open(&BuildOptions {
        manifest: demo,
        out_dir: Some(out.clone()),
        cache_dir: Some(scratch.path().join("cache")),
        ..BuildOptions::default()
    })
    .unwrap();
    let report = project.build(&|_| {}).unwrap();
    assert_eq!(report.failed, 0, "{:?}", report.diagnostics.first());
    let targets: Vec<String> = project
        .manifest()
        .targets
        .iter()
        .map(|t| t.target().name().to_owned())
        .collect();
    assert_eq!(report.packs_written, targets.len(), "the demo asks for packs");

    let index = Index::read(&out);
    let mut checked = 0;
    for target in &targets {
        let library = Library::open(out.join(format!("{target}.kpack"))).unwrap();
        library.verify_all().unwrap();
        let entries: Vec<_> = index.entries.iter().filter(|e| *e.target == **target).collect();
        assert_eq!(library.len(), entries.len(), "{target}");
        assert_eq!(entries.len(), report.variants, "{target}");
        for e in entries {
            let loose = std::fs::read(out.join(&*e.path)).unwrap();
            let set: Vec<&str> = e.variant.keywords.iter().map(|k| &**k).collect();
            let (shader, pass) = (&*e.variant.shader, &*e.variant.pass);
            let first = library.get(shader, pass, &set, target).unwrap();
            assert_eq!(first.bytes, &loose[..], "{}", e.path);
            assert_eq!(first.digest, &*e.variant.digest, "{}", e.path);
            assert_eq!(first.keywords.to_vec(), set, "{}", e.path);
            for mut order in permutations(&set) {
                if let Some(&k) = order.first() {
                    order.push(k);
                }
                let v = library.get(shader, pass, &order, target).unwrap();
                assert_eq!(v.bytes.as_ptr(), first.bytes.as_ptr(), "{order:?}");
            }
            checked += 1;
        }
        // An unknown keyword names the declared ones; a legal set nobody built is not built.
        match library.get("Lit", "Forward", &["FOG", "FOGG"], target) {
            Err(LookupError::UnknownKeyword { keyword, declared, .. }) => {
                assert_eq!(keyword, "FOGG");
                assert!(declared.contains(&"FOG".to_owned()), "{declared:?}");
            }
            other => panic!("{other:?}"),
        }
        match library.get("Skybox", "Forward", &["CUBEMAP", "PROCEDURAL"], target) {
            Err(LookupError::NotBuilt { .. }) => {}
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(checked, report.variants * targets.len());
}
