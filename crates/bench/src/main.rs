//! The Leasehold benchmark binary (scenarios land in the next commits).

fn main() {}
