//! The project manifest.
