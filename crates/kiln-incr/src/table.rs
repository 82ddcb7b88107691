//! Append-only storage for memos and inputs: a paged vector whose slots never move, and
//! an open-addressing index from key to dense `u32` slot index that readers probe without
//! taking any lock.
//!
//! Slots are only ever added (under one insert lock per table) and are dropped with the
//! table, so a `&T` handed out under `&self` stays valid until the next `&mut self`.
//! Index tables replaced by a resize are retired, not freed, until `&mut self`
//! ([`KeyTable::release_retired`]), because a reader may still be probing the old one.

use std::alloc::{self, Layout};
use std::hash::{BuildHasher, Hash};
use std::marker::PhantomData;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

use parking_lot::Mutex;
use rustc_hash::FxBuildHasher;

/// log2 of the first page's length; page `p` holds `FIRST_PAGE << p` slots.
const FIRST_PAGE_BITS: u32 = 5;
/// Enough pages to address every `u32` index.
const PAGE_COUNT: usize = 28;

/// Where slot `index` lives: `(page, offset in page)`.
fn locate(index: u32) -> (usize, usize) {
    let biased = u64::from(index) + (1 << FIRST_PAGE_BITS);
    let top_bit = 63 - biased.leading_zeros();
    let page = (top_bit - FIRST_PAGE_BITS) as usize;
    let offset = (biased - (1u64 << top_bit)) as usize;
    (page, offset)
}

fn page_len(page: usize) -> usize {
    1usize << (FIRST_PAGE_BITS as usize + page)
}

/// A vector whose elements never move once pushed. Readers index it through `&self`
/// without locks; pushes must be serialized by the caller.
pub(crate) struct Pages<T> {
    pages: [AtomicPtr<T>; PAGE_COUNT],
    /// Number of initialized slots; every index below it is readable.
    len: AtomicU32,
    _owns: PhantomData<T>,
}

// SAFETY: `Pages` owns its `T`s (like `Vec<T>`); shared access hands out `&T` only.
unsafe impl<T: Send> Send for Pages<T> {}
// SAFETY: `&Pages<T>` gives out `&T` to many threads, and pushes (serialized by the owner's
// lock) move `T`s in from another thread.
unsafe impl<T: Send + Sync> Sync for Pages<T> {}

impl<T> Pages<T> {
    pub(crate) fn new() -> Self {
        Pages {
            pages: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            len: AtomicU32::new(0),
            _owns: PhantomData,
        }
    }

    pub(crate) fn len(&self) -> u32 {
        self.len.load(Ordering::Acquire)
    }

    /// The slot at `index`, if it has been pushed.
    #[inline]
    pub(crate) fn get(&self, index: u32) -> Option<&T> {
        if index >= self.len.load(Ordering::Acquire) {
            return None;
        }
        let (page, offset) = locate(index);
        let base = self.pages[page].load(Ordering::Acquire);
        // SAFETY: `index < len` and `len` is published (Release) after the slot was written
        // and its page allocated; slots are never moved or dropped before `self` is.
        Some(unsafe { &*base.add(offset) })
    }

    /// Mutable access to the slot at `index`; `&mut self` excludes every reader.
    pub(crate) fn get_mut(&mut self, index: u32) -> Option<&mut T> {
        if index >= *self.len.get_mut() {
            return None;
        }
        let (page, offset) = locate(index);
        let base = *self.pages[page].get_mut();
        // SAFETY: as in `get`, and `&mut self` guarantees exclusive access.
        Some(unsafe { &mut *base.add(offset) })
    }

    /// Appends `value`, returning its index.
    ///
    /// # Safety
    /// Calls to `push` must not run concurrently with each other (the owner serializes them
    /// with a lock). Concurrent `get`s are fine.
    pub(crate) unsafe fn push(&self, value: T) -> u32 {
        let index = self.len.load(Ordering::Relaxed);
        assert!(index < u32::MAX, "kiln-incr: more than u32::MAX keys in one query");
        let (page, offset) = locate(index);
        let mut base = self.pages[page].load(Ordering::Acquire);
        if base.is_null() {
            base = allocate_page::<T>(page_len(page));
            self.pages[page].store(base, Ordering::Release);
        }
        // SAFETY: the slot is inside the page, not yet initialized, and no reader looks at
        // it before `len` is published below.
        unsafe { base.add(offset).write(value) };
        self.len.store(index + 1, Ordering::Release);
        index
    }
}

