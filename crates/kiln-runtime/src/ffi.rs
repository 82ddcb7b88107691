//! The C ABI (issue 27): what an engine written in C or C++ links to look variants up.
//!
//! The header `include/kiln_runtime.h` is generated from this file by cbindgen
//! (`cbindgen.toml`); `tests/c_header.rs` fails when it is stale and rewrites it with
//! `KILN_BLESS_HEADER=1`. Link `libkiln_runtime.a` (with `-lpthread -ldl -lm` on Linux) or the
//! shared `libkiln_runtime.so`.
//!
//! Rules every function keeps: each pointer argument is checked for NULL
//! ([`KilnStatus::KILN_ERR_NULL_ARGUMENT`]), each string for UTF-8
//! ([`KilnStatus::KILN_ERR_INVALID_UTF8`]), no panic crosses the boundary
//! ([`KilnStatus::KILN_ERR_PANIC`]), and a failure leaves its message for
//! [`kiln_last_error`] on the calling thread.

// Each unsafe operation sits in its own block with its reason, even inside `unsafe fn`.
#![deny(unsafe_op_in_unsafe_fn)]

use std::any::Any;
use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use crate::{Library, LookupError, OpenError};

/// What a kiln call did: `KILN_OK`, or why it failed (the message is in `kiln_last_error`).
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KilnStatus {
    /// Success.
    KILN_OK = 0,
    /// A pointer argument that must not be NULL was NULL.
    KILN_ERR_NULL_ARGUMENT = 1,
    /// A string argument was not valid UTF-8.
    KILN_ERR_INVALID_UTF8 = 2,
    /// The pack file could not be opened, read or mapped.
    KILN_ERR_IO = 3,
    /// The pack is not a valid pack, or the variant's artifact is damaged in it.
    KILN_ERR_CORRUPT = 4,
    /// The pack holds no such target.
    KILN_ERR_UNKNOWN_TARGET = 5,
    /// The pack holds no such shader.
    KILN_ERR_UNKNOWN_SHADER = 6,
    /// The shader declares no such pass.
    KILN_ERR_UNKNOWN_PASS = 7,
    /// A keyword that cannot be a keyword at all (empty, whitespace, `;`...).
    KILN_ERR_INVALID_KEYWORD = 8,
    /// A keyword the shader does not declare (the message lists the declared ones).
    KILN_ERR_UNKNOWN_KEYWORD = 9,
    /// A legal keyword set that the build did not build for this target.
    KILN_ERR_NOT_BUILT = 10,
    /// kiln-runtime panicked (a bug in kiln-runtime); the message says where.
    KILN_ERR_PANIC = 11,
}

/// An opened pack (opaque). Made by `kiln_library_open`, freed by `kiln_library_close`.
///
/// Thread-safe: any number of threads may call `kiln_library_get` on one library at once;
/// close it once, when no thread uses it and no variant's bytes are still needed.
pub struct KilnLibrary {
    inner: Library,
}

/// One variant found by `kiln_library_get`. The bytes are borrowed from the library: they
/// stay valid, unchanged, until `kiln_library_close`. Pointers are never NULL after
/// `KILN_OK` (a length may be 0); after a failure the whole struct is zeroed.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct KilnVariant {
    /// The compiled artifact (verified against its checksum).
    pub bytes: *const u8,
    /// The artifact's length in bytes.
    pub len: usize,
    /// The variant's reflection: kiln's reflection JSON (README, "Reflection") when the build
    /// listed the `reflection` target, else empty (`reflection_len` 0).
    pub reflection: *const u8,
    /// The reflection blob's length in bytes.
    pub reflection_len: usize,
    /// kiln's 12 lower-case hex digits naming the variant in its logs, NUL-terminated.
    pub digest: [c_char; 13],
}

impl KilnVariant {
    const EMPTY: KilnVariant = KilnVariant {
        bytes: ptr::null(),
        len: 0,
        reflection: ptr::null(),
        reflection_len: 0,
        digest: [0; 13],
    };
}

/// A failure: its status and the message `kiln_last_error` will return.
type Failure = (KilnStatus, String);

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(message: String) {
    // Interior NULs cannot reach a C string; none should occur (every input was a C string).
    let message = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    // `try_with`: a call made while the thread is being torn down keeps its status.
    let _ = LAST_ERROR.try_with(|cell| {
        if let Ok(mut slot) = cell.try_borrow_mut() {
            *slot = message;
        }
    });
}

