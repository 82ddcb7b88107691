//! The Slang library's C ABI, as declared in `slang.h` and `slang-deprecated.h`, and the two
//! COM-style objects kiln hands to it (a file system serving from a map, and its blobs).
//!
//! Slang's interfaces are C++ classes with virtual methods: on every platform kiln runs on,
//! an object is a pointer to a vtable pointer, and a method is a function taking the object
//! first, with the `SLANG_MCALL` calling convention (`__stdcall`, which is the platform's
//! C convention on 64-bit targets: Rust's `extern "system"`). The vtable order is the
//! declaration order, base interface first: `ISlangUnknown` (queryInterface, addRef,
//! release), `ISlangCastable` (castAs), `ISlangFileSystem` (loadFile); `ISlangBlob` is
//! `ISlangUnknown` plus getBufferPointer and getBufferSize.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use rustc_hash::FxHashMap;

/// `SlangResult` values (`SLANG_MAKE_ERROR(facility, code)`): the high bit, the facility
/// shifted by 16, the code.
pub(super) const SLANG_OK: i32 = 0;
/// `SLANG_E_NO_INTERFACE`: facility `WIN_GENERAL` (0), code 0x4002.
const SLANG_E_NO_INTERFACE: i32 = 0x8000_4002_u32 as i32;
/// `SLANG_E_NOT_FOUND`: facility `CORE` (0x200), code 5.
const SLANG_E_NOT_FOUND: i32 = 0x8200_0005_u32 as i32;
/// `SLANG_E_INVALID_ARG`: facility `WIN_API` (7), code 0x57.
const SLANG_E_INVALID_ARG: i32 = 0x8007_0057_u32 as i32;

/// `SLANG_SOURCE_LANGUAGE_SLANG`.
pub(super) const SOURCE_LANGUAGE_SLANG: c_int = 1;
/// `SLANG_MATRIX_LAYOUT_ROW_MAJOR` and `SLANG_MATRIX_LAYOUT_COLUMN_MAJOR`.
pub(super) const MATRIX_LAYOUT_ROW_MAJOR: c_uint = 1;
pub(super) const MATRIX_LAYOUT_COLUMN_MAJOR: c_uint = 2;
/// `SLANG_PROFILE_UNKNOWN`: what `spFindProfile` answers for a name it does not know.
pub(super) const PROFILE_UNKNOWN: c_uint = 0;

/// `SlangUUID`: a COM GUID.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct SlangUuid {
    data1: u32,
    data2: u16,
    data3: u16,
    data4: [u8; 8],
}

const fn uuid(data1: u32, data2: u16, data3: u16, data4: [u8; 8]) -> SlangUuid {
    SlangUuid {
        data1,
        data2,
        data3,
        data4,
    }
}

/// The interface ids, from the `SLANG_COM_INTERFACE` lines of `slang.h`.
const IID_UNKNOWN: SlangUuid = uuid(0, 0, 0, [0xC0, 0, 0, 0, 0, 0, 0, 0x46]);
const IID_CASTABLE: SlangUuid = uuid(
    0x87ed_e0e1,
    0x4852,
    0x44b0,
    [0x8b, 0xf2, 0xcb, 0x31, 0x87, 0x4d, 0xe2, 0x39],
);
const IID_BLOB: SlangUuid = uuid(
    0x8BA5_FB08,
    0x5195,
    0x40e2,
    [0xAC, 0x58, 0x0D, 0x98, 0x9C, 0x3A, 0x01, 0x02],
);
const IID_FILE_SYSTEM: SlangUuid = uuid(
    0x003A_09FC,
    0x3A4D,
    0x4BA0,
    [0xAD, 0x60, 0x1F, 0xD8, 0x63, 0xA9, 0x15, 0xAB],
);

