//! The pack writer and reader against a from-scratch oracle, every error kind, damage
//! (truncations and single-byte corruptions), determinism and deduplication.

use std::collections::{BTreeMap, BTreeSet};

use kiln_runtime::canon::{self, NameFault};
use kiln_runtime::pack::{PackError, PackWriter, WriteError, HEADER_LEN};
use kiln_runtime::{Library, LookupError, OpenError};
use proptest::prelude::*;

/// (shader, pass, canonical keywords, target) -> (digest, bytes, reflection).
type Oracle = BTreeMap<(String, String, Vec<String>, String), (String, Vec<u8>, Vec<u8>)>;

fn digest_of(shader: &str, pass: &str, keywords: &[String], target: &str) -> String {
    canon::variant_digest(
        shader,
        pass,
        &canon::keyword_text(keywords),
        target.len() as u64,
    )
}

/// A small real-looking pack: two shaders, two targets, shared and distinct artifacts.
fn sample_writer() -> PackWriter {
    let mut w = PackWriter::new();
    w.add_target("spirv").unwrap();
    w.add_target("msl").unwrap();
    w.add_shader("Lit", ["SKIN", "FOG", "SHADOWS"], ["Forward", "Depth"])
        .unwrap();
    w.add_shader("Unlit", ["ALPHA"], ["Forward"]).unwrap();
    let sets: [&[&str]; 4] = [&[], &["FOG"], &["SKIN", "FOG"], &["FOG", "SHADOWS", "SKIN"]];
    for (n, set) in sets.iter().enumerate() {
        for pass in ["Forward", "Depth"] {
            for target in ["spirv", "msl"] {
                let keywords = canon::canonicalize(set.iter().map(|k| k.to_string()).collect());
                let bytes = format!("{target}:{pass}:{n}").repeat(3 + n).into_bytes();
                w.add_variant(
                    "Lit",
                    pass,
                    set,
                    target,
                    &digest_of("Lit", pass, &keywords, target),
                    &bytes,
                    &reflection_of(pass, n),
                )
                .unwrap();
            }
        }
    }
    // Identical bytes for both Unlit variants: stored once.
    for set in [&[][..], &["ALPHA"][..]] {
        w.add_variant(
            "Unlit",
            "Forward",
            set,
            "spirv",
            "0123456789ab",
            b"same bytes",
            b"",
        )
        .unwrap();
    }
    w
}

/// The sample's reflection blobs: one per pass and keyword-set parity, shared by both
/// targets (so stored once), of lengths that need padding.
fn reflection_of(pass: &str, n: usize) -> Vec<u8> {
    format!("{{\"pass\":\"{pass}\",\"bindings\":{}}}", n % 2).into_bytes()
}

fn sample() -> Vec<u8> {
    sample_writer().to_bytes().unwrap()
}

#[test]
fn permutations_and_repeats_find_the_same_variant() {
    let lib = Library::from_bytes(sample()).unwrap();
    let set = ["FOG", "SHADOWS", "SKIN"];
    let want = lib.get("Lit", "Forward", &set, "spirv").unwrap();
    assert_eq!(want.keywords.to_vec(), set);
    assert_eq!(want.keywords.text(), "FOG;SHADOWS;SKIN");
    let perms: [[usize; 3]; 6] = [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ];
    for p in perms {
        let query: Vec<&str> = p.iter().map(|&i| set[i]).collect();
        for repeat in 0..3 {
            let mut q = query.clone();
            q.insert(repeat % q.len(), query[repeat]);
            q.push(query[0]);
            let got = lib.get("Lit", "Forward", &q, "spirv").unwrap();
            assert_eq!(got.bytes, want.bytes, "{q:?}");
            assert_eq!(got.digest, want.digest, "{q:?}");
            assert_eq!(got.keywords.to_vec(), set, "{q:?}");
        }
    }
    // More keywords than the stack buffer: the same rule on the heap.
    let many: Vec<&str> = set.iter().cycle().take(40).copied().collect();
    assert_eq!(
        lib.get("Lit", "Forward", &many, "spirv").unwrap().bytes,
        want.bytes
    );
}

