//! Helpers shared by integration tests (each test binary uses what it needs).
#![allow(dead_code)]

pub mod glslang;