/// The functions kiln calls, looked up once when the library is loaded. Each pointer stays
/// valid as long as `_library` is loaded, which is as long as this value lives.
pub(super) struct Api {
    pub(super) path: PathBuf,
    pub(super) create_session: unsafe extern "C" fn(*const c_char) -> *mut c_void,
    pub(super) destroy_session: unsafe extern "C" fn(*mut c_void),
    pub(super) create_request: unsafe extern "C" fn(*mut c_void) -> *mut c_void,
    pub(super) destroy_request: unsafe extern "C" fn(*mut c_void),
    pub(super) set_file_system: unsafe extern "C" fn(*mut c_void, *mut c_void),
    pub(super) add_code_gen_target: unsafe extern "C" fn(*mut c_void, c_int) -> c_int,
    pub(super) set_target_profile: unsafe extern "C" fn(*mut c_void, c_int, c_uint),
    pub(super) find_profile: unsafe extern "C" fn(*mut c_void, *const c_char) -> c_uint,
    pub(super) set_matrix_layout_mode: unsafe extern "C" fn(*mut c_void, c_uint),
    pub(super) set_optimization_level: unsafe extern "C" fn(*mut c_void, c_uint),
    pub(super) add_preprocessor_define:
        unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char),
    pub(super) add_search_path: unsafe extern "C" fn(*mut c_void, *const c_char),
    pub(super) add_translation_unit:
        unsafe extern "C" fn(*mut c_void, c_int, *const c_char) -> c_int,
    pub(super) add_translation_unit_source_string:
        unsafe extern "C" fn(*mut c_void, c_int, *const c_char, *const c_char),
    pub(super) add_entry_point:
        unsafe extern "C" fn(*mut c_void, c_int, *const c_char, c_uint) -> c_int,
    pub(super) compile: unsafe extern "C" fn(*mut c_void) -> i32,
    pub(super) get_diagnostic_output: unsafe extern "C" fn(*mut c_void) -> *const c_char,
    pub(super) get_entry_point_code_blob:
        unsafe extern "C" fn(*mut c_void, c_int, c_int, *mut *mut c_void) -> i32,
    pub(super) get_dependency_file_count: unsafe extern "C" fn(*mut c_void) -> c_int,
    pub(super) get_dependency_file_path: unsafe extern "C" fn(*mut c_void, c_int) -> *const c_char,
    pub(super) get_build_tag_string: unsafe extern "C" fn() -> *const c_char,
    _library: libloading::Library,
}

impl Api {
    /// Loads the library at `path` and looks up every function kiln calls.
    pub(super) fn load(path: &Path) -> Result<Self, String> {
        // SAFETY: loading Slang runs its static initializers, which only set up its own
        // state; kiln loads no other library under the same name.
        let library = unsafe { libloading::Library::new(path) }
            .map_err(|e| format!("cannot load {}: {e}", path.display()))?;
        macro_rules! symbol {
            ($name:literal) => {{
                // SAFETY: the type written at each field is the declaration in slang.h.
                let symbol = unsafe { library.get(concat!($name, "\0").as_bytes()) }
                    .map_err(|e| format!("{} lacks {}: {e}", path.display(), $name))?;
                *symbol
            }};
        }
        Ok(Self {
            path: path.to_path_buf(),
            create_session: symbol!("spCreateSession"),
            destroy_session: symbol!("spDestroySession"),
            create_request: symbol!("spCreateCompileRequest"),
            destroy_request: symbol!("spDestroyCompileRequest"),
            set_file_system: symbol!("spSetFileSystem"),
            add_code_gen_target: symbol!("spAddCodeGenTarget"),
            set_target_profile: symbol!("spSetTargetProfile"),
            find_profile: symbol!("spFindProfile"),
            set_matrix_layout_mode: symbol!("spSetMatrixLayoutMode"),
            set_optimization_level: symbol!("spSetOptimizationLevel"),
            add_preprocessor_define: symbol!("spAddPreprocessorDefine"),
            add_search_path: symbol!("spAddSearchPath"),
            add_translation_unit: symbol!("spAddTranslationUnit"),
            add_translation_unit_source_string: symbol!("spAddTranslationUnitSourceString"),
            add_entry_point: symbol!("spAddEntryPoint"),
            compile: symbol!("spCompile"),
            get_diagnostic_output: symbol!("spGetDiagnosticOutput"),
            get_entry_point_code_blob: symbol!("spGetEntryPointCodeBlob"),
            get_dependency_file_count: symbol!("spGetDependencyFileCount"),
            get_dependency_file_path: symbol!("spGetDependencyFilePath"),
            get_build_tag_string: symbol!("spGetBuildTagString"),
            _library: library,
        })
    }
}

/// A C string Slang returned, copied (lossily: Slang writes UTF-8); empty for null.
///
/// # Safety
/// `ptr` is null or a NUL-terminated string that stays valid during the call.
pub(super) unsafe fn string_from(ptr: *const c_char) -> String {
    if ptr.is_null() {
        return String::new();
    }
    // SAFETY: the caller's contract.
    unsafe { CStr::from_ptr(ptr) }
        .to_string_lossy()
        .into_owned()
}

