//! Runnable examples for Leasehold; see `examples/README.md`.
