//! The C ABI called from Rust: every status, NULL and non-UTF-8 arguments, the thread-local
//! message, borrowed bytes, and sharing a library between threads. (`tests/c_abi.rs` calls
//! it from C; the panic status is tested in `src/ffi.rs`, where a panic can be made.)

mod common;

use std::ffi::{c_char, CStr, CString};
use std::ptr;

use common::{temp_dir, write_sample_pack, SAMPLES};
use kiln_runtime::ffi::{
    kiln_last_error, kiln_library_close, kiln_library_get, kiln_library_len, kiln_library_open,
    kiln_library_open_dir, kiln_library_variant_count, KilnLibrary, KilnStatus, KilnVariant,
};
use kiln_runtime::Library;

use KilnStatus::*;

fn c(text: &str) -> CString {
    CString::new(text).unwrap()
}

fn last_error() -> String {
    // SAFETY: `kiln_last_error` returns a NUL-terminated string, valid until the next call.
    unsafe { CStr::from_ptr(kiln_last_error()) }
        .to_str()
        .unwrap()
        .to_owned()
}

/// An open library, closed on drop.
struct Open(*mut KilnLibrary);

// SAFETY: a `KilnLibrary` is a `Library`, which is `Send + Sync`.
unsafe impl Send for Open {}
// SAFETY: as above.
unsafe impl Sync for Open {}

impl Drop for Open {
    fn drop(&mut self) {
        // SAFETY: opened by `open` and closed only here.
        unsafe { kiln_library_close(self.0) }
    }
}

fn open(path: &std::path::Path) -> Open {
    let path = c(path.to_str().unwrap());
    let mut library = ptr::null_mut();
    // SAFETY: valid C string and out pointer.
    let status = unsafe { kiln_library_open(path.as_ptr(), &mut library) };
    assert_eq!(status, KILN_OK, "{}", last_error());
    assert!(!library.is_null());
    Open(library)
}

/// `kiln_library_get` with Rust strings; `None` passes NULL.
fn get(
    library: *const KilnLibrary,
    shader: Option<&[u8]>,
    pass: &str,
    keywords: &[&[u8]],
    target: &str,
) -> (KilnStatus, KilnVariant) {
    let shader = shader.map(|s| CString::new(s).unwrap());
    let (pass, target) = (c(pass), c(target));
    let keywords: Vec<CString> = keywords.iter().map(|k| CString::new(*k).unwrap()).collect();
    let pointers: Vec<*const c_char> = keywords.iter().map(|k| k.as_ptr()).collect();
    let mut out = filled();
    // SAFETY: every pointer is NULL or a live C string; `pointers` holds `len` of them.
    let status = unsafe {
        kiln_library_get(
            library,
            shader.as_ref().map_or(ptr::null(), |s| s.as_ptr()),
            pass.as_ptr(),
            pointers.as_ptr(),
            pointers.len(),
            target.as_ptr(),
            &mut out,
        )
    };
    (status, out)
}

/// A variant full of garbage, to see that a failure zeroes it.
fn filled() -> KilnVariant {
    KilnVariant {
        bytes: ptr::dangling(),
        len: 7,
        reflection: ptr::dangling(),
        reflection_len: 7,
        digest: [b'x' as c_char; 13],
    }
}

fn digest(v: &KilnVariant) -> &str {
    // SAFETY: a digest is NUL-terminated (13 bytes, the last always 0).
    unsafe { CStr::from_ptr(v.digest.as_ptr()) }
        .to_str()
        .unwrap()
}

fn bytes(v: &KilnVariant) -> &[u8] {
    // SAFETY: after KILN_OK, `bytes` points to `len` bytes borrowed from an open library.
    unsafe { std::slice::from_raw_parts(v.bytes, v.len) }
}

fn assert_zeroed(v: &KilnVariant) {
    assert!(v.bytes.is_null() && v.reflection.is_null());
    assert_eq!((v.len, v.reflection_len), (0, 0));
    assert_eq!(v.digest, [0; 13]);
}

#[test]
fn every_sample_is_found_with_its_bytes_and_digest() {
    let dir = temp_dir("ffi-found");
    let lib = open(&write_sample_pack(&dir));
    // SAFETY: an open library.
    assert_eq!(unsafe { kiln_library_len(lib.0) }, SAMPLES.len());
    for s in SAMPLES {
        let keywords: Vec<&[u8]> = s.keywords.iter().map(|k| k.as_bytes()).collect();
        let (status, v) = get(
            lib.0,
            Some(s.shader.as_bytes()),
            s.pass,
            &keywords,
            s.target,
        );
        assert_eq!(status, KILN_OK, "{}", last_error());
        assert_eq!(bytes(&v), s.bytes());
        assert_eq!(digest(&v), s.digest());
        assert_eq!(v.digest[12], 0);
        assert_eq!(v.reflection_len, 0);
        assert!(!v.reflection.is_null());
    }
    let mut count = 0;
    let shader = c("Lit");
    // SAFETY: open library, C string, writable count.
    let status = unsafe { kiln_library_variant_count(lib.0, shader.as_ptr(), &mut count) };
    assert_eq!(status, KILN_OK);
    assert_eq!(count, SAMPLES.iter().filter(|s| s.shader == "Lit").count());
}