/// The bytes of an `ISlangBlob` Slang returned, copied, and the blob released.
///
/// # Safety
/// `blob` is null or a live `ISlangBlob` the caller holds one reference to.
pub(super) unsafe fn take_blob(blob: *mut c_void) -> Vec<u8> {
    if blob.is_null() {
        return Vec::new();
    }
    #[repr(C)]
    struct BlobVtable {
        query_interface:
            unsafe extern "system" fn(*mut c_void, *const SlangUuid, *mut *mut c_void) -> i32,
        add_ref: unsafe extern "system" fn(*mut c_void) -> u32,
        release: unsafe extern "system" fn(*mut c_void) -> u32,
        get_buffer_pointer: unsafe extern "system" fn(*mut c_void) -> *const c_void,
        get_buffer_size: unsafe extern "system" fn(*mut c_void) -> usize,
    }
    // SAFETY: an ISlangBlob starts with its vtable pointer, laid out as above.
    unsafe {
        let vtable = &**(blob as *const *const BlobVtable);
        let data = (vtable.get_buffer_pointer)(blob) as *const u8;
        let size = (vtable.get_buffer_size)(blob);
        let bytes = if data.is_null() || size == 0 {
            Vec::new()
        } else {
            std::slice::from_raw_parts(data, size).to_vec()
        };
        (vtable.release)(blob);
        bytes
    }
}

/// One `loadFile` call: the path as Slang passed it, and whether the map served it.
#[derive(Clone, Debug)]
pub(super) struct Load {
    pub(super) path: String,
    pub(super) served: bool,
}

/// An `ISlangFileSystem` that serves only the files of a request, and records every path
/// Slang asks for. Reference counted as COM objects are: Slang adds a reference while a
/// compile request holds it, kiln holds one through [`MapFileSystem`].
#[repr(C)]
struct FileSystemObject {
    vtable: &'static FileSystemVtable,
    references: AtomicU32,
    /// Keyed by [`super::normalize_path`] of the request's paths.
    files: FxHashMap<String, Arc<str>>,
    loads: Mutex<Vec<Load>>,
}

#[repr(C)]
struct FileSystemVtable {
    query_interface:
        unsafe extern "system" fn(*mut FileSystemObject, *const SlangUuid, *mut *mut c_void) -> i32,
    add_ref: unsafe extern "system" fn(*mut FileSystemObject) -> u32,
    release: unsafe extern "system" fn(*mut FileSystemObject) -> u32,
    cast_as: unsafe extern "system" fn(*mut FileSystemObject, *const SlangUuid) -> *mut c_void,
    load_file:
        unsafe extern "system" fn(*mut FileSystemObject, *const c_char, *mut *mut c_void) -> i32,
}

static FILE_SYSTEM_VTABLE: FileSystemVtable = FileSystemVtable {
    query_interface: fs_query_interface,
    add_ref: fs_add_ref,
    release: fs_release,
    cast_as: fs_cast_as,
    load_file: fs_load_file,
};

/// kiln's reference to a [`FileSystemObject`]; released on drop.
pub(super) struct MapFileSystem(*mut FileSystemObject);

impl MapFileSystem {
    /// A file system serving `files` (already keyed by normalized path).
    pub(super) fn new(files: FxHashMap<String, Arc<str>>) -> Self {
        Self(Box::into_raw(Box::new(FileSystemObject {
            vtable: &FILE_SYSTEM_VTABLE,
            references: AtomicU32::new(1),
            files,
            loads: Mutex::new(Vec::new()),
        })))
    }

    /// The pointer to hand to `spSetFileSystem` (which adds its own reference).
    pub(super) fn as_ptr(&self) -> *mut c_void {
        self.0.cast()
    }

    /// Every `loadFile` call so far, in order.
    pub(super) fn loads(&self) -> Vec<Load> {
        // SAFETY: kiln's reference keeps the object alive.
        unsafe { (*self.0).loads.lock().clone() }
    }
}

impl Drop for MapFileSystem {
    fn drop(&mut self) {
        // SAFETY: releases kiln's own reference, taken in `new`.
        unsafe {
            fs_release(self.0);
        }
    }
}

fn interface_is(iid: *const SlangUuid, accepted: &[SlangUuid]) -> bool {
    // SAFETY: Slang passes a valid GUID reference (a C++ `const SlangUUID&`).
    !iid.is_null() && accepted.contains(unsafe { &*iid })
}

unsafe extern "system" fn fs_query_interface(
    this: *mut FileSystemObject,
    iid: *const SlangUuid,
    out: *mut *mut c_void,
) -> i32 {
    if out.is_null() {
        return SLANG_E_INVALID_ARG;
    }
    // Not ISlangFileSystemExt: without it, Slang works out paths itself (and we see the
    // paths it combined) and never asks for a file's identity or kind from the disk.
    if interface_is(iid, &[IID_UNKNOWN, IID_CASTABLE, IID_FILE_SYSTEM]) {
        // SAFETY: `this` is live (the caller holds a reference) and `out` is writable.
        unsafe {
            fs_add_ref(this);
            *out = this.cast();
        }
        SLANG_OK
    } else {
        // SAFETY: `out` is writable.
        unsafe { *out = std::ptr::null_mut() };
        SLANG_E_NO_INTERFACE
    }
}

