//! The remote cache's client against servers that misbehave, and against writers that lie:
//! a server that trickles its answer costs one deadline, a value longer than the cap is
//! rejected before it is read, a round trip holds a bounded amount of values, and with a
//! shared key a value nobody with the key wrote is never served.

#[path = "../../kiln-cli/tests/support/redis.rs"]
mod redis_server;

use kiln::store::remote::{RemoteConfig, RemoteKey, RemoteStore};
use kiln::store::{ContentKey, Namespace};
use kiln_test_support::fake_server::FakeServer;
use redis_server::RedisServer;
use std::io::Write;
use std::time::{Duration, Instant};

fn ns() -> Namespace {
    Namespace::new("spirv", "naga 30")
}

fn keys(n: usize) -> Vec<ContentKey> {
    (0..n)
        .map(|i| ContentKey::hash(format!("job {i}").as_bytes()))
        .collect()
}

/// What `get_many` returned, the store (for its report) and how long it took.
type Fetched = (Vec<Option<Vec<u8>>>, RemoteStore, Duration);

/// `get_many` on another thread: `None` if it has not returned after `patience` (a client
/// that hangs fails the test instead of hanging it).
fn get_within(store: RemoteStore, keys: Vec<ContentKey>, patience: Duration) -> Option<Fetched> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let ns = ns();
        let asked: Vec<(&Namespace, &ContentKey)> = keys.iter().map(|k| (&ns, k)).collect();
        let started = Instant::now();
        let got = store.get_many(&asked);
        let _ = tx.send((got, store, started.elapsed()));
    });
    rx.recv_timeout(patience).ok()
}

/// Issue 25, item 9: the timeout was per read, and a server sending one byte every 200 ms
/// never let it expire. One deadline covers the whole round trip.
#[test]
fn a_server_that_trickles_its_answer_costs_one_deadline() {
    // PONG at once, then a 1 MB value (under the cap) one byte at a time.
    let server = FakeServer::trickling(
        b"+PONG\r\n",
        b"$1000000\r\nxxxxxxxxxxxxxxxxxxxxxx",
        Duration::from_millis(200),
    );
    let timeout = Duration::from_millis(600);
    let config = RemoteConfig {
        timeout,
        ..RemoteConfig::new(server.url())
    };
    let store = RemoteStore::new(config).unwrap();
    let Some((got, store, elapsed)) = get_within(store, keys(300), 3 * timeout) else {
        panic!("the fetch was still waiting after 3x the {timeout:?} timeout");
    };
    assert!(got.iter().all(Option::is_none));
    assert!(elapsed < 3 * timeout, "{elapsed:?}");
    let report = store.take_report();
    assert_eq!(report.read_failed, 300, "{report:?}");
    let why = report.unavailable.unwrap();
    assert!(why.contains("no complete answer within 600 ms"), "{why}");
    // The remote is left alone now: the next fetch costs nothing.
    let started = Instant::now();
    let ns = ns();
    let again = keys(3);
    let asked: Vec<(&Namespace, &ContentKey)> = again.iter().map(|k| (&ns, k)).collect();
    assert_eq!(store.get_many(&asked), vec![None, None, None]);
    assert!(started.elapsed() < Duration::from_millis(100));
}

/// The deadline also covers connecting and the setup commands: a server that trickles its
/// `PONG` is given up at the deadline too.
#[test]
fn a_server_that_trickles_its_pong_costs_one_deadline() {
    let server = FakeServer::trickling(b"", b"+PONG\r\n", Duration::from_millis(150));
    let timeout = Duration::from_millis(500);
    let config = RemoteConfig {
        timeout,
        ..RemoteConfig::new(server.url())
    };
    let store = RemoteStore::new(config).unwrap();
    let Some((_, store, elapsed)) = get_within(store, keys(1), 3 * timeout) else {
        panic!("still connecting after 3x the {timeout:?} timeout");
    };
    assert!(elapsed < 3 * timeout, "{elapsed:?}");
    assert!(store.take_report().unavailable.is_some());
}

