//! Canonical variant keys.