fn allocate_page<T>(len: usize) -> *mut T {
    let layout = Layout::array::<T>(len).unwrap_or_else(|_| alloc::handle_alloc_error(Layout::new::<T>()));
    if layout.size() == 0 {
        return ptr::NonNull::<T>::dangling().as_ptr();
    }
    // SAFETY: the layout has a non-zero size.
    let base = unsafe { alloc::alloc(layout) }.cast::<T>();
    if base.is_null() {
        alloc::handle_alloc_error(layout);
    }
    base
}

impl<T> Drop for Pages<T> {
    fn drop(&mut self) {
        let len = *self.len.get_mut();
        for index in 0..len {
            let (page, offset) = locate(index);
            let base = *self.pages[page].get_mut();
            // SAFETY: every index below `len` was initialized exactly once.
            unsafe { ptr::drop_in_place(base.add(offset)) };
        }
        for (page, slot) in self.pages.iter_mut().enumerate() {
            let base = *slot.get_mut();
            if base.is_null() {
                continue;
            }
            let layout = Layout::array::<T>(page_len(page)).unwrap_or_else(|_| Layout::new::<T>());
            if layout.size() != 0 {
                // SAFETY: allocated by `allocate_page` with this same layout.
                unsafe { alloc::dealloc(base.cast(), layout) };
            }
        }
    }
}

/// A slot that knows its own key, so the index needs to store only slot numbers.
pub(crate) trait Keyed {
    /// The key type.
    type Key: Eq + Hash;
    /// The slot's key.
    fn key(&self) -> &Self::Key;
}

/// Open-addressing table of `slot index + 1` (0 = empty), at most half full.
struct IndexTable {
    mask: usize,
    entries: Box<[AtomicU32]>,
}

impl IndexTable {
    fn with_capacity(capacity: usize) -> Box<IndexTable> {
        Box::new(IndexTable {
            mask: capacity - 1,
            entries: (0..capacity).map(|_| AtomicU32::new(0)).collect(),
        })
    }

    fn insert(&self, hash: u64, index: u32) {
        let mut position = hash as usize & self.mask;
        while self.entries[position].load(Ordering::Relaxed) != 0 {
            position = (position + 1) & self.mask;
        }
        self.entries[position].store(index + 1, Ordering::Release);
    }
}

struct InsertState {
    /// The table readers currently probe (also published in `KeyTable::index`).
    current: Box<IndexTable>,
    /// Tables replaced by a resize, kept alive for readers still probing them.
    retired: Vec<Box<IndexTable>>,
}

/// Slots of type `S` addressed by key (interning: key -> dense `u32`) and by index.
pub(crate) struct KeyTable<S: Keyed> {
    slots: Pages<S>,
    index: AtomicPtr<IndexTable>,
    insert: Mutex<InsertState>,
}

impl<S: Keyed> KeyTable<S> {
    pub(crate) fn new() -> Self {
        let mut current = IndexTable::with_capacity(16);
        let index = AtomicPtr::new(&mut *current as *mut IndexTable);
        KeyTable {
            slots: Pages::new(),
            index,
            insert: Mutex::new(InsertState {
                current,
                retired: Vec::new(),
            }),
        }
    }

    #[inline]
    pub(crate) fn hash(key: &S::Key) -> u64 {
        FxBuildHasher.hash_one(key)
    }

    /// Number of slots.
    pub(crate) fn len(&self) -> u32 {
        self.slots.len()
    }

    #[inline]
    pub(crate) fn get(&self, index: u32) -> Option<&S> {
        self.slots.get(index)
    }

    pub(crate) fn get_mut(&mut self, index: u32) -> Option<&mut S> {
        self.slots.get_mut(index)
    }