#[test]
fn permuted_and_repeated_keywords_borrow_the_same_bytes() {
    let dir = temp_dir("ffi-permuted");
    let lib = open(&write_sample_pack(&dir));
    let (status, first) = get(lib.0, Some(b"Lit"), "Forward", &[b"FOG", b"SKIN"], "spirv");
    assert_eq!(status, KILN_OK);
    let (status, again) = get(
        lib.0,
        Some(b"Lit"),
        "Forward",
        &[b"SKIN", b"FOG", b"SKIN", b"FOG"],
        "spirv",
    );
    assert_eq!(status, KILN_OK);
    assert_eq!(first.bytes, again.bytes);
    assert_eq!(first.len, again.len);
    // More keywords than the stack holds (16): the list goes to the heap, same answer.
    let many: Vec<&[u8]> = (0..40).map(|i| [&b"FOG"[..], b"SKIN"][i % 2]).collect();
    let (status, heap) = get(lib.0, Some(b"Lit"), "Forward", &many, "spirv");
    assert_eq!(status, KILN_OK, "{}", last_error());
    assert_eq!(heap.bytes, first.bytes);
    // The empty set, with keywords NULL and a count of 0.
    let (pass, target, shader) = (c("Forward"), c("spirv"), c("Lit"));
    let mut out = filled();
    // SAFETY: live C strings; NULL keywords with a count of 0.
    let status = unsafe {
        kiln_library_get(
            lib.0,
            shader.as_ptr(),
            pass.as_ptr(),
            ptr::null(),
            0,
            target.as_ptr(),
            &mut out,
        )
    };
    assert_eq!(status, KILN_OK);
    assert_eq!(bytes(&out), SAMPLES[0].bytes());
}

#[test]
fn every_lookup_error_has_its_status_and_the_rust_message() {
    let dir = temp_dir("ffi-errors");
    let path = write_sample_pack(&dir);
    let lib = open(&path);
    let rust = Library::open(&path).unwrap();
    let cases: [(&str, &str, &[&str], &str, KilnStatus); 6] = [
        ("Lit", "Forward", &["FOG"], "dxil", KILN_ERR_UNKNOWN_TARGET),
        ("Sky", "Forward", &["FOG"], "spirv", KILN_ERR_UNKNOWN_SHADER),
        ("Lit", "Shadow", &["FOG"], "spirv", KILN_ERR_UNKNOWN_PASS),
        (
            "Lit",
            "Forward",
            &["FOG", "A B"],
            "spirv",
            KILN_ERR_INVALID_KEYWORD,
        ),
        (
            "Lit",
            "Forward",
            &["FOG", "RAIN"],
            "spirv",
            KILN_ERR_UNKNOWN_KEYWORD,
        ),
        ("Lit", "Forward", &["SHADOWS"], "spirv", KILN_ERR_NOT_BUILT),
    ];
    for (shader, pass, keywords, target, expected) in cases {
        let c_keywords: Vec<&[u8]> = keywords.iter().map(|k| k.as_bytes()).collect();
        let (status, out) = get(lib.0, Some(shader.as_bytes()), pass, &c_keywords, target);
        assert_eq!(status, expected, "{shader}/{pass}{keywords:?} {target}");
        assert_zeroed(&out);
        let error = rust.get(shader, pass, keywords, target).unwrap_err();
        assert_eq!(last_error(), error.to_string());
    }
    assert_eq!(
        last_error(),
        "Lit/Forward[SHADOWS] was not built for target `spirv`"
    );
    let (_, _) = get(lib.0, Some(b"Lit"), "Forward", &[b"RAIN"], "spirv");
    assert_eq!(
        last_error(),
        "unknown keyword `RAIN` for Lit/Forward: shader `Lit` declares [FOG;SHADOWS;SKIN]"
    );
    let mut count = 7;
    let sky = c("Sky");
    // SAFETY: open library, C string, writable count.
    let status = unsafe { kiln_library_variant_count(lib.0, sky.as_ptr(), &mut count) };
    assert_eq!((status, count), (KILN_ERR_UNKNOWN_SHADER, 0));
    assert_eq!(last_error(), "unknown shader `Sky`");
}

