//! Runnable examples for Leasehold; see `examples/README.md`.
//!
//! This crate also compiles the workspace README's code blocks as doctests, so the
//! front page's examples stay true.
#![doc = include_str!("../../README.md")]
