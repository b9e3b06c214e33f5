//! Every table of figures in the README and the docs is generated from a committed
//! benchmark report (`docs/bench/*.json`): a figure and its source cannot drift apart.
//! After re-running `docs/bench/run.sh`, `leasehold-bench tables --write` updates them.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn the_docs_tables_match_the_committed_reports() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(env!("CARGO_BIN_EXE_leasehold-bench"))
        .args(["tables", "--root"])
        .arg(&root)
        .output()
        .expect("runs leasehold-bench tables");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