/// Runs one call's body: its status, its message saved on failure, and no unwinding out.
fn guard(body: impl FnOnce() -> Result<(), Failure>) -> KilnStatus {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => KilnStatus::KILN_OK,
        Ok(Err((status, message))) => {
            set_last_error(message);
            status
        }
        Err(payload) => {
            set_last_error(format!("kiln-runtime panicked: {}", panic_text(&*payload)));
            // A payload whose `drop` panics must not unwind into C either.
            let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
            KilnStatus::KILN_ERR_PANIC
        }
    }
}

fn panic_text(payload: &(dyn Any + Send)) -> &str {
    if let Some(text) = payload.downcast_ref::<&str>() {
        text
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text
    } else {
        "(no message)"
    }
}

fn null_argument(what: &str) -> Failure {
    (
        KilnStatus::KILN_ERR_NULL_ARGUMENT,
        format!("argument `{what}` is NULL"),
    )
}

/// The UTF-8 text of the C string at `ptr`, named `what` in errors.
///
/// # Safety
///
/// `ptr` is NULL or points to a NUL-terminated string that stays valid and unchanged for `'a`.
unsafe fn text<'a>(ptr: *const c_char, what: &str) -> Result<&'a str, Failure> {
    if ptr.is_null() {
        return Err(null_argument(what));
    }
    // SAFETY: not NULL, and the caller promises a NUL-terminated string living for 'a.
    let c = unsafe { CStr::from_ptr(ptr) };
    c.to_str().map_err(|error| {
        (
            KilnStatus::KILN_ERR_INVALID_UTF8,
            format!(
                "argument `{what}` is not UTF-8 ({error}): \"{}\"",
                c.to_string_lossy()
            ),
        )
    })
}

fn open_failure(error: OpenError) -> Failure {
    let status = match &error {
        OpenError::Io { .. } | OpenError::NoPack { .. } => KilnStatus::KILN_ERR_IO,
        OpenError::Corrupt { .. } => KilnStatus::KILN_ERR_CORRUPT,
    };
    (status, error.to_string())
}

fn lookup_failure(error: LookupError) -> Failure {
    // No wildcard: a new error kind must be given its status here.
    let status = match &error {
        LookupError::UnknownTarget { .. } => KilnStatus::KILN_ERR_UNKNOWN_TARGET,
        LookupError::UnknownShader { .. } => KilnStatus::KILN_ERR_UNKNOWN_SHADER,
        LookupError::UnknownPass { .. } => KilnStatus::KILN_ERR_UNKNOWN_PASS,
        LookupError::InvalidKeyword { .. } => KilnStatus::KILN_ERR_INVALID_KEYWORD,
        LookupError::UnknownKeyword { .. } => KilnStatus::KILN_ERR_UNKNOWN_KEYWORD,
        LookupError::NotBuilt { .. } => KilnStatus::KILN_ERR_NOT_BUILT,
        LookupError::CorruptArtifact { .. } => KilnStatus::KILN_ERR_CORRUPT,
    };
    (status, error.to_string())
}

/// Keyword lists up to this size are converted on the stack (as `Library::get` does).
const INLINE_KEYWORDS: usize = 16;

