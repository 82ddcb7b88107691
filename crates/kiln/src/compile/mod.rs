//! Compilation by naga.
