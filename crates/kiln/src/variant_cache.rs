//! The variant cache.
