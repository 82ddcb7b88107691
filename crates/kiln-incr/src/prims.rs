//! The synchronization primitives of the claim protocol (`sync.rs`): `parking_lot` and
//! `std` in normal builds, `loom`'s models in tests under `--cfg loom`, where the protocol is
//! model-checked (see the `loom_model` tests in `sync.rs`).

#[cfg(not(all(loom, test)))]
mod imp {
    pub(crate) use parking_lot::{Condvar, Mutex, MutexGuard};
    pub(crate) use std::sync::Arc;

    /// Blocks on `condvar`, releasing `guard` meanwhile.
    #[inline]
    pub(crate) fn wait<'a, T>(
        condvar: &Condvar,
        mut guard: MutexGuard<'a, T>,
    ) -> MutexGuard<'a, T> {
        condvar.wait(&mut guard);
        guard
    }
}

#[cfg(all(loom, test))]
mod imp {
    pub(crate) use loom::sync::{Arc, Condvar, MutexGuard};
    use std::sync::PoisonError;

    /// `loom`'s mutex with `parking_lot`'s signature (no poisoning).
    #[derive(Debug)]
    pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub(crate) fn new(value: T) -> Self {
            Mutex(loom::sync::Mutex::new(value))
        }

        pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock().unwrap_or_else(PoisonError::into_inner)
        }
    }

    /// Blocks on `condvar`, releasing `guard` meanwhile.
    pub(crate) fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        condvar.wait(guard).unwrap_or_else(PoisonError::into_inner)
    }
}

pub(crate) use imp::*;