#[test]
fn null_and_non_utf8_arguments_are_statuses() {
    let dir = temp_dir("ffi-null");
    let path = write_sample_pack(&dir);
    let lib = open(&path);
    let path = c(path.to_str().unwrap());
    let mut library = ptr::dangling_mut::<KilnLibrary>();
    // SAFETY (all calls below): each pointer is NULL or valid; NULLs are what is tested.
    let status = unsafe { kiln_library_open(ptr::null(), &mut library) };
    assert_eq!(status, KILN_ERR_NULL_ARGUMENT);
    assert!(library.is_null(), "a failed open stores NULL");
    assert_eq!(last_error(), "argument `path` is NULL");
    // SAFETY: as above.
    let status = unsafe { kiln_library_open(path.as_ptr(), ptr::null_mut()) };
    assert_eq!(status, KILN_ERR_NULL_ARGUMENT);
    assert_eq!(last_error(), "argument `out` is NULL");
    let bad = CString::new(b"caf\xe9.kpack".to_vec()).unwrap();
    // SAFETY: as above.
    let status = unsafe { kiln_library_open(bad.as_ptr(), &mut library) };
    assert_eq!(status, KILN_ERR_INVALID_UTF8);
    assert!(last_error().starts_with("argument `path` is not UTF-8"));

    let (status, out) = get(ptr::null(), Some(b"Lit"), "Forward", &[], "spirv");
    assert_eq!(status, KILN_ERR_NULL_ARGUMENT);
    assert_zeroed(&out);
    assert_eq!(last_error(), "argument `library` is NULL");
    let (status, _) = get(lib.0, None, "Forward", &[], "spirv");
    assert_eq!(status, KILN_ERR_NULL_ARGUMENT);
    assert_eq!(last_error(), "argument `shader` is NULL");
    let (status, _) = get(lib.0, Some(b"L\xfft"), "Forward", &[], "spirv");
    assert_eq!(status, KILN_ERR_INVALID_UTF8);
    assert_eq!(
        last_error(),
        "argument `shader` is not UTF-8 (invalid utf-8 sequence of 1 bytes from index 1): \
         \"L\u{fffd}t\""
    );
    let (status, _) = get(
        lib.0,
        Some(b"Lit"),
        "Forward",
        &[b"FOG", b"SK\xc3"],
        "spirv",
    );
    assert_eq!(status, KILN_ERR_INVALID_UTF8);
    assert!(last_error().starts_with("argument `keywords[1]` is not UTF-8"));

    let (shader, pass, target, fog) = (c("Lit"), c("Forward"), c("spirv"), c("FOG"));
    let mut out = filled();
    // SAFETY: as above.
    let status = unsafe {
        kiln_library_get(
            lib.0,
            shader.as_ptr(),
            pass.as_ptr(),
            ptr::null(),
            1,
            target.as_ptr(),
            &mut out,
        )
    };
    assert_eq!(status, KILN_ERR_NULL_ARGUMENT);
    assert_eq!(last_error(), "argument `keywords` is NULL");
    assert_zeroed(&out);
    let list = [fog.as_ptr(), ptr::null()];
    // SAFETY: as above.
    let status = unsafe {
        kiln_library_get(
            lib.0,
            shader.as_ptr(),
            pass.as_ptr(),
            list.as_ptr(),
            2,
            target.as_ptr(),
            &mut out,
        )
    };
    assert_eq!(status, KILN_ERR_NULL_ARGUMENT);
    assert_eq!(last_error(), "argument `keywords[1]` is NULL");
    // SAFETY: as above.
    let status = unsafe {
        kiln_library_get(
            lib.0,
            shader.as_ptr(),
            pass.as_ptr(),
            list.as_ptr(),
            1,
            target.as_ptr(),
            ptr::null_mut(),
        )
    };
    assert_eq!(status, KILN_ERR_NULL_ARGUMENT);
    assert_eq!(last_error(), "argument `out` is NULL");
    let mut count = 0;
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            kiln_library_variant_count(ptr::null(), shader.as_ptr(), &mut count),
            KILN_ERR_NULL_ARGUMENT
        );
        assert_eq!(
            kiln_library_variant_count(lib.0, ptr::null(), &mut count),
            KILN_ERR_NULL_ARGUMENT
        );
        assert_eq!(
            kiln_library_variant_count(lib.0, shader.as_ptr(), ptr::null_mut()),
            KILN_ERR_NULL_ARGUMENT
        );
        assert_eq!(kiln_library_len(ptr::null()), 0);
        kiln_library_close(ptr::null_mut());
    }
}

