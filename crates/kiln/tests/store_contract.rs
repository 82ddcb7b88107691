//! The `ArtifactStore` contract, checked on every implementation; namespaces and content keys.

use std::sync::Arc;

use kiln::store::{
    ArtifactStore, ContentKey, LocalStore, Lookup, MemoryStore, Namespace, KILN_VERSION,
};

fn key(i: u32) -> ContentKey {
    ContentKey::hash(format!("contract {i}").as_bytes())
}

/// What every store must do, seen only through the trait.
fn check_contract(store: &dyn ArtifactStore) {
    let spirv = Namespace::new("spirv", "naga 30.0.0");
    let hlsl = Namespace::new("hlsl", "naga 30.0.0").with_option("shader_model", "6.0");
    assert_eq!(store.load(&spirv, &key(1)).unwrap(), Lookup::Miss);

    store.save(&spirv, &key(1), b"spirv one").unwrap();
    store.save(&spirv, &key(2), b"").unwrap();
    assert_eq!(
        store.load(&spirv, &key(1)).unwrap(),
        Lookup::Hit(b"spirv one".to_vec())
    );
    assert_eq!(
        store.load(&spirv, &key(2)).unwrap(),
        Lookup::Hit(Vec::new())
    );
    assert_eq!(store.load(&spirv, &key(3)).unwrap(), Lookup::Miss);
    assert_eq!(store.load(&hlsl, &key(1)).unwrap(), Lookup::Miss);

    store.save(&hlsl, &key(1), b"hlsl one").unwrap();
    assert_eq!(
        store.load(&hlsl, &key(1)).unwrap(),
        Lookup::Hit(b"hlsl one".to_vec())
    );
    assert_eq!(
        store.load(&spirv, &key(1)).unwrap(),
        Lookup::Hit(b"spirv one".to_vec())
    );

    // Saving the same content again (another builder finishing the same variant) is fine.
    store.save(&spirv, &key(1), b"spirv one").unwrap();
    assert_eq!(
        store.load(&spirv, &key(1)).unwrap(),
        Lookup::Hit(b"spirv one".to_vec())
    );
}

#[test]
fn memory_store_meets_the_contract() {
    let store = MemoryStore::new();
    assert!(store.is_empty());
    check_contract(&store);
    assert_eq!(store.len(), 3);
    assert_eq!(
        store.total_bytes(),
        (b"spirv one".len() + b"hlsl one".len()) as u64
    );
}

#[test]
fn local_store_meets_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalStore::new(dir.path());
    check_contract(&store);
    assert_eq!(store.usage().unwrap().entries(), 3);

    // Records of a variant's targets, all or nothing, in the order asked.
    let spirv = Namespace::new("spirv", "naga 30.0.0");
    let hlsl = Namespace::new("hlsl", "naga 30.0.0").with_option("shader_model", "6.0");
    let msl = Namespace::new("msl", "naga 30.0.0");
    let both = store.recorded_all(&[&hlsl, &spirv], &key(1)).unwrap();
    assert_eq!(
        both,
        vec![
            (8, ContentKey::hash(b"hlsl one")),
            (9, ContentKey::hash(b"spirv one"))
        ]
    );
    assert_eq!(
        store.recorded_all(&[&spirv, &spirv], &key(1)),
        Some(vec![(9, ContentKey::hash(b"spirv one")); 2])
    );
    assert_eq!(store.recorded_all(&[], &key(1)), Some(Vec::new()));
    assert_eq!(store.recorded_all(&[&spirv, &msl], &key(1)), None);
    assert_eq!(store.recorded_all(&[&spirv, &hlsl], &key(2)), None);
    assert_eq!(
        store.recorded(&spirv, &key(2)),
        Some((0, ContentKey::hash(b"")))
    );
}

#[test]
fn shared_stores_meet_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    let local: Arc<dyn ArtifactStore> = Arc::new(LocalStore::new(dir.path()));
    check_contract(&local);
    let memory = Arc::new(MemoryStore::new());
    check_contract(&Arc::clone(&memory));
    assert_eq!(memory.len(), 3);
}