#[test]
fn every_error_kind() {
    let lib = Library::from_bytes(sample()).unwrap();
    assert_eq!(
        lib.get("Lit", "Forward", &[], "dxil").unwrap_err(),
        LookupError::UnknownTarget {
            target: "dxil".into(),
            targets: vec!["msl".into(), "spirv".into()],
        }
    );
    assert_eq!(
        lib.get("Lot", "Forward", &[], "spirv").unwrap_err(),
        LookupError::UnknownShader {
            shader: "Lot".into()
        }
    );
    assert_eq!(
        lib.get("Lit", "Shadow", &[], "spirv").unwrap_err(),
        LookupError::UnknownPass {
            shader: "Lit".into(),
            pass: "Shadow".into(),
            passes: vec!["Depth".into(), "Forward".into()],
        }
    );
    let err = lib
        .get("Lit", "Forward", &["FOG", "RAIN"], "spirv")
        .unwrap_err();
    assert_eq!(
        err,
        LookupError::UnknownKeyword {
            shader: "Lit".into(),
            pass: "Forward".into(),
            keyword: "RAIN".into(),
            declared: vec!["FOG".into(), "SHADOWS".into(), "SKIN".into()],
        }
    );
    assert!(
        err.to_string().contains("`RAIN`") && err.to_string().contains("FOG;SHADOWS;SKIN"),
        "{err}"
    );
    // Two unknown keywords: the first given is named (as kiln's `DeclaredKeywords::key`).
    assert!(matches!(
        lib.get("Lit", "Forward", &["ZZZ", "FOG", "AAA"], "spirv"),
        Err(LookupError::UnknownKeyword { keyword, .. }) if keyword == "ZZZ"
    ));
    // A keyword another shader declares is still unknown to this one.
    assert!(matches!(
        lib.get("Lit", "Forward", &["ALPHA"], "spirv"),
        Err(LookupError::UnknownKeyword { .. })
    ));
    assert_eq!(
        lib.get("Lit", "Forward", &["FO G"], "spirv").unwrap_err(),
        LookupError::InvalidKeyword {
            shader: "Lit".into(),
            pass: "Forward".into(),
            keyword: "FO G".into(),
            fault: NameFault::Whitespace(' '),
        }
    );
    assert_eq!(
        lib.get("Lit", "Forward", &["SHADOWS", "FOG", "FOG"], "spirv")
            .unwrap_err(),
        LookupError::NotBuilt {
            shader: "Lit".into(),
            pass: "Forward".into(),
            keywords: "FOG;SHADOWS".into(),
            target: "spirv".into(),
        }
    );
    // Built for spirv only.
    assert!(matches!(
        lib.get("Unlit", "Forward", &["ALPHA"], "msl"),
        Err(LookupError::NotBuilt { .. })
    ));
    assert!(matches!(
        lib.variants("Nope"),
        Err(LookupError::UnknownShader { .. })
    ));
}

#[test]
fn listing_and_iteration() {
    let lib = Library::from_bytes(sample()).unwrap();
    assert_eq!(lib.len(), 4 * 2 * 2 + 2);
    assert_eq!(lib.shaders().collect::<Vec<_>>(), ["Lit", "Unlit"]);
    assert_eq!(lib.targets().collect::<Vec<_>>(), ["msl", "spirv"]);
    assert_eq!(
        lib.declared_keywords("Lit").unwrap().collect::<Vec<_>>(),
        ["FOG", "SHADOWS", "SKIN"]
    );
    assert_eq!(
        lib.passes("Lit").unwrap().collect::<Vec<_>>(),
        ["Depth", "Forward"]
    );
    let unlit: Vec<_> = lib.variants("Unlit").unwrap().map(Result::unwrap).collect();
    assert_eq!(unlit.len(), 2);
    assert!(unlit[0].keywords.is_empty());
    assert_eq!(unlit[1].keywords.to_vec(), ["ALPHA"]);
    assert_eq!(unlit[0].bytes, b"same bytes");
    assert!(unlit.iter().all(|v| v.reflection.is_empty()));
    lib.verify_all().unwrap();
}

