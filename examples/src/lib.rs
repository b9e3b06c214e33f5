//! Runnable examples for Leasehold; see `examples/README.md`.
//!
//! This crate also compiles the Rust blocks of the workspace README (below) and of every
//! `docs/*.md` file as doctests, so what the documentation shows keeps compiling.
#![doc = include_str!("../../README.md")]

/// The code blocks of `docs/*.md`, as doctests (only built by `cargo test`).
#[cfg(doctest)]
pub mod docs {
    // `leasehold-partitions`' README (its crates.io page; its crate docs are its own).
    #[doc = include_str!("../../crates/partitions/README.md")]
    pub struct PartitionsReadme;
    #[doc = include_str!("../../docs/benchmarks.md")]
    pub struct Benchmarks;
    #[doc = include_str!("../../docs/election.md")]
    pub struct Election;
    #[doc = include_str!("../../docs/fencing.md")]
    pub struct Fencing;
    #[doc = include_str!("../../docs/guarantees.md")]
    pub struct Guarantees;
    #[doc = include_str!("../../docs/key-layout.md")]
    pub struct KeyLayout;
    #[doc = include_str!("../../docs/operations.md")]
    pub struct Operations;
    #[doc = include_str!("../../docs/partitions.md")]
    pub struct Partitions;
    #[doc = include_str!("../../docs/partitions-reference.md")]
    pub struct PartitionsReference;
    #[doc = include_str!("../../docs/python.md")]
    pub struct Python;
    #[doc = include_str!("../../docs/glossary.md")]
    pub struct Glossary;
    #[doc = include_str!("../../docs/recipes.md")]
    pub struct Recipes;
    #[doc = include_str!("../../docs/topologies.md")]
    pub struct Topologies;
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Every `docs/*.md` file is included above, so its Rust blocks are doctests.
    #[test]
    fn every_doc_file_is_compiled_as_doctests() {
        let lib = include_str!("lib.rs");
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
        let mut seen = 0;
        for entry in std::fs::read_dir(&docs).expect("the docs directory") {
            let name = entry.expect("a docs entry").file_name();
            let name = name.to_string_lossy();
            if name.ends_with(".md") {
                seen += 1;
                let include = format!("include_str!(\"../../docs/{name}\")");
                assert!(
                    lib.contains(&include),
                    "docs/{name} is not included in lib.rs"
                );
            }
        }
        assert!(seen >= 8, "found only {seen} docs/*.md files");
    }

    /// No Rust block is left out of the doctests: none is marked `ignore`.
    #[test]
    fn no_rust_block_is_ignored() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = vec![root.join("README.md")];
        for entry in std::fs::read_dir(root.join("docs")).expect("the docs directory") {
            let path = entry.expect("a docs entry").path();
            if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
        for file in files {
            let text = std::fs::read_to_string(&file).expect("a markdown file");
            for (i, line) in text.lines().enumerate() {
                let fence = line.trim_start();
                if let Some(info) = fence.strip_prefix("```") {
                    assert!(
                        !(info.starts_with("rust") && info.contains("ignore")),
                        "{}:{}: an ignored Rust block: {line}",
                        file.display(),
                        i + 1
                    );
                }
            }
        }
    }
}
