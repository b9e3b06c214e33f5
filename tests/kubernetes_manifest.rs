//! `examples/kubernetes/stream-consumer.yaml` against the example it deploys: the
//! probes ask for paths `examples/stream_consumer.rs` serves, on the port it listens
//! on; rolling deploys wait for readiness (`maxUnavailable: 0`); the grace period
//! covers a graceful leave; the Redis URL comes from a Secret; the disruption budget
//! selects the Deployment's pods.

use std::path::Path;

use yaml_rust2::{Yaml, YamlLoader};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

fn manifests() -> Vec<Yaml> {
    let path = root().join("examples/kubernetes/stream-consumer.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn kind<'a>(docs: &'a [Yaml], kind: &str) -> &'a Yaml {
    let found: Vec<_> = docs
        .iter()
        .filter(|d| d["kind"].as_str() == Some(kind))
        .collect();
    assert_eq!(found.len(), 1, "one {kind} in the manifest");
    found[0]
}

/// The routes the example's HTTP server serves.
fn served_paths() -> Vec<String> {
    let source = std::fs::read_to_string(root().join("examples/stream_consumer.rs")).unwrap();
    source
        .match_indices(".route(\"")
        .map(|(at, m)| {
            let rest = &source[at + m.len()..];
            rest[..rest.find('"').unwrap()].to_owned()
        })
        .collect()
}

/// The value of `--name` in `args`, or `None`.
fn flag<'a>(args: &'a [Yaml], name: &str) -> Option<&'a str> {
    let at = args.iter().position(|a| a.as_str() == Some(name))?;
    args.get(at + 1)?.as_str()
}

#[test]
fn the_probes_ask_for_what_the_stream_consumer_serves() {
    let docs = manifests();
    let deployment = kind(&docs, "Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let served = served_paths();
    assert!(served.contains(&"/readyz".to_owned()), "{served:?}");

    // The port: HTTP_PORT as the container listens, named for the probes.
    let env = container["env"].as_vec().expect("env");
    let value_of = |name: &str| env.iter().find(|e| e["name"].as_str() == Some(name));
    let port: i64 = value_of("HTTP_PORT").expect("HTTP_PORT")["value"]
        .as_str()
        .expect("a string value")
        .parse()
        .unwrap();
    let ports = container["ports"].as_vec().expect("ports");
    let http = ports
        .iter()
        .find(|p| p["containerPort"].as_i64() == Some(port))
        .expect("the HTTP port declared");
    let port_name = http["name"].as_str().expect("a named port");

    for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/livez")] {
        let get = &container[probe]["httpGet"];
        assert_eq!(get["path"].as_str(), Some(path), "{probe}");
        assert!(served.iter().any(|s| s == path), "{path} not in {served:?}");
        let probe_port = &get["port"];
        assert!(
            probe_port.as_str() == Some(port_name) || probe_port.as_i64() == Some(port),
            "{probe} port {probe_port:?}, the server's {port} ({port_name})"
        );
    }

    // The Redis URL from a Secret; the replica id unique per pod.
    assert!(
        !value_of("REDIS_URL").expect("REDIS_URL")["valueFrom"]["secretKeyRef"]["name"]
            .is_badvalue()
    );
    assert_eq!(
        value_of("REPLICA_ID").expect("REPLICA_ID")["valueFrom"]["fieldRef"]["fieldPath"].as_str(),
        Some("metadata.name")
    );
    // The consumer mode, and the grace period well above its lease (a graceful leave
    // hands everything over within one lease plus the callbacks' grace).
    let args = container["args"].as_vec().expect("args");
    assert_eq!(args[0].as_str(), Some("consume"));
    let lease_ms: i64 = flag(args, "--lease-ms").unwrap_or("3000").parse().unwrap();
    let grace = pod["terminationGracePeriodSeconds"]
        .as_i64()
        .expect("a grace period");
    assert!(
        grace * 1000 >= 3 * lease_ms,
        "grace {grace} s, lease {lease_ms} ms"
    );
    // The consumer's own deadline (`shutdown_within`) ends before the pod's grace
    // period, so it exits before it is killed.
    let within: i64 = value_of("LEAVE_WITHIN_SECS").expect("LEAVE_WITHIN_SECS")["value"]
        .as_str()
        .expect("a string")
        .parse()
        .expect("whole seconds");
    assert!(
        0 < within && within < grace,
        "leave within {within} s, grace period {grace} s"
    );

    // Rolling deploys paced by readiness: no old pod goes before its replacement is
    // ready.
    let rolling = &deployment["spec"]["strategy"]["rollingUpdate"];
    assert_eq!(rolling["maxUnavailable"].as_i64(), Some(0));
    assert_eq!(rolling["maxSurge"].as_i64(), Some(1));
}

#[test]
fn the_disruption_budget_selects_the_deployments_pods() {
    let docs = manifests();
    let deployment = kind(&docs, "Deployment");
    let budget = kind(&docs, "PodDisruptionBudget");
    let labels = &deployment["spec"]["template"]["metadata"]["labels"];
    let selector = budget["spec"]["selector"]["matchLabels"]
        .as_hash()
        .expect("matchLabels");
    assert!(!selector.is_empty());
    for (key, value) in selector {
        assert_eq!(&labels[key.as_str().unwrap()], value, "{key:?}");
    }
    assert_eq!(
        &deployment["spec"]["selector"]["matchLabels"],
        &budget["spec"]["selector"]["matchLabels"]
    );
    assert_eq!(budget["spec"]["maxUnavailable"].as_i64(), Some(1));
}