#[test]
fn writer_refuses_what_the_reader_would() {
    let mut w = PackWriter::new();
    w.add_target("spirv").unwrap();
    w.add_shader("Lit", ["FOG"], ["Forward"]).unwrap();
    assert!(matches!(
        w.add_shader("Lit", ["FOG"], ["Forward"]),
        Err(WriteError::DuplicateShader(_))
    ));
    assert!(matches!(
        w.add_shader("Bad Name", ["FOG"], ["Forward"]),
        Err(WriteError::InvalidName { what: "shader", .. })
    ));
    assert!(matches!(
        w.add_target("a;b"),
        Err(WriteError::InvalidName { what: "target", .. })
    ));
    let add = |w: &mut PackWriter, s: &str, p: &str, k: &[&str], t: &str, d: &str| {
        w.add_variant(s, p, k, t, d, b"x", b"")
    };
    let d = "0123456789ab";
    assert!(matches!(
        add(&mut w, "Unlit", "Forward", &[], "spirv", d),
        Err(WriteError::UnknownShader(_))
    ));
    assert!(matches!(
        add(&mut w, "Lit", "Depth", &[], "spirv", d),
        Err(WriteError::UnknownPass { .. })
    ));
    assert!(matches!(
        add(&mut w, "Lit", "Forward", &["RAIN"], "spirv", d),
        Err(WriteError::UnknownKeyword { .. })
    ));
    assert!(matches!(
        add(&mut w, "Lit", "Forward", &[], "msl", d),
        Err(WriteError::UnknownTarget(_))
    ));
    assert!(matches!(
        add(&mut w, "Lit", "Forward", &[], "spirv", "0123456789AB"),
        Err(WriteError::BadDigest(_))
    ));
    add(&mut w, "Lit", "Forward", &["FOG", "FOG"], "spirv", d).unwrap();
    assert!(matches!(
        add(&mut w, "Lit", "Forward", &["FOG"], "spirv", d),
        Err(WriteError::DuplicateVariant(_))
    ));
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = sample();
    for len in 0..bytes.len() {
        let err = Library::from_bytes(bytes[..len].to_vec()).unwrap_err();
        if len >= HEADER_LEN {
            assert!(matches!(err, PackError::Truncated { .. }), "{len}: {err}");
        }
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(Library::from_bytes(longer).is_err());
}

/// Every single-byte change is caught: at open (header, tables, padding), or for the data
/// section by `verify_all` and by `get` on the variants whose artifact it damaged.
#[test]
fn every_single_byte_corruption_is_an_error() {
    let bytes = sample();
    let good = Library::from_bytes(bytes.clone()).unwrap();
    let queries: Vec<(String, String, Vec<String>, String)> = good
        .shaders()
        .flat_map(|s| good.variants(s).unwrap())
        .map(Result::unwrap)
        .map(|v| {
            (
                v.shader.to_owned(),
                v.pass.to_owned(),
                v.keywords.to_vec(),
                v.target.to_owned(),
            )
        })
        .collect();
    for at in 0..bytes.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut bad = bytes.clone();
            bad[at] ^= flip;
            let Ok(lib) = Library::from_bytes(bad) else {
                continue;
            };
            assert!(
                lib.verify_all().is_err(),
                "byte {at} ^ {flip:#x} undetected"
            );
            // Lookups never panic; a damaged artifact is an error, never wrong bytes.
            for (s, p, k, t) in &queries {
                let k: Vec<&str> = k.iter().map(String::as_str).collect();
                match lib.get(s, p, &k, t) {
                    Ok(v) => assert_eq!(v.bytes, good.get(s, p, &k, t).unwrap().bytes),
                    Err(e) => assert!(matches!(e, LookupError::CorruptArtifact { .. }), "{e}"),
                }
            }
        }
    }
}

#[test]
fn foreign_and_future_files_are_typed_errors() {
    assert_eq!(
        Library::from_bytes(b"GIF89a....".to_vec()).unwrap_err(),
        PackError::BadMagic
    );
    let mut future = sample();
    future[8] = 2;
    assert_eq!(
        Library::from_bytes(future).unwrap_err(),
        PackError::UnsupportedVersion(2)
    );
}