#[test]
fn missing_foreign_and_damaged_packs() {
    let dir = temp_dir("ffi-damaged");
    let mut library = ptr::null_mut();
    let missing = c(dir.join("missing.kpack").to_str().unwrap());
    // SAFETY: a C string and a writable pointer.
    let status = unsafe { kiln_library_open(missing.as_ptr(), &mut library) };
    assert_eq!(status, KILN_ERR_IO);
    assert!(
        last_error().starts_with("cannot open pack "),
        "{}",
        last_error()
    );

    let foreign = dir.join("foreign.kpack");
    std::fs::write(&foreign, b"not a pack at all, not even close").unwrap();
    let foreign = c(foreign.to_str().unwrap());
    // SAFETY: as above.
    let status = unsafe { kiln_library_open(foreign.as_ptr(), &mut library) };
    assert_eq!(status, KILN_ERR_CORRUPT);
    assert!(
        last_error().starts_with("cannot read pack "),
        "{}",
        last_error()
    );
    assert!(library.is_null());

    // One artifact byte flipped: open checks only the tables, the lookup finds the damage.
    let mut pack = common::sample_pack();
    let s = &SAMPLES[1];
    let artifact = s.bytes();
    let at = pack
        .windows(artifact.len())
        .position(|w| w == artifact)
        .unwrap();
    pack[at] ^= 1;
    let path = dir.join("damaged.kpack");
    std::fs::write(&path, &pack).unwrap();
    let lib = open(&path);
    let keywords: Vec<&[u8]> = s.keywords.iter().map(|k| k.as_bytes()).collect();
    let (status, out) = get(
        lib.0,
        Some(s.shader.as_bytes()),
        s.pass,
        &keywords,
        s.target,
    );
    assert_eq!(status, KILN_ERR_CORRUPT);
    assert_zeroed(&out);
    assert!(
        last_error().starts_with("Lit/Forward[FOG] for `spirv`: "),
        "{}",
        last_error()
    );
    // The others are intact.
    let (status, _) = get(lib.0, Some(b"Lit"), "Forward", &[], "spirv");
    assert_eq!(status, KILN_OK);
}

#[test]
fn threads_share_a_library_and_keep_their_own_message() {
    let dir = temp_dir("ffi-threads");
    let lib = open(&write_sample_pack(&dir));
    let (_, expected) = get(lib.0, Some(b"Lit"), "Forward", &[b"FOG", b"SKIN"], "spirv");
    let (status, _) = get(lib.0, Some(b"Lit"), "Forward", &[b"RAIN"], "spirv");
    assert_eq!(status, KILN_ERR_UNKNOWN_KEYWORD);
    let expected = expected.bytes as usize;
    std::thread::scope(|scope| {
        for t in 0..4 {
            let lib = &lib;
            scope.spawn(move || {
                assert_eq!(last_error(), "", "a new thread has no message");
                for i in 0..500 {
                    let keywords: [&[u8]; 2] = if (i + t) % 2 == 0 {
                        [b"FOG", b"SKIN"]
                    } else {
                        [b"SKIN", b"FOG"]
                    };
                    let (status, v) = get(lib.0, Some(b"Lit"), "Forward", &keywords, "spirv");
                    assert_eq!(status, KILN_OK);
                    assert_eq!(v.bytes as usize, expected);
                }
                let (status, _) = get(lib.0, Some(b"Lit"), "Forward", &[b"T"], "spirv");
                assert_eq!(status, KILN_ERR_UNKNOWN_KEYWORD);
                assert!(last_error().starts_with("unknown keyword `T` "));
            });
        }
    });
    assert!(last_error().starts_with("unknown keyword `RAIN` "));
}

#[test]
fn open_dir_finds_the_targets_pack_and_names_a_missing_one() {
    let dir = temp_dir("ffi-open-dir");
    let pack = write_sample_pack(&dir);
    std::fs::rename(&pack, dir.join("spirv.kpack")).unwrap();
    let (c_dir, spirv, dxil) = (c(dir.to_str().unwrap()), c("spirv"), c("dxil"));
    let mut library = ptr::null_mut();
    // SAFETY: C strings and a writable pointer.
    let status = unsafe { kiln_library_open_dir(c_dir.as_ptr(), spirv.as_ptr(), &mut library) };
    assert_eq!(status, KILN_OK, "{}", last_error());
    let library = Open(library);
    let expected = Library::open(dir.join("spirv.kpack")).unwrap().len();
    // SAFETY: an open library.
    assert_eq!(unsafe { kiln_library_len(library.0) }, expected);

    let mut none = ptr::null_mut();
    // SAFETY: as above.
    let status = unsafe { kiln_library_open_dir(c_dir.as_ptr(), dxil.as_ptr(), &mut none) };
    assert_eq!(status, KILN_ERR_IO);
    assert!(none.is_null());
    assert!(last_error().contains("dxil.kpack"), "{}", last_error());
    // SAFETY: NULL arguments are refused before anything is read.
    let status = unsafe { kiln_library_open_dir(ptr::null(), spirv.as_ptr(), &mut none) };
    assert_eq!(status, KILN_ERR_NULL_ARGUMENT);
}