/// Issue 25, item 10: a value's length is judged from its header. The server announces
/// 200 MB and sends none of it: the value is rejected at once (not waited for, never
/// allocated), and the build goes on.
#[test]
fn a_value_over_the_cap_is_rejected_before_it_is_read() {
    let server = FakeServer::start(|mut conn, stop| {
        let _ = conn.write_all(b"+PONG\r\n$200000000\r\n");
        let started = Instant::now();
        while !FakeServer::stopped(stop) && started.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let config = RemoteConfig {
        timeout: Duration::from_secs(20),
        ..RemoteConfig::new(server.url())
    };
    let store = RemoteStore::new(config).unwrap();
    let Some((got, store, elapsed)) = get_within(store, keys(1), Duration::from_secs(10)) else {
        panic!("the client waited for the 200 MB value");
    };
    assert_eq!(got, vec![None]);
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    let report = store.take_report();
    assert_eq!(report.rejected, 1, "{report:?}");
    assert_eq!(report.read_failed, 0, "{report:?}");
    let why = report.first_rejected.unwrap();
    assert!(
        why.contains("200000000 bytes, over the 67108864-byte cap"),
        "{why}"
    );
}

fn writer(url: &str, key: Option<RemoteKey>) -> RemoteStore {
    RemoteStore::new(RemoteConfig {
        key,
        ..RemoteConfig::new(url)
    })
    .unwrap()
}

/// A smaller cap (`--remote-max-value-bytes`) applies to a real server's values, and a
/// round trip holds at most its budget: the rest comes in the next round trips, all of it.
#[test]
fn a_round_trip_holds_at_most_its_budget_and_the_cap_is_configurable() {
    let Some(redis) = RedisServer::start(&[]) else {
        return;
    };
    let keys = keys(40);
    let ns = ns();
    let payloads: Vec<Vec<u8>> = (0..40).map(|i| vec![i as u8; 8000]).collect();
    let entries: Vec<(&Namespace, &ContentKey, &[u8])> = keys
        .iter()
        .zip(&payloads)
        .map(|(k, p)| (&ns, k, &p[..]))
        .collect();
    let ci = writer(&redis.url(), None);
    ci.put_many(&entries);
    assert_eq!(ci.take_report().uploaded, 40);
    let asked: Vec<(&Namespace, &ContentKey)> = keys.iter().map(|k| (&ns, k)).collect();

    let reader = RemoteStore::new(RemoteConfig {
        round_trip_bytes: 20_000,
        max_value_bytes: 9_000,
        ..RemoteConfig::new(redis.url())
    })
    .unwrap();
    let mut got = vec![None; 40];
    let mut largest_round_trip = 0;
    reader.get_each(&asked, |found| {
        largest_round_trip = largest_round_trip.max(found.iter().map(|(_, v)| v.len()).sum());
        for (i, payload) in found {
            got[i] = Some(payload);
        }
    });
    assert!(largest_round_trip <= 20_000, "{largest_round_trip}");
    assert_eq!(got, payloads.into_iter().map(Some).collect::<Vec<_>>());
    let report = reader.take_report();
    assert_eq!(report.fetched, 40);
    // Two values (with their headers) per round trip.
    assert!(report.round_trips >= 20, "{report:?}");

    let strict = RemoteStore::new(RemoteConfig {
        max_value_bytes: 4_000,
        ..RemoteConfig::new(redis.url())
    })
    .unwrap();
    assert!(strict.get_many(&asked).iter().all(Option::is_none));
    let report = strict.take_report();
    assert_eq!(report.rejected, 40, "{report:?}");
    assert!(report
        .first_rejected
        .unwrap()
        .contains("over the 4000-byte cap"));
}

/// Issue 25, item 12: without a key, whoever can write to the Redis chooses the bytes; with
/// one, a value written without it (or with another) is rejected, and never served.
#[test]
fn a_forged_value_is_rejected_when_a_key_is_configured() {
    let Some(redis) = RedisServer::start(&[]) else {
        return;
    };
    let secret = || RemoteKey::from_secret(b"CI's secret: 32 random bytes....");
    let keys = keys(3);
    let ns = ns();
    let ci = writer(&redis.url(), secret());
    ci.put_many(&[
        (&ns, &keys[0], b"real 0"),
        (&ns, &keys[1], b"real 1"),
        (&ns, &keys[2], b"real 2"),
    ]);
    let asked: Vec<(&Namespace, &ContentKey)> = keys.iter().map(|k| (&ns, k)).collect();
    let developer = RemoteStore::new(RemoteConfig {
        read_only: true,
        key: secret(),
        ..RemoteConfig::new(redis.url())
    })
    .unwrap();
    assert_eq!(
        developer.get_many(&asked),
        vec![
            Some(b"real 0".to_vec()),
            Some(b"real 1".to_vec()),
            Some(b"real 2".to_vec())
        ]
    );
    assert_eq!(developer.take_report().rejected, 0);

    // Someone with write access and no key: a value of the right format, under the right
    // key, with a valid checksum; another with a MAC made with their own secret.
    writer(&redis.url(), None).put_many(&[(&ns, &keys[0], b"evil 0")]);
    writer(
        &redis.url(),
        RemoteKey::from_secret(b"the attacker's own secret key"),
    )
    .put_many(&[(&ns, &keys[1], b"evil 1")]);

    assert_eq!(
        developer.get_many(&asked),
        vec![None, None, Some(b"real 2".to_vec())]
    );
    let report = developer.take_report();
    assert!(report.keyed);
    assert_eq!((report.fetched, report.rejected), (1, 2), "{report:?}");
    assert!(report.first_rejected.unwrap().contains("no valid MAC"));
    // Without the key the forgery is served: what the key is for.
    let unkeyed = writer(&redis.url(), None);
    assert_eq!(unkeyed.get_many(&asked)[0].as_deref(), Some(&b"evil 0"[..]));
}