#[test]
fn namespace_dir_name_is_target_then_16_hex() {
    let ns = Namespace::new("spirv", "naga 30.0.0");
    let (target, hash) = ns.dir_name().split_once('-').unwrap();
    assert_eq!(target, "spirv");
    assert_eq!(hash.len(), 16);
    assert!(hash
        .bytes()
        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    assert_eq!(ns.kiln_version(), KILN_VERSION);
    assert_eq!(ns.to_string(), ns.dir_name());
}

#[test]
fn namespace_dir_name_is_stable_across_releases() {
    // The on-disk name of a namespace must not change by accident: that would orphan every
    // user's cache. Change this value only together with the layout version (`v1`).
    let ns = Namespace::new("msl", "naga 30.0.0")
        .with_kiln_version("0.1.0")
        .with_option("lang_version", "2.4")
        .with_capability("float64");
    assert_eq!(ns.dir_name(), "msl-2b16db7e1ba5deab");

    // The same value, from the encoding documented in namespace.rs: a domain tag, then
    // every field length-prefixed (u64 LE), maps and sets preceded by their count.
    let mut spec = Vec::new();
    spec.extend_from_slice(b"kiln.store.namespace.v1\0");
    let put = |out: &mut Vec<u8>, text: &str| {
        out.extend_from_slice(&(text.len() as u64).to_le_bytes());
        out.extend_from_slice(text.as_bytes());
    };
    put(&mut spec, "0.1.0");
    put(&mut spec, "naga 30.0.0");
    put(&mut spec, "msl");
    spec.extend_from_slice(&1u64.to_le_bytes());
    put(&mut spec, "lang_version");
    put(&mut spec, "2.4");
    spec.extend_from_slice(&1u64.to_le_bytes());
    put(&mut spec, "float64");
    let hash = blake3::hash(&spec).to_hex();
    assert_eq!(ns.dir_name(), format!("msl-{}", &hash[..16]));
}

#[test]
fn namespace_ignores_the_order_options_and_capabilities_were_given_in() {
    let a = Namespace::new("msl", "naga 30.0.0")
        .with_option("a", "1")
        .with_option("b", "2")
        .with_capability("x")
        .with_capability("y");
    let b = Namespace::new("msl", "naga 30.0.0")
        .with_capability("y")
        .with_option("b", "2")
        .with_capability("x")
        .with_option("a", "1")
        .with_capability("x");
    assert_eq!(a, b);
    assert_eq!(a.dir_name(), b.dir_name());
}

#[test]
fn namespace_fields_cannot_bleed_into_each_other() {
    let a = Namespace::new("spirv", "naga").with_kiln_version("1.0");
    let b = Namespace::new("spirv", "").with_kiln_version("1.0naga");
    assert_ne!(a.dir_name(), b.dir_name());
    let c = Namespace::new("spirv", "naga").with_option("ab", "c");
    let d = Namespace::new("spirv", "naga").with_option("a", "bc");
    assert_ne!(c.dir_name(), d.dir_name());
    let e = Namespace::new("spirv", "naga").with_option("float64", "");
    let f = Namespace::new("spirv", "naga").with_capability("float64");
    assert_ne!(e.dir_name(), f.dir_name());
}

#[test]
fn namespace_target_is_made_file_name_safe() {
    let ns = Namespace::new("../Metal 2.4/iOS", "naga 30.0.0");
    let (target, _) = ns.dir_name().rsplit_once('-').unwrap();
    assert_eq!(target, "___metal_2_4_ios");
    assert_eq!(ns.target(), "../Metal 2.4/iOS");
    let empty = Namespace::new("", "naga 30.0.0");
    assert!(empty.dir_name().starts_with("target-"));
    let long = Namespace::new("x".repeat(100), "naga 30.0.0");
    assert_eq!(long.dir_name().len(), 32 + 1 + 16);
}

#[test]
fn namespace_json_round_trips_and_recomputes_the_dir_name() {
    let ns = Namespace::new("hlsl", "naga 30.0.0")
        .with_option("shader_model", "6.0")
        .with_capability("wave_ops");
    let json = ns.to_json();
    let back = Namespace::from_json(&json).unwrap();
    assert_eq!(back, ns);
    assert_eq!(back.target_options().get("shader_model").unwrap(), "6.0");
    assert!(back.capabilities().contains("wave_ops"));

    let forged = json.replace(ns.dir_name(), "hlsl-0000000000000000");
    assert_eq!(
        Namespace::from_json(&forged).unwrap().dir_name(),
        ns.dir_name()
    );
    assert!(Namespace::from_json("{ not json").is_err());
}

#[test]
fn content_key_hex_round_trips() {
    let k = ContentKey::hash(b"preprocessed text");
    let hex = k.to_hex();
    assert_eq!(hex.len(), ContentKey::HEX_LEN);
    assert_eq!(hex, blake3::hash(b"preprocessed text").to_hex().as_str());
    assert_eq!(hex.parse::<ContentKey>().unwrap(), k);
    assert_eq!(hex.to_uppercase().parse::<ContentKey>().unwrap(), k);
    assert_eq!(k.to_string(), hex);
    assert_eq!(ContentKey::from(blake3::hash(b"preprocessed text")), k);
    assert_eq!(ContentKey::from_bytes(*k.as_bytes()), k);
}

#[test]
fn content_key_rejects_what_is_not_64_hex_digits() {
    let good = ContentKey::hash(b"x").to_hex();
    for bad in [
        String::new(),
        good[..63].to_owned(),
        format!("{good}0"),
        format!("{}g", &good[..63]),
        format!("{}é", &good[..62]),
    ] {
        let err = bad.parse::<ContentKey>().unwrap_err();
        assert_eq!(err.text, bad);
    }
}