/// Runs `f` with the C strings of `list` as UTF-8, without allocating for up to
/// [`INLINE_KEYWORDS`].
///
/// # Safety
///
/// Each pointer of `list` is NULL or a NUL-terminated string valid for `'k`.
unsafe fn with_keywords<'k, R>(
    list: &[*const c_char],
    f: impl FnOnce(&[&'k str]) -> Result<R, Failure>,
) -> Result<R, Failure> {
    let mut inline = [""; INLINE_KEYWORDS];
    let mut heap = Vec::new();
    let slots: &mut [&'k str] = if list.len() <= INLINE_KEYWORDS {
        &mut inline[..list.len()]
    } else {
        heap.resize(list.len(), "");
        &mut heap
    };
    for (i, (slot, &keyword)) in slots.iter_mut().zip(list).enumerate() {
        // SAFETY: the caller's promise for every pointer of `list`.
        *slot = unsafe { text(keyword, &format!("keywords[{i}]")) }?;
    }
    f(slots)
}

/// Opens the pack at `path` (UTF-8), mapping it read-only and validating its header and
/// tables, and stores the new library in `*out` (NULL on failure).
///
/// # Safety
///
/// `path` is NULL or a NUL-terminated string; `out` is NULL or points to writable storage
/// for one pointer.
#[no_mangle]
pub unsafe extern "C" fn kiln_library_open(
    path: *const c_char,
    out: *mut *mut KilnLibrary,
) -> KilnStatus {
    guard(|| {
        if out.is_null() {
            return Err(null_argument("out"));
        }
        // SAFETY: `out` is not NULL and the caller promises it is writable.
        unsafe { out.write(ptr::null_mut()) };
        // SAFETY: the caller's promise for `path`; it is read only during this call.
        let path = unsafe { text(path, "path") }?;
        let inner = Library::open(path).map_err(open_failure)?;
        let library = Box::into_raw(Box::new(KilnLibrary { inner }));
        // SAFETY: as above.
        unsafe { out.write(library) };
        Ok(())
    })
}

/// Opens the pack kiln wrote for `target` in the output directory `dir` (both UTF-8):
/// `<dir>/<target>.kpack`, as `kiln_library_open` opens a path. No pack there is
/// `KILN_ERR_IO`, with a message naming the file and the manifest setting that writes it.
///
/// # Safety
///
/// `dir` and `target` are NULL or NUL-terminated strings; `out` is NULL or points to
/// writable storage for one pointer.
#[no_mangle]
pub unsafe extern "C" fn kiln_library_open_dir(
    dir: *const c_char,
    target: *const c_char,
    out: *mut *mut KilnLibrary,
) -> KilnStatus {
    guard(|| {
        if out.is_null() {
            return Err(null_argument("out"));
        }
        // SAFETY: `out` is not NULL and the caller promises it is writable.
        unsafe { out.write(ptr::null_mut()) };
        // SAFETY: the caller's promise for `dir` and `target`; read only during this call.
        let (dir, target) = unsafe { (text(dir, "dir")?, text(target, "target")?) };
        let inner = Library::open_dir(dir, target).map_err(open_failure)?;
        let library = Box::into_raw(Box::new(KilnLibrary { inner }));
        // SAFETY: as above.
        unsafe { out.write(library) };
        Ok(())
    })
}

/// Closes a library made by `kiln_library_open` or `kiln_library_open_dir`: every variant's bytes it handed out become
/// invalid. NULL is accepted and does nothing. Closing one library twice is undefined.
///
/// # Safety
///
/// `library` is NULL or a library from `kiln_library_open` not yet closed, used by no other
/// thread.
#[no_mangle]
pub unsafe extern "C" fn kiln_library_close(library: *mut KilnLibrary) {
    if library.is_null() {
        return;
    }
    guard(|| {
        // SAFETY: `library` came from `Box::into_raw` in `kiln_library_open` and the caller
        // hands it back exactly once.
        drop(unsafe { Box::from_raw(library) });
        Ok(())
    });
}

/// The number of variants in the library (one per shader, pass, keyword set and target);
/// 0 for NULL.
///
/// # Safety
///
/// `library` is NULL or an open library.
#[no_mangle]
pub unsafe extern "C" fn kiln_library_len(library: *const KilnLibrary) -> usize {
    let mut len = 0;
    guard(|| {
        // SAFETY: the caller's promise: NULL or an open library.
        if let Some(library) = unsafe { library.as_ref() } {
            len = library.inner.len();
        }
        Ok(())
    });
    len
}

/// Stores in `*out` the number of variants of `shader` (all passes, keyword sets and
/// targets). `KILN_ERR_UNKNOWN_SHADER` if the pack has no such shader.
///
/// # Safety
///
/// `library` is NULL or an open library; `shader` is NULL or a NUL-terminated string; `out`
/// is NULL or points to a writable `size_t`.
#[no_mangle]
pub unsafe extern "C" fn kiln_library_variant_count(
    library: *const KilnLibrary,
    shader: *const c_char,
    out: *mut usize,
) -> KilnStatus {
    guard(|| {
        if out.is_null() {
            return Err(null_argument("out"));
        }
        // SAFETY: `out` is not NULL and the caller promises it is writable.
        unsafe { out.write(0) };
        // SAFETY: the caller's promise: NULL or an open library.
        let library = unsafe { library.as_ref() }.ok_or_else(|| null_argument("library"))?;
        // SAFETY: the caller's promise for `shader`; it is read only during this call.
        let shader = unsafe { text(shader, "shader") }?;
        let count = library
            .inner
            .variants(shader)
            .map_err(lookup_failure)?
            .len();
        // SAFETY: as above.
        unsafe { out.write(count) };
        Ok(())
    })
}

/// Looks up the variant of `shader`'s `pass` with the `keyword_count` keywords at
/// `keywords` (any order, repeats allowed; `keywords` may be NULL when the count is 0) for
/// `target`, and stores it in `*out`. Every string must be UTF-8. A keyword the shader does
/// not declare is `KILN_ERR_UNKNOWN_KEYWORD`, never dropped. Safe to call from several
/// threads at once on one library.
///
/// # Safety
///
/// `library` is NULL or an open library; `shader`, `pass`, `target` and the first
/// `keyword_count` pointers at `keywords` are NULL or NUL-terminated strings; `keywords` is
/// NULL or points to `keyword_count` pointers; `out` is NULL or points to a writable
/// `KilnVariant`.
#[no_mangle]
pub unsafe extern "C" fn kiln_library_get(
    library: *const KilnLibrary,
    shader: *const c_char,
    pass: *const c_char,
    keywords: *const *const c_char,
    keyword_count: usize,
    target: *const c_char,
    out: *mut KilnVariant,
) -> KilnStatus {
    guard(|| {
        if out.is_null() {
            return Err(null_argument("out"));
        }
        // SAFETY: `out` is not NULL and the caller promises it is writable.
        unsafe { out.write(KilnVariant::EMPTY) };
        // SAFETY: the caller's promise: NULL or an open library.
        let library = unsafe { library.as_ref() }.ok_or_else(|| null_argument("library"))?;
        // SAFETY: the caller's promise for each string; each is read only during this call.
        let shader = unsafe { text(shader, "shader") }?;
        // SAFETY: as above.
        let pass = unsafe { text(pass, "pass") }?;
        // SAFETY: as above.
        let target = unsafe { text(target, "target") }?;
        let list: &[*const c_char] = if keyword_count == 0 {
            &[]
        } else if keywords.is_null() {
            return Err(null_argument("keywords"));
        } else {
            // SAFETY: not NULL, and the caller promises `keyword_count` pointers there,
            // unchanged during this call.
            unsafe { std::slice::from_raw_parts(keywords, keyword_count) }
        };
        // SAFETY: the caller's promise for each keyword pointer.
        let variant = unsafe {
            with_keywords(list, |keywords| {
                library
                    .inner
                    .get(shader, pass, keywords, target)
                    .map_err(lookup_failure)
            })
        }?;
        let mut digest = [0; 13];
        for (slot, byte) in digest.iter_mut().zip(variant.digest.bytes().take(12)) {
            *slot = byte as c_char;
        }
        let found = KilnVariant {
            bytes: variant.bytes.as_ptr(),
            len: variant.bytes.len(),
            reflection: variant.reflection.as_ptr(),
            reflection_len: variant.reflection.len(),
            digest,
        };
        // SAFETY: as above.
        unsafe { out.write(found) };
        Ok(())
    })
}

/// The message of the last failed kiln call on this thread (the Rust error's text, such as
/// ``unknown keyword `RAIN` for Lit/Forward: shader `Lit` declares [FOG;SKIN]``), or "" if
/// none failed yet. Never NULL. Valid until the next kiln call on this thread.
#[no_mangle]
pub extern "C" fn kiln_last_error() -> *const c_char {
    static EMPTY: &CStr = c"";
    catch_unwind(|| {
        LAST_ERROR
            .try_with(|cell| cell.try_borrow().map(|text| text.as_ptr()).ok())
            .ok()
            .flatten()
    })
    .ok()
    .flatten()
    .unwrap_or(EMPTY.as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last_error() -> String {
        // SAFETY: `kiln_last_error` returns a NUL-terminated string, valid until the next call.
        unsafe { CStr::from_ptr(kiln_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn a_panic_is_a_status_and_a_message() {
        let status = guard(|| panic!("boom {}", 7));
        assert_eq!(status, KilnStatus::KILN_ERR_PANIC);
        assert_eq!(last_error(), "kiln-runtime panicked: boom 7");
        let status = guard(|| std::panic::panic_any(42u8));
        assert_eq!(status, KilnStatus::KILN_ERR_PANIC);
        assert_eq!(last_error(), "kiln-runtime panicked: (no message)");
    }

    #[test]
    fn messages_are_per_thread_and_survive_success() {
        guard(|| Err((KilnStatus::KILN_ERR_IO, "here".into())));
        std::thread::spawn(|| {
            assert_eq!(last_error(), "");
            guard(|| Err((KilnStatus::KILN_ERR_IO, "there\0!".into())));
            assert_eq!(last_error(), "there\\0!");
        })
        .join()
        .unwrap();
        assert_eq!(guard(|| Ok(())), KilnStatus::KILN_OK);
        assert_eq!(last_error(), "here");
    }
}
