//! The same sequence of group operations against a real redis-server and the in-memory
//! store: both must answer alike (apart from clocks and fences, which differ by
//! nature), so simulations on the in-memory store run the protocol Redis runs.

use std::time::Duration;

use leasehold_election::{Fence, RedisStore};
use leasehold_testkit::RedisServer;

use super::protocol::{
    ClaimReply, ClaimRequest, Conflict, MemberState, Protocol, SeedNeed, SeedRequest, SessionReply,
    TickReply, TickRequest,
};
use crate::MemoryGroupStore;
use crate::keys::GroupKeys;

const TTL: Duration = Duration::from_secs(5);

fn tick(replica: &str, token: &str, join: bool, state: MemberState, digest: &str) -> TickRequest {
    TickRequest {
        replica: replica.into(),
        token: token.into(),
        join,
        state,
        ttl: TTL,
        digest: digest.into(),
    }
}

fn claim(replica: &str, token: &str, count: usize) -> ClaimRequest {
    ClaimRequest {
        replica: replica.into(),
        token: token.into(),
        ttl: TTL,
        count,
        floor: Fence(1),
    }
}

fn seed(replica: &str, digest: &str, offset: usize, names: &[&str], count: usize) -> SeedRequest {
    SeedRequest {
        replica: replica.into(),
        digest: digest.into(),
        count,
        offset,
        replace: false,
        grant_delay: Duration::from_millis(1),
        names: names.iter().map(|n| (*n).to_owned()).collect(),
    }
}

/// A tick reply without its clocks: session, seed, (replica, state, held), unowned.
fn shape(
    r: &TickReply,
) -> (
    SessionReply,
    SeedNeed,
    Vec<(String, MemberState, usize)>,
    usize,
) {
    let members = r
        .members
        .iter()
        .map(|m| (m.replica.clone(), m.state, m.held))
        .collect();
    (r.session, r.seed, members, r.unowned)
}

fn names(r: &ClaimReply) -> Vec<String> {
    match r {
        ClaimReply::Claimed { partitions, .. } => {
            partitions.iter().map(|(n, _)| n.clone()).collect()
        }
        other => panic!("expected a claim, got {other:?}"),
    }
}

/// Runs the script of operations and returns every answer, clocks removed.
async fn script<B: Protocol>(b: &B) -> Vec<String> {
    let k = GroupKeys::new("leasehold", "conformance");
    let mut out = Vec::new();
    let mut log = |what: &str, v: String| out.push(format!("{what}: {v}"));
    let (a, b1) = (
        "a:00000000000000000000000000000001",
        "b:00000000000000000000000000000001",
    );
    let all = ["p0", "p1", "p2", "p3", "p4"];

    let r = b
        .tick(&k, &tick("a", a, true, MemberState::Settling, "d5"))
        .await
        .unwrap();
    log("a joins a new group", format!("{:?}", shape(&r)));
    let r = b.seed(&k, &seed("a", "d5", 0, &all[..3], 5)).await.unwrap();
    log("a seeds 3 of 5", format!("{r:?}"));
    let r = b.seed(&k, &seed("a", "d5", 0, &all[..3], 5)).await.unwrap();
    log("a seeds from a stale offset", format!("{r:?}"));
    let r = b.seed(&k, &seed("a", "d5", 3, &all[3..], 5)).await.unwrap();
    log("a seeds the rest", format!("{r:?}"));
    tokio::time::sleep(Duration::from_millis(5)).await;
    let r = b
        .tick(&k, &tick("a", a, false, MemberState::Active, "d5"))
        .await
        .unwrap();
    log("a renews", format!("{:?}", shape(&r)));
    let r = b
        .tick(&k, &tick("b", b1, true, MemberState::Settling, "other"))
        .await
        .unwrap();
    log("b joins with another list", format!("{:?}", shape(&r)));
    let r = b
        .tick(&k, &tick("a", "a:other", true, MemberState::Settling, "d5"))
        .await
        .unwrap();
    log("a second process for a", format!("{:?}", shape(&r)));
    let r = b.claim(&k, &claim("a", a, 2)).await.unwrap();
    log("a claims 2", format!("{:?}", names(&r)));
    let r = b
        .tick(&k, &tick("b", b1, true, MemberState::Active, "d5"))
        .await
        .unwrap();
    log("b joins", format!("{:?}", shape(&r)));
    let r = b.claim(&k, &claim("b", b1, 10)).await.unwrap();
    log("b claims the rest", format!("{:?}", names(&r)));
    let r = b.release(&k, a, &["p0".into(), "p3".into()]).await.unwrap();
    log("a releases p0 (its own) and p3 (b's)", format!("{r:?}"));
    let r = b.held(&k, a).await.unwrap();
    log("a holds", format!("{r:?}"));
    let r = b.claim(&k, &claim("b", b1, 10)).await.unwrap();
    log("b claims again", format!("{:?}", names(&r)));
    let owner = b.owner(&k, "p0").await.unwrap();
    log("p0's owner", format!("{:?}", owner.owner));
    b.leave(&k, "a", a).await.unwrap();
    let r = b
        .tick(&k, &tick("b", b1, false, MemberState::Active, "d5"))
        .await
        .unwrap();
    log("after a left", format!("{:?}", shape(&r)));
    let r = b.claim(&k, &claim("b", b1, 10)).await.unwrap();
    log("b takes a's", format!("{:?}", names(&r)));
    let r = b
        .tick(&k, &tick("a", a, false, MemberState::Active, "d5"))
        .await
        .unwrap();
    log(
        "a's ended session is never renewed",
        format!("{:?}", r.session),
    );
    let r = b.claim(&k, &claim("a", a, 1)).await.unwrap();
    log("nor claims", format!("{r:?}"));
    let head = b.status_head(&k).await.unwrap().expect("the group exists");
    log(
        "status head",
        format!(
            "{} {:?}",
            head.count,
            head.members
                .iter()
                .map(|m| (&m.replica, m.held))
                .collect::<Vec<_>>()
        ),
    );
    let page = b.status_page(&k, 1, 3).await.unwrap();
    log(
        "status page 1..4",
        format!(
            "{:?}",
            page.iter()
                .map(|p| (&p.partition, &p.owner))
                .collect::<Vec<_>>()
        ),
    );
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_and_the_in_memory_store_answer_the_same_script_alike() {
    let redis = RedisServer::start();
    let store = RedisStore::builder(redis.url()).build().unwrap();
    let on_redis = script(&store).await;
    let in_memory = script(&MemoryGroupStore::new()).await;
    for (r, m) in on_redis.iter().zip(&in_memory) {
        assert_eq!(r, m, "Redis and the in-memory store differ");
    }
    assert_eq!(on_redis.len(), in_memory.len());
    // And the script checks what it claims to, on both.
    let expect = |step: &str, part: &str| {
        let line = on_redis.iter().find(|l| l.starts_with(step)).expect(step);
        assert!(line.contains(part), "{line}");
    };
    expect(
        "b joins with another list",
        &format!(
            "{:?}",
            SessionReply::Refused(Conflict::PartitionListMismatch)
        ),
    );
    expect(
        "a second process for a",
        &format!("{:?}", SessionReply::Refused(Conflict::DuplicateReplica)),
    );
    expect("a claims 2", r#"["p0", "p1"]"#);
    expect("a releases p0", "[true, false]");
    expect("b claims again", r#"["p0"]"#);
    expect("b takes a's", r#"["p1"]"#);
    expect("a's ended session", "Lost");
    expect("nor claims", "Lost");
    expect("a seeds from a stale offset", "Moved(3)");
}