unsafe extern "system" fn fs_add_ref(this: *mut FileSystemObject) -> u32 {
    // SAFETY: the caller holds a reference, so the object is live.
    unsafe { (*this).references.fetch_add(1, Ordering::Relaxed) + 1 }
}

unsafe extern "system" fn fs_release(this: *mut FileSystemObject) -> u32 {
    // SAFETY: the caller gives up a reference it held, so the object is live until the
    // count reaches zero, and then nobody else can reach it.
    unsafe {
        let left = (*this).references.fetch_sub(1, Ordering::AcqRel) - 1;
        if left == 0 {
            drop(Box::from_raw(this));
        }
        left
    }
}

unsafe extern "system" fn fs_cast_as(
    this: *mut FileSystemObject,
    iid: *const SlangUuid,
) -> *mut c_void {
    if interface_is(iid, &[IID_UNKNOWN, IID_CASTABLE, IID_FILE_SYSTEM]) {
        this.cast()
    } else {
        std::ptr::null_mut()
    }
}

unsafe extern "system" fn fs_load_file(
    this: *mut FileSystemObject,
    path: *const c_char,
    out: *mut *mut c_void,
) -> i32 {
    if path.is_null() || out.is_null() {
        return SLANG_E_INVALID_ARG;
    }
    // SAFETY: Slang passes a NUL-terminated path and a writable out pointer; `this` is live.
    unsafe {
        *out = std::ptr::null_mut();
        let this = &*this;
        let path = CStr::from_ptr(path).to_string_lossy().into_owned();
        let content = super::normalize_path(&path).and_then(|key| this.files.get(&key).cloned());
        let served = content.is_some();
        this.loads.lock().push(Load { path, served });
        match content {
            Some(content) => {
                *out = Blob::new(content).cast();
                SLANG_OK
            }
            None => SLANG_E_NOT_FOUND,
        }
    }
}

/// An `ISlangBlob` over a file's content (kiln's own: `slang_createBlob` refuses empty
/// files, and sharing the `Arc` avoids a copy).
#[repr(C)]
struct Blob {
    vtable: &'static BlobVtable,
    references: AtomicU32,
    content: Arc<str>,
}

#[repr(C)]
struct BlobVtable {
    query_interface:
        unsafe extern "system" fn(*mut Blob, *const SlangUuid, *mut *mut c_void) -> i32,
    add_ref: unsafe extern "system" fn(*mut Blob) -> u32,
    release: unsafe extern "system" fn(*mut Blob) -> u32,
    get_buffer_pointer: unsafe extern "system" fn(*mut Blob) -> *const c_void,
    get_buffer_size: unsafe extern "system" fn(*mut Blob) -> usize,
}

static BLOB_VTABLE: BlobVtable = BlobVtable {
    query_interface: blob_query_interface,
    add_ref: blob_add_ref,
    release: blob_release,
    get_buffer_pointer: blob_pointer,
    get_buffer_size: blob_size,
};

impl Blob {
    /// A new blob with one reference, which the caller passes on to Slang.
    fn new(content: Arc<str>) -> *mut Blob {
        Box::into_raw(Box::new(Blob {
            vtable: &BLOB_VTABLE,
            references: AtomicU32::new(1),
            content,
        }))
    }
}

unsafe extern "system" fn blob_query_interface(
    this: *mut Blob,
    iid: *const SlangUuid,
    out: *mut *mut c_void,
) -> i32 {
    if out.is_null() {
        return SLANG_E_INVALID_ARG;
    }
    if interface_is(iid, &[IID_UNKNOWN, IID_BLOB]) {
        // SAFETY: `this` is live (the caller holds a reference) and `out` is writable.
        unsafe {
            blob_add_ref(this);
            *out = this.cast();
        }
        SLANG_OK
    } else {
        // SAFETY: `out` is writable.
        unsafe { *out = std::ptr::null_mut() };
        SLANG_E_NO_INTERFACE
    }
}

unsafe extern "system" fn blob_add_ref(this: *mut Blob) -> u32 {
    // SAFETY: the caller holds a reference.
    unsafe { (*this).references.fetch_add(1, Ordering::Relaxed) + 1 }
}

unsafe extern "system" fn blob_release(this: *mut Blob) -> u32 {
    // SAFETY: as `fs_release`.
    unsafe {
        let left = (*this).references.fetch_sub(1, Ordering::AcqRel) - 1;
        if left == 0 {
            drop(Box::from_raw(this));
        }
        left
    }
}

unsafe extern "system" fn blob_pointer(this: *mut Blob) -> *const c_void {
    // SAFETY: the caller holds a reference.
    unsafe { (&*this).content.as_ptr().cast() }
}

unsafe extern "system" fn blob_size(this: *mut Blob) -> usize {
    // SAFETY: the caller holds a reference.
    unsafe { (&*this).content.len() }
}
