//! The preprocessor.
