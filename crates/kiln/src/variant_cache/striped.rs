//! A reader-striped read-write lock: readers lock only their thread's stripe, writers lock
//! every stripe.
//!
//! A plain read-write lock makes every reader write the same lock word, so two threads that
//! only read still pass that cache line back and forth on every access (which is why hits
//! on one shared lock get slower, not faster, on two threads). Here each thread reads through
//! a stripe of its own, on its own cache line, with its own hit counter beside it: hits on
//! different threads share no written line. Writers (inserts, invalidations: the rare path)
//! pay for it by taking all `STRIPES` locks, always in the same order.

use std::cell::{Cell, UnsafeCell};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Stripes per lock: more than the threads that usually hit one cache at once.
const STRIPES: usize = 16;

/// A value guarded by `STRIPES` read-write locks.
pub(super) struct Striped<T> {
    stripes: [Stripe; STRIPES],
    value: UnsafeCell<T>,
}

/// One thread's (or a few threads') lock and hit counter, alone on its cache lines.
#[repr(align(128))]
#[derive(Default)]
pub(super) struct Stripe {
    lock: RwLock<()>,
    /// Cache hits counted by readers of this stripe.
    pub(super) hits: AtomicU64,
}

// SAFETY: the value is only reached through `ReadGuard` (shared access while one stripe is
// read-locked) or `WriteGuard` (exclusive access while every stripe is write-locked), so it
// is shared between threads exactly like a `RwLock<T>`'s, and has the same requirements.
unsafe impl<T: Send> Send for Striped<T> {}
// SAFETY: as above: `&Striped<T>` hands out `&T` to several threads (needs `T: Sync`) and
// `&mut T` to one thread at a time (needs `T: Send`).
unsafe impl<T: Send + Sync> Sync for Striped<T> {}

impl<T> Striped<T> {
    pub(super) fn new(value: T) -> Self {
        Striped {
            stripes: Default::default(),
            value: UnsafeCell::new(value),
        }
    }

    /// Shared access, locking only this thread's stripe.
    #[inline]
    pub(super) fn read(&self) -> ReadGuard<'_, T> {
        let stripe = &self.stripes[this_threads_stripe()];
        let lock = stripe.lock.read();
        // SAFETY: a writer holds every stripe's write lock, ours included, so none can be
        // active while we hold our stripe's read lock: the value is not mutated while this
        // shared reference lives (it cannot outlive `lock`, see `ReadGuard`).
        let value = unsafe { &*self.value.get() };
        ReadGuard {
            _lock: lock,
            stripe,
            value,
        }
    }

    /// Exclusive access, locking every stripe in order.
    pub(super) fn write(&self) -> WriteGuard<'_, T> {
        let locks = std::array::from_fn(|i| self.stripes[i].lock.write());
        // SAFETY: with every stripe write-locked there is no reader (each holds a stripe's
        // read lock) and no other writer; the reference cannot outlive `locks`.
        let value = unsafe { &mut *self.value.get() };
        WriteGuard {
            _locks: locks,
            value,
        }
    }

    /// Every stripe's counters.
    pub(super) fn stripes(&self) -> &[Stripe] {
        &self.stripes
    }
}

/// Shared access to the value through one stripe.
pub(super) struct ReadGuard<'a, T> {
    _lock: RwLockReadGuard<'a, ()>,
    stripe: &'a Stripe,
    value: &'a T,
}

impl<T> ReadGuard<'_, T> {
    /// Counts a hit on this reader's stripe.
    #[inline]
    pub(super) fn count_hit(&self) {
        self.stripe.hits.fetch_add(1, Relaxed);
    }
}

impl<T> Deref for ReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.value
    }
}

/// Exclusive access to the value.
pub(super) struct WriteGuard<'a, T> {
    _locks: [RwLockWriteGuard<'a, ()>; STRIPES],
    value: &'a mut T,
}

impl<T> Deref for WriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.value
    }
}

impl<T> DerefMut for WriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.value
    }
}

/// Threads take stripes round robin, so the first `STRIPES` threads never share one.
#[inline]
fn this_threads_stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    STRIPE
        .try_with(|stripe| {
            if stripe.get() == usize::MAX {
                stripe.set(NEXT.fetch_add(1, Relaxed) % STRIPES);
            }
            stripe.get()
        })
        // During thread teardown: any stripe is correct, only slower.
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_on_many_threads_and_a_writer_see_consistent_values() {
        let lock = Striped::new((0u64, 0u64));
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..1_000 {
                        let pair = lock.read();
                        assert_eq!(pair.0, pair.1);
                    }
                });
            }
            scope.spawn(|| {
                for _ in 0..1_000 {
                    let mut pair = lock.write();
                    pair.0 += 1;
                    pair.1 += 1;
                }
            });
        });
        assert_eq!(*lock.read(), (1_000, 1_000));
    }
}
