//! The same sequence of group operations against a real redis-server and the in-memory
//! store: both must answer alike (apart from clocks and fences, which differ by
//! nature), so simulations on the in-memory store run the protocol Redis runs.

use std::time::Duration;

use leasehold_election::{Fence, RedisStore};
use leasehold_testkit::RedisServer;

use super::protocol::{
    AddReply, Change, ClaimReply, ClaimRequest, Conflict, MemberState, Protocol, RemoveReply,
    SessionReply, TickReply, TickRequest, VersionStep,
};
use crate::MemoryGroupStore;
use crate::keys::GroupKeys;

const TTL: Duration = Duration::from_secs(5);

fn tick(replica: &str, token: &str, join: bool, state: MemberState) -> TickRequest {
    TickRequest {
        replica: replica.into(),
        token: token.into(),
        join,
        state,
        ttl: TTL,
        instance: format!("host-{replica} 1"),
        capacity: 1,
    }
}

fn claim(replica: &str, token: &str, count: usize) -> ClaimRequest {
    ClaimRequest {
        replica: replica.into(),
        token: token.into(),
        ttl: TTL,
        count,
        floor: Fence(1),
        regrant: Vec::new(),
        room: None,
        fallback: false,
    }
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|n| (*n).to_owned()).collect()
}

/// A tick reply without its clocks: session, resumed, set, (replica, state, held) by
/// replica (the store orders them by expiry: two in one millisecond tie on Redis),
/// unowned, drained, revoked (sorted), expired.
fn shape(r: &TickReply) -> String {
    let mut members: Vec<_> = r
        .members
        .iter()
        .map(|m| (m.replica.clone(), m.state, m.held))
        .collect();
    members.sort_by(|a, b| a.0.cmp(&b.0));
    let mut loads: Vec<_> = r
        .members
        .iter()
        .map(|m| (m.replica.clone(), m.load, m.capacity))
        .collect();
    loads.sort();
    let weights = r
        .set
        .as_ref()
        .map(|s| (s.weighted, s.total_weight, s.max_weight, s.weights_version));
    let mut revoked = r.revoked.clone();
    revoked.sort();
    format!(
        "{:?} resumed={:?} set={:?} {members:?} unowned={} drained={} revoked={revoked:?} \
         expired={} loads={loads:?} weights={weights:?}",
        r.session,
        r.resumed.as_ref().map(|t| t.len()),
        r.set
            .as_ref()
            .map(|s| (s.count, s.version, s.digest.clone())),
        r.unowned,
        r.drained,
        r.expired
    )
}

