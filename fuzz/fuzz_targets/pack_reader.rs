//! The pack reader (`kiln_runtime::Library`): any bytes are a typed error or a pack that reads
//! consistently; nothing panics. The first byte chooses whether the checksums are recomputed
//! first (`reseal_for_fuzzing`): a fuzzer cannot forge blake3, and without resealing it
//! would only ever reach the header check.
#![no_main]

use kiln_runtime::canon;
use kiln_runtime::pack::reseal_for_fuzzing;
use kiln_runtime::Library;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut bytes = rest.to_vec();
    if mode & 1 == 1 {
        reseal_for_fuzzing(&mut bytes);
    }
    let Ok(lib) = Library::from_bytes(bytes) else {
        return;
    };
    let _ = lib.verify_all();
    let targets: Vec<&str> = lib.targets().collect();
    assert!(canon::is_canonical(&targets));
    for shader in lib.shaders() {
        let declared: Vec<&str> = lib.declared_keywords(shader).expect("listed").collect();
        assert!(canon::is_canonical(&declared));
        let passes: Vec<&str> = lib.passes(shader).expect("listed").collect();
        assert!(canon::is_canonical(&passes));
        for variant in lib.variants(shader).expect("listed") {
            let Ok(variant) = variant else { continue };
            let keywords: Vec<&str> = variant.keywords.iter().collect();
            assert!(canon::is_canonical(&keywords));
            assert!(canon::is_digest(variant.digest.as_bytes()));
            assert!(targets.contains(&variant.target));
            assert!(passes.contains(&variant.pass));
            // Reversed, with a repeat: the same entry.
            let mut query = keywords.clone();
            query.reverse();
            query.extend(keywords.first());
            let found = lib
                .get(variant.shader, variant.pass, &query, variant.target)
                .expect("an iterated variant is found");
            assert_eq!(found.bytes, variant.bytes);
            assert_eq!(found.digest, variant.digest);
            assert_eq!(found.reflection, variant.reflection);
        }
        for pass in &passes {
            let _ = lib.get(shader, pass, &declared, targets.first().copied().unwrap_or("x"));
            let _ = lib.get(shader, pass, &["NOT DECLARED"], "x");
        }
    }
});
