//! How many bytes an artifact holds, for the cache's byte capacity.

use std::sync::Arc;

/// The approximate number of bytes an artifact keeps alive.
///
/// Used only to keep the cache within its capacity; it need not be exact, but it should
/// grow with the artifact (heap bytes, not `size_of`).
pub trait Weigh {
    /// The artifact's weight in bytes.
    fn weigh(&self) -> u64;
}

impl Weigh for [u8] {
    fn weigh(&self) -> u64 {
        self.len() as u64
    }
}

impl Weigh for str {
    fn weigh(&self) -> u64 {
        self.len() as u64
    }
}

impl Weigh for Vec<u8> {
    fn weigh(&self) -> u64 {
        self.len() as u64
    }
}

impl Weigh for String {
    fn weigh(&self) -> u64 {
        self.len() as u64
    }
}

impl<T: Weigh + ?Sized> Weigh for Box<T> {
    fn weigh(&self) -> u64 {
        (**self).weigh()
    }
}

impl<T: Weigh + ?Sized> Weigh for Arc<T> {
    fn weigh(&self) -> u64 {
        (**self).weigh()
    }
}
