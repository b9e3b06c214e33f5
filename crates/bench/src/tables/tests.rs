use super::*;

fn failover() -> Value {
    serde_json::json!({
        "scenario": "failover",
        "topology": "single",
        "lease_ms": 1000,
        "runs": [],
        "failover_ms": {"min": 600.0, "median": 800.0, "max": 990.0},
        "since_renew_ms": {"min": 1.0, "median": 100.0, "max": 300.0},
        "overshoot_ms": {"min": 1.5, "median": 2.5, "max": 3.75},
    })
}

fn benches_with(failover: Value) -> BTreeMap<String, Bench> {
    [(
        "failover".to_owned(),
        Bench {
            name: "failover".into(),
            command: "leasehold-bench failover --runs 10".into(),
            date: "2026-12-01".into(),
            reports: vec![serde_json::json!({"partial": 1}), failover],
        },
    )]
    .into()
}

fn benches() -> BTreeMap<String, Bench> {
    benches_with(failover())
}

#[test]
fn marked_tables_are_regenerated_from_the_last_report() {
    let doc = "intro\n<!-- table: failover -->\nstale\n<!-- /table -->\noutro\n";
    let out = render(doc, &benches()).expect("renders");
    assert!(
        out.starts_with("intro\n<!-- table: failover -->\n| | min |"),
        "{out}"
    );
    assert!(
        out.contains("| **overshoot after real expiry (ms)** | **1.50** | **2.50** | **3.75** |"),
        "{out}"
    );
    assert!(out.contains("From `leasehold-bench failover --runs 10` (2026-12-01)."));
    assert!(out.ends_with("<!-- /table -->\noutro\n"));
    assert_eq!(render(&out, &benches()).expect("renders"), out, "stable");
}

#[test]
fn a_missing_report_or_end_marker_is_an_error() {
    assert!(render("<!-- table: chaos -->\n<!-- /table -->", &benches()).is_err());
    assert!(render("<!-- table: failover -->\nno end", &benches()).is_err());
    assert!(render("<!-- table: nope -->\n<!-- /table -->", &benches()).is_err());
    assert_eq!(
        render("no tables\n", &benches()).expect("renders"),
        "no tables\n"
    );
}

#[test]
fn a_report_without_a_field_its_table_reads_names_its_file() {
    let mut renamed = failover();
    let overshoot = renamed["overshoot_ms"].take();
    renamed["overshoot"] = overshoot;
    renamed
        .as_object_mut()
        .expect("an object")
        .remove("overshoot_ms");
    let err = render(
        "<!-- table: failover -->\n<!-- /table -->",
        &benches_with(renamed),
    )
    .expect_err("a field gone");
    let err = err.to_string();
    assert!(err.contains("docs/bench/failover.json"), "{err}");
    assert!(err.contains("overshoot_ms"), "{err}");
}

#[test]
fn figures_keep_a_readable_precision() {
    assert_eq!(thousands(1_786_279), "1,786,279");
    assert_eq!(thousands(999), "999");
    assert_eq!(thousands(1000), "1,000");
    assert_eq!(fig(2.5), "2.50");
    assert_eq!(fig(1686.3283), "1686.3");
    assert_eq!(fig(f64::NAN), "?");
    assert_eq!(secs(1686.0), "1.69 s");
}
