//! `rediss://` with rustls against a redis-server speaking TLS with a test CA: the
//! verifying path (no `#insecure`), with and without client certificates.
//!
//! Needs the `tls` feature, which is on by default (so `cargo test --workspace` runs it).
#![cfg(feature = "tls")]

mod support;

use std::time::Duration;

use leasehold_election::{FencedWriter, LeaseStore, RedisStore, StoreError};
use leasehold_testkit::{ClientAuth, TestCa, TlsRedisServer};
use support::{Terms, config, recheck_now, slow_to_recheck};
use tokio::time::timeout;

const WAIT: Duration = Duration::from_secs(10);

fn tls_store(url: &str, ca: &TestCa, client_cert: bool) -> RedisStore {
    let mut builder = RedisStore::builder(url)
        .call_timeout(Duration::from_millis(500))
        .tls_root_ca(ca.ca_pem());
    if client_cert {
        builder = builder.tls_client_cert(ca.client_cert_pem(), ca.client_key_pem());
    }
    builder.build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn electors_lead_and_hand_over_over_mutual_tls() {
    let redis = TlsRedisServer::start(ClientAuth::Required);
    let store = tls_store(&redis.url(), redis.ca(), true);
    let terms = Terms::default();
    let a = terms.spawn(store.clone(), config("job", "a", 3_000));
    let fence = timeout(WAIT, a.wait_until_leader())
        .await
        .expect("a leads")
        .unwrap();
    let b = terms.spawn(store.clone(), slow_to_recheck("job", "b", 3_000));
    FencedWriter::new(store.clone())
        .set("report", "v1", fence)
        .await
        .unwrap();
    assert_eq!(redis.server().redis_cli(&["GET", "report"]), "v1");
    // The hand-over needs the release notification, over its own TLS connection: b
    // re-checks now, and its own timer is then 2 s away or more.
    tokio::time::sleep(Duration::from_millis(300)).await;
    recheck_now(redis.server(), "job");
    tokio::time::sleep(Duration::from_millis(50)).await;
    let start = tokio::time::Instant::now();
    a.shutdown().await;
    timeout(Duration::from_secs(2), b.wait_until_leader())
        .await
        .expect("b is notified of the release")
        .unwrap();
    assert!(
        start.elapsed() < Duration::from_millis(500),
        "hand-over took {:?}",
        start.elapsed()
    );
    b.shutdown().await;
    terms.assert_no_overlap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_only_tls_needs_no_client_certificate() {
    let redis = TlsRedisServer::start(ClientAuth::None);
    let store = tls_store(&redis.url(), redis.ca(), false);
    assert!(store.self_check().await.is_ok());
    let terms = Terms::default();
    let a = terms.spawn(store, config("job", "a", 1_000));
    timeout(WAIT, a.wait_until_leader())
        .await
        .expect("a leads")
        .unwrap();
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_server_certificate_makes_the_server_unavailable() {
    let redis = TlsRedisServer::start(ClientAuth::None);
    let other_ca = TestCa::generate();
    let store = tls_store(&redis.url(), &other_ca, false);
    let err = store.self_check().await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Unavailable(e) if e.to_string().contains("invalid peer certificate")),
        "{err:?}"
    );
    // Plain Redis protocol on the TLS port does not work either.
    let plain = RedisStore::builder(format!("redis://127.0.0.1:{}/", redis.tls_port()))
        .call_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    assert!(plain.self_check().await.is_err());
}