fn claimed(r: &ClaimReply) -> Vec<String> {
    match r {
        ClaimReply::Claimed { partitions, .. } => {
            partitions.iter().map(|(n, ..)| n.clone()).collect()
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
    let delay = Duration::from_millis(1);

    let r = b
        .tick(&k, &tick("a", a, true, MemberState::Settling))
        .await
        .unwrap();
    log("a joins a group that does not exist", shape(&r));
    let r = b
        .add(&k, Change::Ensure, delay, &names(&["p0", "p1", "p2"]))
        .await
        .unwrap();
    log("a creates it with 3", format!("{r:?}"));
    let r = b
        .add(&k, Change::Ensure, delay, &names(&["p2", "p3", "p4", "p4"]))
        .await
        .unwrap();
    log("ensure-add overlapping names", format!("{r:?}"));
    let r = b
        .add(&k, Change::Strict, delay, &names(&["p9", "p4"]))
        .await
        .unwrap();
    log("strict add of a present one", format!("{r:?}"));
    let r = b.set_version(&k, 2, VersionStep::Begin).await.unwrap();
    log("version 2 begins", format!("{r}"));
    let r = b.set_version(&k, 2, VersionStep::Begin).await.unwrap();
    log("and may be continued", format!("{r}"));
    let r = b
        .add(&k, Change::Versioned(1), delay, &names(&["p9"]))
        .await
        .unwrap();
    log("a version 1 addition is stale", format!("{r:?}"));
    let r = b
        .remove(&k, Change::Versioned(1), &names(&["p0"]))
        .await
        .unwrap();
    log("and so is a removal", format!("{r:?}"));
    let r = b
        .add(&k, Change::Versioned(2), delay, &names(&["p4"]))
        .await
        .unwrap();
    log("a version 2 addition is not", format!("{r:?}"));
    let r = b.set_version(&k, 2, VersionStep::Done("v2")).await.unwrap();
    log("version 2 applied", format!("{r}"));
    let r = b.set_version(&k, 2, VersionStep::Begin).await.unwrap();
    log("once applied it is not begun again", format!("{r}"));
    let r = b.set_version(&k, 1, VersionStep::Begin).await.unwrap();
    log("an older version is not", format!("{r}"));
    let r = b.set_version(&k, 1, VersionStep::Done("v1")).await.unwrap();
    log("nor recorded", format!("{r}"));
    tokio::time::sleep(Duration::from_millis(5)).await;
    let r = b
        .tick(&k, &tick("a", a, false, MemberState::Active))
        .await
        .unwrap();
    log("a renews", shape(&r));
    let r = b
        .tick(&k, &tick("a", "a:other", true, MemberState::Settling))
        .await
        .unwrap();
    log("a second process for a", shape(&r));
    let r = b.claim(&k, &claim("a", a, 2)).await.unwrap();
    log("a claims 2", format!("{:?}", claimed(&r)));
    let r = b
        .tick(&k, &tick("b", b1, true, MemberState::Active))
        .await
        .unwrap();
    log("b joins", shape(&r));
    let r = b.claim(&k, &claim("b", b1, 10)).await.unwrap();
    log("b claims the rest", format!("{:?}", claimed(&r)));
    let r = b.release(&k, a, &names(&["p0", "p3"])).await.unwrap();
    log("a releases p0 (its own) and p3 (b's)", format!("{r:?}"));
    let r = b.held(&k, a).await.unwrap();
    log("a holds", format!("{r:?}"));
    let r = b.claim(&k, &claim("b", b1, 10)).await.unwrap();
    log("b claims again", format!("{:?}", claimed(&r)));
    let owner = b.owner(&k, "p0").await.unwrap().expect("p0 is a partition");
    log("p0's owner", format!("{:?}", owner.owner));
    log(
        "an unknown partition's owner",
        format!("{:?}", b.owner(&k, "nope").await.unwrap()),
    );
    let r = b
        .remove(&k, Change::Strict, &names(&["p2", "zz"]))
        .await
        .unwrap();
    log("strict remove of an unknown one", format!("{r:?}"));
    let r = b
        .remove(&k, Change::Strict, &names(&["p0", "p1", "p2", "p3", "p4"]))
        .await
        .unwrap();
    log("strict remove of every one", format!("{r:?}"));
    let r = b.remove(&k, Change::Strict, &names(&["p2"])).await.unwrap();
    log("b's p2 removed", format!("{r:?}"));
    let r = b
        .tick(&k, &tick("b", b1, false, MemberState::Active))
        .await
        .unwrap();
    log("b is told to give p2 up", shape(&r));
    let r = b.release(&k, b1, &names(&["p2"])).await.unwrap();
    log("b releases it", format!("{r:?}"));
    let r = b.drain(&k, "a", true).await.unwrap();
    log("a drained", format!("{r}"));
    let r = b.drain(&k, "ghost", true).await.unwrap();
    log("a replica that is not live", format!("{r}"));
    let r = b
        .tick(&k, &tick("a", a, false, MemberState::Draining))
        .await
        .unwrap();
    log("a sees it", shape(&r));
    let r = b
        .tick(&k, &tick("a", a, false, MemberState::Away))
        .await
        .unwrap();
    log("a goes away", shape(&r));
    let r = b
        .tick(&k, &tick("a", "a:new-process", true, MemberState::Active))
        .await
        .unwrap();
    log("a comes back and resumes", shape(&r));
    let r = b
        .claim(
            &k,
            &ClaimRequest {
                // p4 is b's: only what the session holds gets a new term.
                regrant: names(&["p1", "p4"]),
                ..claim("a", a, 0)
            },
        )
        .await
        .unwrap();
    log("a regrants what it holds", format!("{:?}", claimed(&r)));
    b.leave(&k, "a", a).await.unwrap();
    let r = b
        .tick(&k, &tick("b", b1, false, MemberState::Active))
        .await
        .unwrap();
    log("after a left", shape(&r));
    let r = b.claim(&k, &claim("b", b1, 10)).await.unwrap();
    log("b takes a's", format!("{:?}", claimed(&r)));
    let r = b
        .tick(&k, &tick("a", a, false, MemberState::Active))
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
            "{} {:?} {:?}",
            head.set.count,
            head.members
                .iter()
                .map(|m| (&m.replica, m.held))
                .collect::<Vec<_>>(),
            head.instances
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
    log(
        "list",
        format!("{:?}", b.list_page(&k, 0, 100).await.unwrap()),
    );
    // A session that expires holding a partition: the tick that finds it says so, once.
    let short = Duration::from_millis(40);
    let c = "c:00000000000000000000000000000001";
    let r = b.release(&k, b1, &names(&["p0"])).await.unwrap();
    log("b gives p0 back", format!("{r:?}"));
    let r = b
        .tick(
            &k,
            &TickRequest {
                ttl: short,
                ..tick("c", c, true, MemberState::Active)
            },
        )
        .await
        .unwrap();
    log("c joins for 40 ms", shape(&r));
    let r = b
        .claim(
            &k,
            &ClaimRequest {
                ttl: short,
                ..claim("c", c, 1)
            },
        )
        .await
        .unwrap();
    log("c claims p0", format!("{:?}", claimed(&r)));
    tokio::time::sleep(short * 2).await;
    let r = b.claim(&k, &claim("c", c, 1)).await.unwrap();
    log("c's expired session claims nothing", format!("{r:?}"));
    let r = b
        .tick(&k, &tick("b", b1, false, MemberState::Active))
        .await
        .unwrap();
    log("b finds c expired", shape(&r));
    let r = b
        .tick(&k, &tick("b", b1, false, MemberState::Active))
        .await
        .unwrap();
    log("and does not count it twice", shape(&r));
    // Weights.
    let r = b.set_weight(&k, "zz", 2).await.unwrap();
    log("the weight of an unknown partition", format!("{r:?}"));
    let r = b.set_weight(&k, "p1", 5).await.unwrap();
    log("b's p1 weighs 5", format!("{r:?}"));
    let r = b
        .tick(&k, &tick("b", b1, false, MemberState::Active))
        .await
        .unwrap();
    log("b's load counts it", shape(&r));
    let r = b.set_weight(&k, "p0", 3).await.unwrap();
    log("free p0 weighs 3", format!("{r:?}"));
    let d = "d:00000000000000000000000000000001";
    let r = b
        .tick(
            &k,
            &TickRequest {
                capacity: 2,
                ..tick("d", d, true, MemberState::Active)
            },
        )
        .await
        .unwrap();
    log("d joins with capacity 2", shape(&r));
    let with_room = |room: u64| ClaimRequest {
        room: Some(room),
        fallback: true,
        ..claim("d", d, 10)
    };
    let r = b.claim(&k, &with_room(2)).await.unwrap();
    log(
        "nothing fits into 2: d takes the first",
        format!("{:?}", weighed(&r)),
    );
    let r = b.release(&k, b1, &names(&["p3"])).await.unwrap();
    log("b gives p3 back", format!("{r:?}"));
    let r = b.claim(&k, &with_room(1)).await.unwrap();
    log("p3 fits into 1", format!("{:?}", weighed(&r)));
    let r = b
        .tick(&k, &tick("d", d, false, MemberState::Active))
        .await
        .unwrap();
    log("loads after the moves", shape(&r));
    log(
        "b holds, with weights",
        format!("{:?}", b.held(&k, b1).await.unwrap()),
    );
    let o = b.owner(&k, "p1").await.unwrap().expect("p1 is listed");
    log(
        "p1's owner and weight",
        format!("{:?} {}", o.owner, o.weight),
    );
    let r = b.remove(&k, Change::Strict, &names(&["p1"])).await.unwrap();
    log("held p1 removed", format!("{r:?}"));
    let r = b.release(&k, b1, &names(&["p1"])).await.unwrap();
    log("and given back", format!("{r:?}"));
    let head = b.status_head(&k).await.unwrap().expect("the group exists");
    log(
        "weighted status",
        format!(
            "{} {} {} {:?}",
            head.set.weighted,
            head.set.total_weight,
            head.set.max_weight,
            head.members
                .iter()
                .map(|m| (&m.replica, m.load, m.capacity))
                .collect::<Vec<_>>()
        ),
    );
    out
}

fn weighed(r: &ClaimReply) -> Vec<(String, u64)> {
    match r {
        ClaimReply::Claimed { partitions, .. } => {
            partitions.iter().map(|(n, _, w)| (n.clone(), *w)).collect()
        }
        other => panic!("expected a claim, got {other:?}"),
    }
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
    expect("a joins a group that does not exist", "set=None");
    expect("a creates it with 3", &format!("{:?}", AddReply::Added(3)));
    expect(
        "ensure-add overlapping",
        &format!("{:?}", AddReply::Added(2)),
    );
    expect("strict add of a present", r#"Exists("p4")"#);
    expect("version 2 begins", "true");
    expect("and may be continued", "true");
    expect("a version 1 addition is stale", "Stale");
    expect("and so is a removal", "Stale");
    expect("a version 2 addition is not", "Added(0)");
    expect("version 2 applied", "true");
    expect("once applied it is not begun again", "false");
    expect("an older version is not", "false");
    expect("nor recorded", "false");
    expect("c claims p0", r#"["p0"]"#);
    expect("c's expired session claims nothing", "Lost");
    expect("b finds c expired", "expired=1");
    expect("and does not count it twice", "expired=0");
    expect("a renews", r#"set=Some((5, 2, "v2"))"#);
    expect(
        "a second process for a",
        &format!("{:?}", SessionReply::Refused(Conflict::DuplicateReplica)),
    );
    expect("a claims 2", r#"["p0", "p1"]"#);
    expect("a releases p0", "[true, false]");
    expect("b claims again", r#"["p0"]"#);
    expect("an unknown partition's owner", "None");
    expect("strict remove of an unknown", r#"Unknown("zz")"#);
    expect(
        "strict remove of every",
        &format!("{:?}", RemoveReply::Last),
    );
    expect("b is told to give p2 up", r#"revoked=[("p2", "removed")]"#);
    expect("b releases it", "[true]");
    expect("a drained", "true");
    expect("a replica that is not live", "false");
    expect("a sees it", "drained=true");
    expect("a comes back and resumes", "resumed=Some(34)");
    expect("a regrants", r#"["p1"]"#);
    expect("b takes a's", r#"["p1"]"#);
    expect("a's ended session", "Lost");
    expect("nor claims", "Lost");
    expect("list", r#"["p0", "p1", "p3", "p4"]"#);
    expect("the weight of an unknown partition", "Unknown");
    expect("b's p1 weighs 5", "Set(1)");
    expect("b's load counts it", r#"("b", 7, 1)"#);
    expect("b's load counts it", "weights=Some((true, 8, 5, 1))");
    expect("d joins with capacity 2", r#"("d", 0, 2)"#);
    expect("nothing fits into 2", r#"[("p0", 3)]"#);
    expect("p3 fits into 1", r#"[("p3", 1)]"#);
    expect("loads after the moves", r#"("b", 6, 1), ("d", 4, 2)"#);
    expect("b holds, with weights", r#"[("p1", 5), ("p4", 1)]"#);
    expect("p1's owner and weight", r#"Some("b") 5"#);
    expect("held p1 removed", "Removed(1)");
    expect("weighted status", r#"true 5 3 [("b", 1, 1), ("d", 4, 2)]"#);
}
