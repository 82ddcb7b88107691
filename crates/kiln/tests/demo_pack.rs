//! The bundled demo built as its manifest asks (`[output] layout = "both"`), read back the
//! way an engine reads it (issue 27): every variant of every target is served by its
//! target's pack through `kiln_runtime::Library` with exactly the loose file's bytes and the
//! index's digest; every permutation of each keyword set, with a keyword repeated, finds the
//! same artifact; an unknown keyword and a legal set that was not built are their errors;
//! each variant's reflection blob is its `reflection` output.
//! The same lookups go through the C ABI (`kiln_runtime::ffi`, what `kiln_runtime.h`
//! declares), called here as a C caller calls them.

use kiln::pipeline::{BuildOptions, Index, Project};
use kiln_runtime::ffi::{self, KilnLibrary, KilnStatus, KilnVariant};
use kiln_runtime::{Library, LookupError};
use std::ffi::{c_char, CString};
use std::path::Path;

/// A library opened through the C ABI, closed on drop.
struct CLibrary(*mut KilnLibrary);

impl CLibrary {
    fn open(path: &Path) -> CLibrary {
        let path = CString::new(path.to_str().unwrap()).unwrap();
        let mut library = std::ptr::null_mut();
        // SAFETY: a NUL-terminated path and a valid out pointer.
        let status = unsafe { ffi::kiln_library_open(path.as_ptr(), &mut library) };
        assert_eq!(status, KilnStatus::KILN_OK);
        CLibrary(library)
    }

    /// `kiln_library_get` as C calls it: the status, and the artifact and digest on success.
    fn get(
        &self,
        shader: &str,
        pass: &str,
        keywords: &[&str],
        target: &str,
    ) -> (KilnStatus, Vec<u8>, String) {
        let c = |s: &str| CString::new(s).unwrap();
        let (shader, pass, target) = (c(shader), c(pass), c(target));
        let keywords: Vec<CString> = keywords.iter().map(|k| c(k)).collect();
        let pointers: Vec<*const c_char> = keywords.iter().map(|k| k.as_ptr()).collect();
        let mut out = std::mem::MaybeUninit::<KilnVariant>::zeroed();
        // SAFETY: every string is NUL-terminated and outlives the call; `pointers` holds
        // `pointers.len()` of them; `out` is writable.
        let status = unsafe {
            ffi::kiln_library_get(
                self.0,
                shader.as_ptr(),
                pass.as_ptr(),
                pointers.as_ptr(),
                pointers.len(),
                target.as_ptr(),
                out.as_mut_ptr(),
            )
        };
        if status != KilnStatus::KILN_OK {
            return (status, Vec::new(), String::new());
        }
        // SAFETY: on success the call filled `out`; its bytes borrow the open library.
        let out = unsafe { out.assume_init() };
        let bytes = unsafe { std::slice::from_raw_parts(out.bytes, out.len) }.to_vec();
        let digest: String = out.digest[..12].iter().map(|&c| c as u8 as char).collect();
        (status, bytes, digest)
    }
}

impl Drop for CLibrary {
    fn drop(&mut self) {
        // SAFETY: opened by `kiln_library_open`, closed once.
        unsafe { ffi::kiln_library_close(self.0) };
    }
}

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
        .filter(|t| t.target().is_shader())
        .map(|t| t.target().name().to_owned())
        .collect();
    assert!(
        !out.join("reflection.kpack").exists(),
        "reflection is no pack of its own"
    );
    assert_eq!(
        report.packs_written,
        targets.len(),
        "the demo asks for packs"
    );

    let index = Index::read(&out);
    let mut checked = 0;
    for target in &targets {
        let library = Library::open(out.join(format!("{target}.kpack"))).unwrap();
        let c_library = CLibrary::open(&out.join(format!("{target}.kpack")));
        library.verify_all().unwrap();
        let entries: Vec<_> = index
            .entries
            .iter()
            .filter(|e| *e.target == **target)
            .collect();
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
            let reflection = e.path.rsplit_once('.').unwrap().0.to_owned() + ".reflect.json";
            let reflection = std::fs::read(out.join(reflection)).unwrap();
            assert_eq!(first.reflection, &reflection[..], "{}", e.path);
            assert!(reflection.starts_with(b"{\"bindings\":"), "{}", e.path);
            let mut reversed = set.clone();
            reversed.reverse();
            reversed.extend(set.first());
            let (status, bytes, digest) = c_library.get(shader, pass, &reversed, target);
            assert_eq!(status, KilnStatus::KILN_OK, "{}", e.path);
            assert_eq!(
                (bytes, digest.as_str()),
                (loose.clone(), &*e.variant.digest),
                "{}",
                e.path
            );
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
            Err(LookupError::UnknownKeyword {
                keyword, declared, ..
            }) => {
                assert_eq!(keyword, "FOGG");
                assert!(declared.contains(&"FOG".to_owned()), "{declared:?}");
            }
            other => panic!("{other:?}"),
        }
        match library.get("Skybox", "Forward", &["CUBEMAP", "PROCEDURAL"], target) {
            Err(LookupError::NotBuilt { .. }) => {}
            other => panic!("{other:?}"),
        }
        let unknown = c_library.get("Lit", "Forward", &["FOG", "FOGG"], target).0;
        assert_eq!(unknown, KilnStatus::KILN_ERR_UNKNOWN_KEYWORD);
        let unbuilt = c_library
            .get("Skybox", "Forward", &["CUBEMAP", "PROCEDURAL"], target)
            .0;
        assert_eq!(unbuilt, KilnStatus::KILN_ERR_NOT_BUILT);
    }
    assert_eq!(checked, report.variants * targets.len());
}
