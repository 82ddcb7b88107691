//! Single flight and invalidation races in `VariantCache`, staged with barriers and
//! channels (no sleeps): concurrent requesters, failing and panicking compilers, and a stale
//! compile finishing after its shader was invalidated.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::thread;

use kiln::key::VariantKey;
use kiln::variant_cache::{CacheError, VariantCache};

fn key(keywords: &[&str], revision: u64) -> VariantKey {
    VariantKey::new("Lit", "Forward", keywords, revision).unwrap()
}

/// Blocks the compiling thread until `n` other requesters have joined its compile.
fn wait_for_joiners<A: Clone + Send + Sync>(cache: &VariantCache<A>, n: u64) {
    while cache.stats().joined_waits < n {
        thread::yield_now();
    }
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("syntax error at line {0}")]
struct SyntaxError(u32);

#[test]
fn eight_threads_on_one_key_compile_once_and_share_the_artifact() {
    let cache = VariantCache::<Arc<str>>::new();
    let k = key(&["FOG", "SKIN"], 7);
    let runs = AtomicUsize::new(0);
    let barrier = Barrier::new(8);
    let results: Vec<Arc<str>> = thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                scope.spawn(|| {
                    barrier.wait();
                    cache
                        .get_or_compile(&k, |k| {
                            runs.fetch_add(1, Ordering::SeqCst);
                            // Stay in flight until the seven others have joined.
                            wait_for_joiners(&cache, 7);
                            Ok::<_, Infallible>(Arc::from(k.digest()))
                        })
                        .unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(results.iter().all(|r| Arc::ptr_eq(r, &results[0])));
    assert_eq!(&*results[0], "2a876a0d5092");
    let stats = cache.stats();
    assert_eq!(
        (
            stats.requests,
            stats.compiles,
            stats.joined_waits,
            stats.hits
        ),
        (8, 1, 7, 0)
    );
    assert_eq!(cache.len(), 1);
}

#[test]
fn a_stale_compile_in_flight_is_not_inserted_after_invalidation() {
    let cache = VariantCache::<String>::new();
    let stale = key(&["FOG"], 7);
    let held = key(&["SKIN"], 7);
    cache
        .get_or_compile(&held, |k| Ok::<_, Infallible>(k.to_string()))
        .unwrap();
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    thread::scope(|scope| {
        let (cache, stale) = (&cache, &stale);
        let compiling = scope.spawn(move || {
            cache.get_or_compile(stale, |k| {
                started_tx.send(()).unwrap();
                release_rx.recv().unwrap();
                Ok::<_, Infallible>(format!("built {k}"))
            })
        });
        started_rx.recv().unwrap();
        // Only the ready rev-7 entry is removed; the one in flight is not an entry yet.
        assert_eq!(cache.invalidate_shader("Lit", 8), 1);
        release_tx.send(()).unwrap();
        // Its requester still gets what it asked for.
        assert_eq!(
            compiling.join().unwrap().unwrap(),
            "built Lit/Forward[FOG]@7"
        );
    });
    assert!(!cache.contains(&stale));
    assert!(!cache.contains(&held));
    assert_eq!(cache.len(), 0);
    let stats = cache.stats();
    assert_eq!((stats.invalidated, stats.stale_discarded), (1, 1));
    // A later stale request compiles again and is still not inserted; the current one is.
    cache
        .get_or_compile(&stale, |k| Ok::<_, Infallible>(k.to_string()))
        .unwrap();
    let current = stale.at_revision(8);
    cache
        .get_or_compile(&current, |k| Ok::<_, Infallible>(k.to_string()))
        .unwrap();
    assert_eq!(cache.shader_keys("Lit"), [current]);
    assert_eq!(cache.stats().compiles, 4);
    assert_eq!(cache.stats().stale_discarded, 2);
}

#[test]
fn a_compile_in_flight_at_the_current_revision_is_inserted() {
    let cache = VariantCache::<String>::new();
    let k = key(&["FOG"], 8);
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    thread::scope(|scope| {
        let (cache, k) = (&cache, &k);
        let compiling = scope.spawn(move || {
            cache.get_or_compile(k, |k| {
                started_tx.send(()).unwrap();
                release_rx.recv().unwrap();
                Ok::<_, Infallible>(k.to_string())
            })
        });
        started_rx.recv().unwrap();
        assert_eq!(cache.invalidate_shader("Lit", 8), 0);
        release_tx.send(()).unwrap();
        compiling.join().unwrap().unwrap();
    });
    assert!(cache.contains(&k));
    assert_eq!(cache.stats().stale_discarded, 0);
}

#[test]
fn a_failed_compile_reaches_every_waiter_and_is_not_cached() {
    let cache = VariantCache::<String>::new();
    let k = key(&["FOG"], 7);
    let barrier = Barrier::new(4);
    let results: Vec<Result<String, CacheError<SyntaxError>>> = thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    barrier.wait();
                    cache.get_or_compile(&k, |_| {
                        wait_for_joiners(&cache, 3);
                        Err(SyntaxError(12))
                    })
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let sources: Vec<Arc<SyntaxError>> = results
        .into_iter()
        .map(|result| match result {
            Err(CacheError::Compile {
                key: failed,
                digest,
                source,
            }) => {
                assert_eq!(failed, k);
                assert_eq!(digest, k.digest());
                source
            }
            other => panic!("expected a compile error, got {other:?}"),
        })
        .collect();
    assert!(sources.iter().all(|s| Arc::ptr_eq(s, &sources[0])));
    assert_eq!(*sources[0], SyntaxError(12));
    assert!(!cache.contains(&k));
    assert_eq!(cache.len(), 0);
    let stats = cache.stats();
    assert_eq!(
        (stats.compiles, stats.failures, stats.joined_waits),
        (1, 1, 3)
    );
    // Not cached: the next request compiles again, and succeeds.
    let fixed = cache
        .get_or_compile(&k, |k| Ok::<_, SyntaxError>(k.to_string()))
        .unwrap();
    assert_eq!(fixed, "Lit/Forward[FOG]@7");
    assert_eq!(cache.stats().compiles, 2);
    assert!(cache.contains(&k));
}

#[test]
fn the_error_names_the_variant_and_its_digest() {
    let cache = VariantCache::<String>::new();
    let k = key(&["SKIN", "FOG"], 7);
    let err = cache
        .get_or_compile(&k, |_| Err(SyntaxError(3)))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "variant Lit/Forward[FOG;SKIN]@7 (2a876a0d5092): compile failed: syntax error at line 3"
    );
    assert_eq!(err.digest(), "2a876a0d5092");
    assert_eq!(*err.key(), k);
}

#[test]
fn a_waiter_with_another_error_type_gets_the_message() {
    let cache = VariantCache::<String>::new();
    let k = key(&["FOG"], 7);
    let (started_tx, started_rx) = mpsc::channel();
    thread::scope(|scope| {
        let leader = scope.spawn(|| {
            cache.get_or_compile(&k, |_| {
                started_tx.send(()).unwrap();
                wait_for_joiners(&cache, 1);
                Err(SyntaxError(4))
            })
        });
        started_rx.recv().unwrap();
        let waiter = cache.get_or_compile(&k, |_| Ok::<_, std::fmt::Error>(String::new()));
        match waiter {
            Err(CacheError::FailedElsewhere { message, .. }) => {
                assert_eq!(message, "syntax error at line 4")
            }
            other => panic!("expected FailedElsewhere, got {other:?}"),
        }
        assert!(matches!(
            leader.join().unwrap(),
            Err(CacheError::Compile { .. })
        ));
    });
}

#[test]
fn a_panicking_compiler_wakes_every_waiter_and_leaves_the_cache_usable() {
    let cache = VariantCache::<String>::new();
    let k = key(&["SKIN"], 7);
    let barrier = Barrier::new(4);
    let results: Vec<Result<String, CacheError<Infallible>>> = thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    barrier.wait();
                    cache.get_or_compile(&k, |_| {
                        wait_for_joiners(&cache, 3);
                        panic!("naga back end exploded")
                    })
                })
            })
            .collect();
        // No requester unwinds: each gets an error.
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for result in results {
        match result {
            Err(CacheError::Panicked {
                message,
                key: failed,
                ..
            }) => {
                assert_eq!(message, "naga back end exploded");
                assert_eq!(failed, k);
            }
            other => panic!("expected Panicked, got {other:?}"),
        }
    }
    assert!(!cache.contains(&k));
    let stats = cache.stats();
    assert_eq!(
        (stats.compiles, stats.failures, stats.joined_waits),
        (1, 1, 3)
    );
    // Usable afterwards: the next request compiles again and is cached.
    let artifact = cache
        .get_or_compile(&k, |k| Ok::<_, Infallible>(k.to_string()))
        .unwrap();
    assert_eq!(artifact, "Lit/Forward[SKIN]@7");
    assert!(cache.contains(&k));
    assert_eq!(cache.stats().compiles, 2);
}

#[test]
fn a_panicking_weigher_still_wakes_the_waiters() {
    let cache = VariantCache::<String>::with_weigher(None, |artifact: &String| {
        if artifact == "poison" {
            panic!("cannot weigh");
        }
        artifact.len() as u64
    });
    let k = key(&["FOG"], 7);
    let (started_tx, started_rx) = mpsc::channel();
    thread::scope(|scope| {
        let leader = scope.spawn(|| {
            cache.get_or_compile(&k, |_| {
                started_tx.send(()).unwrap();
                wait_for_joiners(&cache, 1);
                Ok::<_, Infallible>("poison".to_owned())
            })
        });
        started_rx.recv().unwrap();
        let waiter = cache.get_or_compile(&k, |_| Ok::<_, Infallible>(String::new()));
        assert!(
            matches!(waiter, Err(CacheError::Panicked { .. })),
            "{waiter:?}"
        );
        // The weigher's panic is the leader's own bug: it unwinds to the leader.
        assert!(leader.join().is_err());
    });
    assert!(!cache.contains(&k));
    let again = cache.get_or_compile(&k, |_| Ok::<_, Infallible>("fine".to_owned()));
    assert_eq!(again.unwrap(), "fine");
}
