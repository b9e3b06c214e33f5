//! The minimal ACL rule the topology tests check (`leasehold-testkit`'s) is the one
//! `docs/topologies.md` prints. A check of the workspace's docs, so it lives here and not
//! in the published testkit, whose package has no docs/ directory.

use leasehold_testkit::minimal_acl_rule;

#[test]
fn the_documented_rule_is_the_tested_one() {
    let docs = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/topologies.md"),
    )
    .expect("docs/topologies.md");
    assert!(
        docs.contains(&minimal_acl_rule()),
        "docs/topologies.md must print the rule the topology tests check: {}",
        minimal_acl_rule()
    );
}