#[test]
fn the_writer_is_deterministic_and_atomic() {
    let a = sample();
    // The same variants added in another order.
    let mut w = PackWriter::new();
    w.add_shader("Unlit", ["ALPHA"], ["Forward"]).unwrap();
    w.add_target("msl").unwrap();
    w.add_shader("Lit", ["FOG", "SHADOWS", "SKIN"], ["Depth", "Forward"])
        .unwrap();
    w.add_target("spirv").unwrap();
    let src = Library::from_bytes(a.clone()).unwrap();
    let mut all: Vec<_> = src
        .shaders()
        .flat_map(|s| src.variants(s).unwrap())
        .map(Result::unwrap)
        .collect();
    all.reverse();
    for v in all {
        let mut k: Vec<&str> = v.keywords.iter().collect();
        k.reverse();
        w.add_variant(
            v.shader,
            v.pass,
            &k,
            v.target,
            v.digest,
            v.bytes,
            v.reflection,
        )
        .unwrap();
    }
    assert_eq!(w.to_bytes().unwrap(), a);

    let dir = std::env::temp_dir().join(format!("kiln-runtime-pack-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("lib.kpack");
    sample_writer().write(&path).unwrap();
    let first = std::fs::read(&path).unwrap();
    let lib = Library::open(&path).unwrap();
    sample_writer().write(&path).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), first);
    assert_eq!(first, a);
    // The old mapping still reads the old (here: equal) bytes after the rename.
    lib.verify_all().unwrap();
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["lib.kpack"], "temporaries left behind");
    std::fs::write(&path, b"KILNPACK").unwrap();
    assert!(matches!(
        Library::open(&path),
        Err(OpenError::Corrupt { .. })
    ));
    assert!(matches!(
        Library::open(dir.join("missing")),
        Err(OpenError::Io { .. })
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn identical_artifacts_are_stored_once() {
    let blob = vec![7u8; 4096];
    let other = vec![9u8; 4096];
    let pack = |second: Option<&[u8]>| {
        let mut w = PackWriter::new();
        w.add_target("spirv").unwrap();
        w.add_shader("Lit", ["FOG"], ["Forward"]).unwrap();
        w.add_variant(
            "Lit",
            "Forward",
            &[] as &[&str],
            "spirv",
            "0123456789ab",
            &blob,
            b"",
        )
        .unwrap();
        if let Some(second) = second {
            w.add_variant(
                "Lit",
                "Forward",
                &["FOG"],
                "spirv",
                "0123456789ab",
                second,
                b"",
            )
            .unwrap();
        }
        w.to_bytes().unwrap()
    };
    let one = pack(None).len();
    let same = pack(Some(&blob));
    let different = pack(Some(&other)).len();
    // A second entry costs its table rows, not another copy of the bytes.
    assert!(same.len() < one + 256, "{} vs {one}", same.len());
    assert!(different >= one + 4096, "{different} vs {one}");
    let lib = Library::from_bytes(same).unwrap();
    let a = lib.get("Lit", "Forward", &[], "spirv").unwrap().bytes;
    let b = lib.get("Lit", "Forward", &["FOG"], "spirv").unwrap().bytes;
    assert_eq!(a.as_ptr(), b.as_ptr());
}

#[test]
fn reflection_blobs_round_trip_and_are_stored_once() {
    let lib = Library::from_bytes(sample()).unwrap();
    for pass in ["Forward", "Depth"] {
        let a = lib.get("Lit", pass, &["FOG"], "spirv").unwrap().reflection;
        let b = lib.get("Lit", pass, &["FOG"], "msl").unwrap().reflection;
        let c = lib.get("Lit", pass, &[], "spirv").unwrap().reflection;
        let d = lib
            .get("Lit", pass, &["SHADOWS", "FOG", "SKIN"], "msl")
            .unwrap()
            .reflection;
        assert_eq!(a, reflection_of(pass, 1));
        assert_eq!(c, reflection_of(pass, 0));
        // The same blob for both targets and for both sets of the same parity: one copy.
        assert_eq!(a.as_ptr(), b.as_ptr());
        assert_eq!(a.as_ptr(), d.as_ptr());
        assert_ne!(a.as_ptr(), c.as_ptr());
    }
    // Variants given no reflection read back an empty blob.
    assert!(lib
        .get("Unlit", "Forward", &["ALPHA"], "spirv")
        .unwrap()
        .reflection
        .is_empty());

    // A pack's size grows by each distinct blob once, not by the variants using it.
    let pack = |blobs: &[&[u8]]| {
        let mut w = PackWriter::new();
        w.add_target("spirv").unwrap();
        w.add_shader("Lit", ["A", "B", "C"], ["Forward"]).unwrap();
        let sets: [&[&str]; 3] = [&[], &["A"], &["B"]];
        for (set, blob) in sets.iter().zip(blobs) {
            w.add_variant("Lit", "Forward", set, "spirv", "0123456789ab", b"x", blob)
                .unwrap();
        }
        w.to_bytes().unwrap()
    };
    let blob = vec![5u8; 1000];
    let other = vec![6u8; 1000];
    let none = pack(&[b"", b"", b""]).len();
    let shared = pack(&[&blob, &blob, &blob]);
    let distinct = pack(&[&blob, &other, &blob]).len();
    assert!(
        shared.len() < none + 1000 + 16,
        "{} vs {none}",
        shared.len()
    );
    assert!(distinct >= none + 2000, "{distinct} vs {none}");
    let lib = Library::from_bytes(shared).unwrap();
    assert_eq!(
        lib.get("Lit", "Forward", &["B"], "spirv")
            .unwrap()
            .reflection,
        blob
    );
    lib.verify_all().unwrap();
}

/// Where section `i` starts, from its header row.
fn section_at(bytes: &[u8], i: usize) -> usize {
    let row = 32 + i * 48;
    u64::from_le_bytes(bytes[row..row + 8].try_into().unwrap()) as usize
}

/// A shader's entries are checked on its first use: damage there opens, then every lookup
/// of that shader is an error (never a wrong variant), other shaders still read, and
/// `verify_all` refuses the pack.
#[test]
fn damaged_entries_are_refused_on_first_use() {
    let bytes = sample();
    let good = Library::from_bytes(bytes.clone()).unwrap();
    // The first entry's pass id (ENTRIES is section 5; Lit's entries come first).
    let mut bad = bytes.clone();
    bad[section_at(&bytes, 5) + 4] ^= 0x01;
    let lib = Library::from_bytes(bad.clone()).unwrap();
    for _ in 0..2 {
        let err = lib
            .get("Lit", "Forward", &["SKIN", "FOG"], "spirv")
            .unwrap_err();
        assert!(
            matches!(
                &err,
                LookupError::CorruptArtifact {
                    source: PackError::SectionChecksum("entries"),
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("Lit/Forward[FOG;SKIN]"), "{err}");
    }
    assert!(lib.variants("Lit").unwrap().all(|v| v.is_err()));
    assert_eq!(
        lib.get("Unlit", "Forward", &["ALPHA"], "spirv")
            .unwrap()
            .bytes,
        good.get("Unlit", "Forward", &["ALPHA"], "spirv")
            .unwrap()
            .bytes
    );
    assert!(lib.verify_all().is_err());
    // Behind a recomputed checksum, the entry's own checks refuse it on first use.
    kiln_runtime::pack::reseal_for_fuzzing(&mut bad);
    let lib = Library::from_bytes(bad).unwrap();
    assert!(matches!(
        lib.get("Lit", "Depth", &[], "msl"),
        Err(LookupError::CorruptArtifact {
            source: PackError::Malformed { .. },
            ..
        })
    ));
    assert!(matches!(lib.verify_all(), Err(PackError::Malformed { .. })));
}

/// Many shaders with similar names, many targets and many declared keywords: the string
/// table and the long-list paths find every name, and only those.
#[test]
fn many_similar_names_are_all_found() {
    let keywords: Vec<String> = (0..20).map(|k| format!("KW_{k:02}")).collect();
    let targets: Vec<String> = (0..12).map(|t| format!("target{t}")).collect();
    let mut w = PackWriter::new();
    for t in &targets {
        w.add_target(t).unwrap();
    }
    let shaders: Vec<String> = (0..1500).map(|s| format!("Shader{s:05}")).collect();
    for (n, s) in shaders.iter().enumerate() {
        w.add_shader(s, &keywords, ["Forward"]).unwrap();
        let set = [&keywords[n % 20], &keywords[(n * 7) % 20]];
        let target = &targets[n % 12];
        w.add_variant(
            s,
            "Forward",
            &set,
            target,
            "0123456789ab",
            s.as_bytes(),
            b"",
        )
        .unwrap();
    }
    let lib = Library::from_bytes(w.to_bytes().unwrap()).unwrap();
    for (n, s) in shaders.iter().enumerate() {
        let set = [keywords[(n * 7) % 20].as_str(), keywords[n % 20].as_str()];
        let v = lib.get(s, "Forward", &set, &targets[n % 12]).unwrap();
        assert_eq!(v.bytes, s.as_bytes());
        assert!(matches!(
            lib.get(s, "Forward", &set, &targets[(n + 1) % 12]),
            Err(LookupError::NotBuilt { .. })
        ));
    }
    for missing in [
        "Shader01500",
        "Shader0000",
        "shader00000",
        "Shader000000",
        "",
    ] {
        assert!(
            matches!(
                lib.get(missing, "Forward", &[], "target0"),
                Err(LookupError::UnknownShader { .. })
            ),
            "{missing}"
        );
    }
    assert!(matches!(
        lib.get("Shader00000", "Forward", &["KW_20"], "target0"),
        Err(LookupError::UnknownKeyword { .. })
    ));
    assert!(matches!(
        lib.get("Shader00000", "Forward", &[], "target12"),
        Err(LookupError::UnknownTarget { .. })
    ));
    lib.verify_all().unwrap();
}

/// Past 64 declared keywords a shader is searched by keyword ids rather than a mask: the same
/// answers either way.
#[test]
fn shaders_with_many_declared_keywords() {
    for declared in [63usize, 64, 65, 100] {
        let keywords: Vec<String> = (0..declared).map(|k| format!("K{k:03}")).collect();
        let mut w = PackWriter::new();
        w.add_target("spirv").unwrap();
        w.add_shader("Big", &keywords, ["Forward"]).unwrap();
        let sets: Vec<Vec<&str>> = vec![
            vec![],
            vec![&keywords[declared - 1]],
            vec![&keywords[0], &keywords[declared - 1], &keywords[40]],
            vec![
                &keywords[1],
                &keywords[2],
                &keywords[3],
                &keywords[63.min(declared - 1)],
            ],
        ];
        for (n, set) in sets.iter().enumerate() {
            let bytes = vec![n as u8; 10 + n];
            w.add_variant("Big", "Forward", set, "spirv", "0123456789ab", &bytes, b"")
                .unwrap();
        }
        let lib = Library::from_bytes(w.to_bytes().unwrap()).unwrap();
        for (n, set) in sets.iter().enumerate() {
            let mut query: Vec<&str> = set.iter().rev().copied().collect();
            query.extend(set.first());
            let v = lib.get("Big", "Forward", &query, "spirv").unwrap();
            assert_eq!(v.bytes, vec![n as u8; 10 + n], "{declared}: {query:?}");
            assert_eq!(v.keywords.to_vec(), canon::canonicalize(set.clone()));
        }
        assert_eq!(
            lib.get("Big", "Forward", &[&keywords[5], &keywords[4]], "spirv")
                .unwrap_err(),
            LookupError::NotBuilt {
                shader: "Big".into(),
                pass: "Forward".into(),
                keywords: format!("{};{}", keywords[4], keywords[5]),
                target: "spirv".into(),
            }
        );
        assert!(matches!(
            lib.get("Big", "Forward", &[&keywords[0], "NOPE"], "spirv"),
            Err(LookupError::UnknownKeyword { keyword, .. }) if keyword == "NOPE"
        ));
        lib.verify_all().unwrap();
    }
}

#[test]
fn open_dir_finds_the_target_pack() {
    assert_eq!(kiln_runtime::pack_file_name("spirv"), "spirv.kpack");
    assert_eq!(kiln_runtime::PACK_EXTENSION, "kpack");
    let dir = std::env::temp_dir().join(format!("kiln-runtime-dir-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    sample_writer()
        .write(&dir.join(kiln_runtime::pack_file_name("spirv")))
        .unwrap();
    let lib = Library::open_dir(&dir, "spirv").unwrap();
    assert_eq!(lib.len(), 4 * 2 * 2 + 2);
    let err = Library::open_dir(&dir, "dxil").unwrap_err();
    assert!(
        matches!(&err, OpenError::NoPack { target, .. } if target == "dxil"),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("dxil.kpack") && text.contains("layout = \"both\""),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_empty_pack_is_valid() {
    let lib = Library::from_bytes(PackWriter::new().to_bytes().unwrap()).unwrap();
    assert!(lib.is_empty());
    assert!(matches!(
        lib.get("Lit", "Forward", &[], "spirv"),
        Err(LookupError::UnknownTarget { .. })
    ));
}

/// A random pack description: shaders with declared keywords and passes, targets, and the
/// variants built (keyword sets as chosen, possibly repeated and unsorted).
#[derive(Debug, Clone)]
struct Spec {
    shaders: Vec<(String, Vec<String>, Vec<String>)>,
    targets: Vec<String>,
    variants: Vec<(usize, usize, Vec<usize>, usize, usize)>,
}

fn spec() -> impl Strategy<Value = Spec> {
    let name = "[A-Za-z_][A-Za-z0-9_]{0,4}";
    let shader = (
        name,
        prop::collection::btree_set(name, 0..6),
        prop::collection::btree_set(name, 1..3),
    )
        .prop_map(|(s, k, p)| (s, k.into_iter().collect(), p.into_iter().collect()));
    (
        prop::collection::btree_map(name, shader, 1..4),
        prop::collection::btree_set("[a-z]{1,5}", 1..3),
        prop::collection::vec(
            (
                any::<usize>(),
                any::<usize>(),
                prop::collection::vec(any::<usize>(), 0..6),
                any::<usize>(),
                0usize..5,
            ),
            0..40,
        ),
    )
        .prop_map(|(shaders, targets, variants)| Spec {
            shaders: shaders.into_values().collect(),
            targets: targets.into_iter().collect(),
            variants,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random packs read back exactly as a BTreeMap built from scratch says, through `get`
    /// (with shuffled, repeated keywords) and through iteration.
    #[test]
    fn random_packs_round_trip(spec in spec(), seed in any::<u64>()) {
        // Shader names must be distinct (the map's keys were, the tuple's first field not).
        let mut seen = BTreeSet::new();
        let shaders: Vec<_> = spec.shaders.iter().filter(|s| seen.insert(s.0.clone())).collect();
        let mut w = PackWriter::new();
        for t in &spec.targets {
            w.add_target(t).unwrap();
        }
        for (s, k, p) in &shaders {
            w.add_shader(s, k, p).unwrap();
        }
        let mut oracle = Oracle::new();
        for (si, pi, ks, ti, blob) in &spec.variants {
            let (s, declared, passes) = shaders[si % shaders.len()];
            let p = &passes[pi % passes.len()];
            let t = &spec.targets[ti % spec.targets.len()];
            let chosen: Vec<&String> = if declared.is_empty() {
                Vec::new()
            } else {
                ks.iter().map(|k| &declared[k % declared.len()]).collect()
            };
            let canonical: Vec<String> =
                chosen.iter().map(|k| k.to_string()).collect::<BTreeSet<_>>().into_iter().collect();
            let key = (s.clone(), p.clone(), canonical.clone(), t.clone());
            let bytes = vec![*blob as u8; blob * 3];
            // Reflection: empty for blob 0, else one of a few blobs (shared, of odd lengths).
            let reflection = vec![b'r'; (blob % 3) * 5];
            let digest = digest_of(s, p, &canonical, t);
            let result = w.add_variant(s, p, &chosen, t, &digest, &bytes, &reflection);
            match oracle.entry(key) {
                std::collections::btree_map::Entry::Occupied(_) => {
                    prop_assert!(matches!(result, Err(WriteError::DuplicateVariant(_))));
                }
                std::collections::btree_map::Entry::Vacant(slot) => {
                    result.unwrap();
                    slot.insert((digest, bytes, reflection));
                }
            }
        }
        let bytes = w.to_bytes().unwrap();
        prop_assert_eq!(&w.to_bytes().unwrap(), &bytes);
        let lib = Library::from_bytes(bytes).unwrap();
        prop_assert_eq!(lib.len(), oracle.len());
        let mut rng = seed;
        for ((s, p, k, t), (digest, data, reflection)) in &oracle {
            let mut query: Vec<&str> = k.iter().map(String::as_str).collect();
            if let Some(&first) = query.first() {
                query.push(first);
            }
            for i in (1..query.len()).rev() {
                rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                query.swap(i, (rng >> 33) as usize % (i + 1));
            }
            let v = lib.get(s, p, &query, t).unwrap();
            prop_assert_eq!(v.bytes, &data[..]);
            prop_assert_eq!(v.reflection, &reflection[..]);
            prop_assert_eq!(v.digest, digest.as_str());
            prop_assert_eq!(v.keywords.to_vec(), k.clone());
        }
        // Iteration: each shader's variants in the oracle's order.
        for (s, declared, passes) in &shaders {
            let got: Vec<_> = lib
                .variants(s)
                .unwrap()
                .map(|v| {
                    let v = v.unwrap();
                    (v.shader.to_owned(), v.pass.to_owned(), v.keywords.to_vec(), v.target.to_owned())
                })
                .collect();
            let want: Vec<_> = oracle.keys().filter(|key| &key.0 == s).cloned().collect();
            prop_assert_eq!(got, want);
            // Every legal set the oracle lacks is NotBuilt (sets of up to 2 keywords).
            for p in passes {
                for t in &spec.targets {
                    for a in 0..=declared.len() {
                        for b in a..=declared.len() {
                            let set: Vec<String> = [a, b]
                                .iter()
                                .filter_map(|&i| declared.get(i).cloned())
                                .collect::<BTreeSet<_>>()
                                .into_iter()
                                .collect();
                            let key = (s.clone(), p.clone(), set.clone(), t.clone());
                            let q: Vec<&str> = set.iter().map(String::as_str).collect();
                            let found = lib.get(s, p, &q, t);
                            prop_assert_eq!(found.is_ok(), oracle.contains_key(&key));
                            if !oracle.contains_key(&key) {
                                let is_not_built = matches!(found, Err(LookupError::NotBuilt { .. }));
                                prop_assert!(is_not_built);
                            }
                        }
                    }
                }
            }
        }
        lib.verify_all().unwrap();
    }
}

/// Reads everything a pack offers, checking what must hold of any pack that opened: nothing
/// panics, iteration and lookup agree, keyword sets are canonical, digests well-formed.
fn exercise(lib: &Library) {
    let _ = lib.verify_all();
    let targets: Vec<&str> = lib.targets().collect();
    for shader in lib.shaders() {
        let declared: Vec<&str> = lib.declared_keywords(shader).unwrap().collect();
        assert!(canon::is_canonical(&declared));
        let _ = lib.passes(shader).unwrap().count();
        for variant in lib.variants(shader).unwrap() {
            let Ok(variant) = variant else { continue };
            let keywords: Vec<&str> = variant.keywords.iter().collect();
            assert!(canon::is_canonical(&keywords));
            assert!(canon::is_digest(variant.digest.as_bytes()));
            assert!(targets.contains(&variant.target));
            let mut query = keywords.clone();
            query.reverse();
            query.extend(keywords.first());
            let found = lib
                .get(variant.shader, variant.pass, &query, variant.target)
                .unwrap();
            assert_eq!(found.bytes, variant.bytes);
            assert_eq!(found.digest, variant.digest);
        }
        let _ = lib.get(shader, "Forward", &["FOG", "NOPE"], "spirv");
    }
}

/// Damage behind intact checksums: every single-byte change of the tables, checksums
/// recomputed, reaches the table checks; a pack that still opens reads consistently.
#[test]
fn resealed_table_corruptions_are_errors_or_consistent_packs() {
    let bytes = sample();
    exercise(&Library::from_bytes(bytes.clone()).unwrap());
    // Where the data section starts (its header row's offset field): tables lie before it.
    let data_row = 32 + 8 * 48;
    let data_at = u64::from_le_bytes(bytes[data_row..data_row + 8].try_into().unwrap()) as usize;
    let (mut opened, mut refused) = (0, 0);
    for at in 0..bytes.len() {
        let in_tables = (HEADER_LEN..data_at).contains(&at);
        for flip in [0x01u8, 0x02, 0x10, 0x80, 0xff] {
            let mut bad = bytes.clone();
            bad[at] ^= flip;
            kiln_runtime::pack::reseal_for_fuzzing(&mut bad);
            match Library::from_bytes(bad) {
                // A shader's entries and an artifact's record are checked on first use:
                // damage there is refused by `verify_all` (and by lookups, see `exercise`).
                Ok(lib) if lib.verify_all().is_ok() => {
                    opened += usize::from(in_tables);
                    exercise(&lib);
                }
                Ok(lib) => {
                    refused += usize::from(in_tables);
                    exercise(&lib);
                }
                Err(_) => refused += usize::from(in_tables),
            }
        }
    }
    // Most damage to the tables is refused by the table checks themselves.
    assert!(refused > opened, "{refused} refused, {opened} opened");
}

/// Seeds for the `pack_reader` fuzz target: the sample pack, raw (first byte 0) and to be
/// resealed (first byte 1). From the repository root (tests run in the crate's directory, so
/// give an absolute path): `KILN_PACK_SEED_DIR=$PWD/fuzz/corpus/pack_reader cargo test -p
/// kiln-runtime --test pack -- --ignored write_fuzz_seeds`
#[test]
#[ignore = "writes fuzz seeds where KILN_PACK_SEED_DIR says"]
fn write_fuzz_seeds() {
    let dir = std::env::var_os("KILN_PACK_SEED_DIR").expect("KILN_PACK_SEED_DIR");
    let dir = std::path::Path::new(&dir);
    std::fs::create_dir_all(dir).unwrap();
    for mode in [0u8, 1] {
        let mut seed = vec![mode];
        seed.extend(sample());
        std::fs::write(dir.join(format!("sample-{mode}")), seed).unwrap();
    }
}

#[test]
fn a_library_is_shared_between_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<Library>();
    let lib = std::sync::Arc::new(Library::from_bytes(sample()).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let lib = lib.clone();
            std::thread::spawn(move || {
                lib.get("Lit", "Depth", &["SKIN", "FOG"], "msl")
                    .unwrap()
                    .bytes
                    .to_vec()
            })
        })
        .collect();
    let want = lib
        .get("Lit", "Depth", &["FOG", "SKIN"], "msl")
        .unwrap()
        .bytes;
    for thread in threads {
        assert_eq!(thread.join().unwrap(), want);
    }
}

#[test]
fn artifacts_are_found_by_their_hash_and_a_damaged_one_is_an_error() {
    let bytes = sample_writer().to_bytes().unwrap();
    let library = Library::from_bytes(bytes.clone()).unwrap();
    let mut found = 0;
    for shader in library.shaders() {
        for variant in library.variants(shader).unwrap() {
            let variant = variant.unwrap();
            let hash = *blake3::hash(variant.bytes).as_bytes();
            let by_hash = library.artifact_by_hash(&hash).unwrap().unwrap();
            assert_eq!(by_hash.as_ptr(), variant.bytes.as_ptr());
            found += 1;
        }
    }
    assert!(found > 0);
    assert_eq!(library.artifact_by_hash(&[0x5a; 32]).unwrap(), None);

    // One byte of an artifact flipped: the lookup by hash refuses it.
    let victim = b"spirv:Depth:3spirv:Depth:3spirv:Depth:3spirv:Depth:3spirv:Depth:3spirv:Depth:3";
    let at = bytes
        .windows(victim.len())
        .position(|w| w == victim)
        .expect("the sample's artifact is in the file");
    let mut damaged = bytes;
    damaged[at] ^= 1;
    let library = Library::from_bytes(damaged).unwrap();
    let hash = *blake3::hash(victim).as_bytes();
    assert!(library.artifact_by_hash(&hash).is_err());
}