    /// The index of `key`, if interned. Lock-free.
    #[inline]
    pub(crate) fn lookup(&self, key: &S::Key, hash: u64) -> Option<u32> {
        // SAFETY: the published table is never freed while `&self` lives (retired tables
        // are freed only through `&mut self`).
        let table = unsafe { &*self.index.load(Ordering::Acquire) };
        let mut position = hash as usize & table.mask;
        loop {
            let entry = table.entries[position].load(Ordering::Acquire);
            if entry == 0 {
                return None;
            }
            let index = entry - 1;
            if self.slots.get(index).is_some_and(|slot| slot.key() == key) {
                return Some(index);
            }
            position = (position + 1) & table.mask;
        }
    }

    /// The index of `key`, creating its slot with `make` when absent.
    #[inline]
    pub(crate) fn intern(&self, key: &S::Key, make: impl FnOnce(u32) -> S) -> u32 {
        let hash = Self::hash(key);
        match self.lookup(key, hash) {
            Some(index) => index,
            None => self.insert_slow(key, hash, make),
        }
    }

    #[cold]
    fn insert_slow(&self, key: &S::Key, hash: u64, make: impl FnOnce(u32) -> S) -> u32 {
        let mut state = self.insert.lock();
        if let Some(index) = self.lookup(key, hash) {
            return index;
        }
        let slot = make(self.slots.len());
        // SAFETY: pushes happen only here, under `self.insert`.
        let index = unsafe { self.slots.push(slot) };
        let entries = index as usize + 1;
        if entries * 2 > state.current.entries.len() {
            let grown = IndexTable::with_capacity(state.current.entries.len() * 2);
            for existing in 0..index {
                if let Some(slot) = self.slots.get(existing) {
                    grown.insert(Self::hash(slot.key()), existing);
                }
            }
            let mut grown = grown;
            self.index.store(&mut *grown as *mut IndexTable, Ordering::Release);
            let old = std::mem::replace(&mut state.current, grown);
            state.retired.push(old);
        }
        state.current.insert(hash, index);
        index
    }

    /// Frees index tables replaced by resizes; nobody can be probing them under `&mut`.
    pub(crate) fn release_retired(&mut self) {
        self.insert.get_mut().retired.clear();
    }

    /// Every slot, mutably (for boundary work such as eviction).
    pub(crate) fn for_each_mut(&mut self, mut visit: impl FnMut(u32, &mut S)) {
        let len = self.slots.len();
        for index in 0..len {
            if let Some(slot) = self.slots.get_mut(index) {
                visit(index, slot);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Named(String);
    impl Keyed for Named {
        type Key = String;
        fn key(&self) -> &String {
            &self.0
        }
    }

    #[test]
    fn locate_covers_pages_without_gaps() {
        assert_eq!(locate(0), (0, 0));
        assert_eq!(locate(31), (0, 31));
        assert_eq!(locate(32), (1, 0));
        assert_eq!(locate(95), (1, 63));
        assert_eq!(locate(96), (2, 0));
        assert_eq!(locate(u32::MAX).0, PAGE_COUNT - 1);
    }

    #[test]
    fn interning_is_stable_across_resizes() {
        let table = KeyTable::<Named>::new();
        let indices: Vec<u32> = (0..5000)
            .map(|n| table.intern(&n.to_string(), |_| Named(n.to_string())))
            .collect();
        for (n, index) in indices.iter().enumerate() {
            assert_eq!(*index, n as u32);
            assert_eq!(table.intern(&n.to_string(), |_| unreachable!()), *index);
            assert_eq!(table.get(*index).map(|slot| slot.0.clone()), Some(n.to_string()));
        }
        assert_eq!(table.lookup(&"absent".to_string(), KeyTable::<Named>::hash(&"absent".to_string())), None);
    }

    #[test]
    fn concurrent_interning_gives_one_index_per_key() {
        let table = KeyTable::<Named>::new();
        let results: Vec<Vec<u32>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        (0..2000)
                            .map(|n| table.intern(&n.to_string(), |_| Named(n.to_string())))
                            .collect::<Vec<u32>>()
                    })
                })
                .collect();
            handles.into_iter().map(|handle| handle.join().unwrap()).collect()
        });
        assert_eq!(table.len(), 2000);
        for other in &results[1..] {
            assert_eq!(other, &results[0]);
        }
    }
}
