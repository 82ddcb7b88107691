//! The remote level of the store: a shared cache on Redis (one server or a Cluster).
//!
//! Design decisions:
//! - The remote is a cache, never a dependency. Every failure (refused connection, timeout,
//!   full memory, refused write) is absorbed here: a read becomes a miss, a write is skipped,
//!   and the first failure of each kind is kept for one warning in the build's report.
//!   After a connection failure the remote is left alone for [`RETRY_AFTER`], so that a
//!   server that went away costs one timeout, not one per artifact.
//! - A round trip has one deadline ([`RemoteConfig::timeout`]): connecting, sending and the
//!   whole reply, however slowly it arrives ([`conn`]). A build never waits on the remote
//!   longer than that per round trip, and after a failure not at all.
//! - Fast across a network: reads and writes go in pipelines of up to [`BATCH`] commands
//!   (one round trip each), never one blocking round trip per artifact. Pipelines of `GET`
//!   rather than `MGET`, because a pipeline of single-key commands also works on a Cluster,
//!   where the keys of one `MGET` must share a hash slot.
//! - Bounded memory whatever the server sends: kiln speaks the protocol itself ([`resp`]) so
//!   that a value's length is judged from its header before it is read. A value over
//!   [`RemoteConfig::max_value_bytes`] is rejected unread; one round trip holds at most
//!   [`ROUND_TRIP_BYTES`] of values (the rest are asked again in the next one).
//! - A value vouches for itself ([`value`]): its own key, length and checksum, and with a
//!   shared secret ([`RemoteKey`], `KILN_REMOTE_KEY`) a keyed MAC, so that a value nobody
//!   with the secret wrote is rejected, never served.
//! - Credentials never reach a message: every message names the server by [`redact`]ed URL,
//!   and no error kiln makes carries a credential.

mod cluster;
mod conn;
mod resp;
mod session;
mod url;
mod value;

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::{ContentKey, Namespace};
use conn::{Deadline, LinkError, Setup};
use session::{Answer, Command, Reading, Session};

pub use conn::LinkError as RemoteLinkError;
pub use resp::Reply;
pub use url::{redact, UrlProblem};
pub use value::{decode, encode, Rejected, RemoteKey};

/// Commands per pipeline (one round trip).
pub const BATCH: usize = 256;

/// Bytes of values per upload pipeline, so one round trip never carries more than this.
const BATCH_BYTES: usize = 8 << 20;

/// The default cap on one value read from (or written to) the remote: larger than any
/// artifact kiln makes from sources of up to a few MiB, small enough that a value is never
/// a threat to the machine.
pub const MAX_VALUE_BYTES: usize = 64 << 20;

/// Bytes of values one round trip holds at most (besides one value up to the cap).
pub const ROUND_TRIP_BYTES: usize = 64 << 20;

/// The longest recorded compile time read (a decimal `u64`).
const MAX_COST_BYTES: usize = 20;

/// How long the remote is left alone after it could not be reached.
pub const RETRY_AFTER: Duration = Duration::from_secs(30);

/// Every key kiln writes starts with this. Version 2: values carry a MAC field, so values
/// of version 1 (under `kiln:v1:`) and 2 never meet under one key.
pub const KEY_PREFIX: &str = "kiln:v2:";

/// Where the remote cache is and how to use it.
#[derive(Clone, PartialEq, Eq)]
pub struct RemoteConfig {
    /// `redis://[user:password@]host[:port][/db]`, `rediss://` for TLS; for a Redis Cluster,
    /// `redis+cluster://host1:port1,host2:port2` (or `rediss+cluster://`).
    pub url: String,
    /// Read what others uploaded, never write.
    pub read_only: bool,
    /// Connecting gives up after this long (and never after the round trip's deadline).
    pub connect_timeout: Duration,
    /// One round trip (connecting, sending a pipeline, reading every reply) gives up after
    /// this long.
    pub timeout: Duration,
    /// Values longer than this are rejected unread, and not uploaded.
    pub max_value_bytes: usize,
    /// Bytes of values one round trip holds at most (besides its first value, up to
    /// `max_value_bytes`); what is left is asked again in the next round trip.
    pub round_trip_bytes: usize,
    /// The shared secret's key: values are written with a MAC, and read only with a valid
    /// one.
    pub key: Option<RemoteKey>,
}

impl RemoteConfig {
    /// The defaults: read-write, 2 s to connect, 10 s per round trip, values up to
    /// [`MAX_VALUE_BYTES`], no key.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            read_only: false,
            connect_timeout: Duration::from_secs(2),
            timeout: Duration::from_secs(10),
            max_value_bytes: MAX_VALUE_BYTES,
            round_trip_bytes: ROUND_TRIP_BYTES,
            key: None,
        }
    }
}

impl fmt::Debug for RemoteConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteConfig")
            .field("url", &redact(&self.url))
            .field("read_only", &self.read_only)
            .field("connect_timeout", &self.connect_timeout)
            .field("timeout", &self.timeout)
            .field("max_value_bytes", &self.max_value_bytes)
            .field("round_trip_bytes", &self.round_trip_bytes)
            .field("key", &self.key)
            .finish()
    }
}

/// A remote URL that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("remote cache {url}: {problem}")]
pub struct RemoteConfigError {
    /// The URL, redacted.
    pub url: String,
    /// What is wrong with it.
    pub problem: UrlProblem,
}

/// The Redis key of an artifact: prefix, namespace, content key.
pub fn artifact_key(ns: &Namespace, key: &ContentKey) -> String {
    format!("{KEY_PREFIX}a:{}:{}", ns.dir_name(), key.to_hex())
}

/// The Redis key of a job's recorded compile time; `provisional` for one recorded by a shard
/// (see [`RemoteStore::record_costs`]).
pub fn cost_key(job: &ContentKey, provisional: bool) -> String {
    let kind = if provisional { "cost-pending" } else { "cost" };
    format!("{KEY_PREFIX}{kind}:{}", job.to_hex())
}

/// What the remote did since the last [`RemoteStore::take_report`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RemoteReport {
    /// The remote, redacted.
    pub url: String,
    /// Whether it was used read-only.
    pub read_only: bool,
    /// Whether values are checked against (and written with) a key's MAC.
    pub keyed: bool,
    /// Artifacts fetched (and verified).
    pub fetched: usize,
    /// Artifacts asked for and not there.
    pub missed: usize,
    /// Values rejected: damaged, of another format, stored under another key, without a
    /// valid MAC, or over the size cap.
    pub rejected: usize,
    /// The first rejected value: its key and why.
    pub first_rejected: Option<String>,
    /// Artifacts uploaded.
    pub uploaded: usize,
    /// Artifacts not uploaded because the remote refused or failed (or over the cap).
    pub upload_failed: usize,
    /// Reads not answered (the remote was down, slow or failing): compiled locally.
    pub read_failed: usize,
    /// Round trips made.
    pub round_trips: usize,
    /// The first failure to reach or use the remote (the build's one warning about it).
    pub unavailable: Option<String>,
    /// The first write the remote refused (full, read-only replica, no permission).
    pub writes_refused: Option<String>,
}

/// Connection state: the connections (made on first use) and when to retry after a failure.
enum Link {
    Idle,
    Up(Session),
    Down(Instant),
}

/// The remote cache on Redis. Thread-safe; one connection (per Cluster node), pipelines
/// for batches.
pub struct RemoteStore {
    config: RemoteConfig,
    redacted: String,
    setup: Setup,
    link: Mutex<Link>,
    report: Mutex<RemoteReport>,
    /// Writes refused in this build: stop trying until the next report is taken.
    writes_off: Mutex<bool>,
}

impl fmt::Debug for RemoteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteStore")
            .field("url", &self.redacted)
            .field("read_only", &self.config.read_only)
            .field("keyed", &self.config.key.is_some())
            .finish()
    }
}

impl RemoteStore {
    /// Checks the URL; connects on first use, never here (a server that is down must not
    /// stop a build from starting).
    pub fn new(config: RemoteConfig) -> Result<Self, RemoteConfigError> {
        let redacted = redact(&config.url);
        let endpoint = url::Endpoint::parse(&config.url).map_err(|problem| RemoteConfigError {
            url: redacted.clone(),
            problem,
        })?;
        let report = RemoteReport {
            url: redacted.clone(),
            read_only: config.read_only,
            keyed: config.key.is_some(),
            ..RemoteReport::default()
        };
        Ok(Self {
            setup: Setup::new(endpoint, config.connect_timeout),
            config,
            redacted,
            link: Mutex::new(Link::Idle),
            report: Mutex::new(report),
            writes_off: Mutex::new(false),
        })
    }

    /// The URL, redacted.
    pub fn url(&self) -> &str {
        &self.redacted
    }

    /// Whether uploads are off by configuration.
    pub fn read_only(&self) -> bool {
        self.config.read_only
    }

    /// What happened since the last call; counters start again from zero.
    pub fn take_report(&self) -> RemoteReport {
        *self.writes_off.lock() = false;
        let mut report = self.report.lock();
        let fresh = RemoteReport {
            url: report.url.clone(),
            read_only: report.read_only,
            keyed: report.keyed,
            ..RemoteReport::default()
        };
        std::mem::replace(&mut *report, fresh)
    }

    /// One round trip, connecting first if needed. `None` when the remote cannot be used
    /// now (the failure is recorded once, and the remote left alone for [`RETRY_AFTER`]).
    fn exchange(&self, commands: &[Command], reading: Reading) -> Option<Vec<Answer>> {
        let mut link = self.link.lock();
        if let Link::Down(since) = *link {
            if since.elapsed() < RETRY_AFTER {
                return None;
            }
            *link = Link::Idle;
        }
        if let Link::Idle = *link {
            *link = Link::Up(Session::new(&self.setup));
        }
        let Link::Up(session) = &mut *link else {
            return None;
        };
        self.report.lock().round_trips += 1;
        let deadline = Deadline::after(self.config.timeout);
        match session.exchange(&self.setup, commands, reading, deadline) {
            Ok(answers) => Some(answers),
            Err(e) => {
                self.unavailable(&e);
                *link = Link::Down(Instant::now());
                None
            }
        }
    }

    fn unavailable(&self, e: &LinkError) {
        let mut report = self.report.lock();
        if report.unavailable.is_none() {
            report.unavailable = Some(e.to_string());
        }
    }

    fn reject(report: &mut RemoteReport, ns: &Namespace, key: &ContentKey, why: Rejected) {
        report.rejected += 1;
        if report.first_rejected.is_none() {
            report.first_rejected = Some(format!("{}: {why}", artifact_key(ns, key)));
        }
    }

    /// Fetches the artifacts of `keys`, in pipelines of [`BATCH`]. After each round trip,
    /// `each` receives the payloads it verified, by index into `keys`; every key not given
    /// to `each` is a miss (missing, rejected, or the remote failed: all counted). At most
    /// one round trip's values ([`RemoteConfig::round_trip_bytes`], or one value up to the
    /// cap) are held here at a time.
    pub fn get_each(
        &self,
        keys: &[(&Namespace, &ContentKey)],
        mut each: impl FnMut(Vec<(usize, Vec<u8>)>),
    ) {
        let reading = Reading {
            cap: self.config.max_value_bytes,
            budget: self.config.round_trip_bytes,
        };
        let mut pending: VecDeque<usize> = (0..keys.len()).collect();
        while !pending.is_empty() {
            let batch: Vec<usize> = pending.drain(..pending.len().min(BATCH)).collect();
            let commands: Vec<Command> = batch
                .iter()
                .map(|&i| Command::new(&[b"GET", artifact_key(keys[i].0, keys[i].1).as_bytes()]))
                .collect();
            let Some(answers) = self.exchange(&commands, reading) else {
                self.report.lock().read_failed += batch.len();
                continue;
            };
            let mut found = Vec::new();
            let mut again = Vec::new();
            {
                let mut report = self.report.lock();
                for (&i, answer) in batch.iter().zip(answers) {
                    let (ns, key) = keys[i];
                    match answer {
                        Answer::Reply(Reply::Nil) => report.missed += 1,
                        Answer::Reply(Reply::Bulk(value)) => {
                            match decode(ns, key, self.config.key.as_ref(), value) {
                                Ok(payload) => {
                                    report.fetched += 1;
                                    found.push((i, payload));
                                }
                                Err(why) => Self::reject(&mut report, ns, key, why),
                            }
                        }
                        Answer::Reply(Reply::Error(message)) => {
                            // The server refused this read alone (a key of another type,
                            // a Cluster slot that moved twice): compiled locally.
                            report.read_failed += 1;
                            if report.unavailable.is_none() {
                                report.unavailable =
                                    Some(format!("the server refused a read: {message}"));
                            }
                        }
                        Answer::Reply(_) => Self::reject(&mut report, ns, key, Rejected::Format),
                        Answer::TooLarge(len) => Self::reject(
                            &mut report,
                            ns,
                            key,
                            Rejected::TooLarge {
                                len,
                                cap: self.config.max_value_bytes,
                            },
                        ),
                        Answer::Unread => again.push(i),
                    }
                }
            }
            if again.len() == batch.len() {
                // Cannot happen (a round trip always answers its first command); never loop.
                self.report.lock().read_failed += again.len();
                again.clear();
            }
            for i in again.into_iter().rev() {
                pending.push_front(i);
            }
            each(found);
        }
    }

    /// [`Self::get_each`], collected: each answer is `Some` payload (verified) or `None`.
    pub fn get_many(&self, keys: &[(&Namespace, &ContentKey)]) -> Vec<Option<Vec<u8>>> {
        let mut out = vec![None; keys.len()];
        self.get_each(keys, |found| {
            for (i, payload) in found {
                out[i] = Some(payload);
            }
        });
        out
    }

    /// Which of `keys` the remote lacks (`true`: absent, or unknown because the remote
    /// failed, so that a caller uploads rather than trusts).
    pub fn lacks(&self, keys: &[(&Namespace, &ContentKey)]) -> Vec<bool> {
        let mut out = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(BATCH) {
            let commands: Vec<Command> = chunk
                .iter()
                .map(|(ns, key)| Command::new(&[b"EXISTS", artifact_key(ns, key).as_bytes()]))
                .collect();
            match self.exchange(&commands, small_replies()) {
                Some(answers) => out.extend(
                    answers
                        .into_iter()
                        .map(|a| !matches!(a, Answer::Reply(Reply::Int(n)) if n > 0)),
                ),
                None => out.extend(std::iter::repeat_n(true, chunk.len())),
            }
        }
        out
    }

    /// Uploads `entries` in pipelines (at most [`BATCH`] entries or 8 MiB each). Does
    /// nothing when read-only; a refusal (full, read-only replica, no permission) stops
    /// the uploads of this build and is reported once. An entry over the value cap is not
    /// uploaded (every reader would reject it).
    pub fn put_many(&self, entries: &[(&Namespace, &ContentKey, &[u8])]) {
        if self.config.read_only || entries.is_empty() {
            return;
        }
        let mut start = 0;
        while start < entries.len() {
            let mut end = start;
            let mut bytes = 0;
            while end < entries.len()
                && end - start < BATCH
                && (bytes < BATCH_BYTES || end == start)
            {
                bytes += entries[end].2.len();
                end += 1;
            }
            let chunk = &entries[start..end];
            start = end;
            if *self.writes_off.lock() {
                self.report.lock().upload_failed += chunk.len();
                continue;
            }
            let mut commands = Vec::with_capacity(chunk.len());
            for (ns, key, payload) in chunk {
                let value = encode(ns, key, self.config.key.as_ref(), payload);
                if value.len() > self.config.max_value_bytes {
                    self.report.lock().upload_failed += 1;
                    continue;
                }
                commands.push(Command::new(&[
                    b"SET",
                    artifact_key(ns, key).as_bytes(),
                    &value,
                ]));
            }
            if commands.is_empty() {
                continue;
            }
            let Some(answers) = self.exchange(&commands, small_replies()) else {
                self.report.lock().upload_failed += commands.len();
                continue;
            };
            let mut report = self.report.lock();
            for answer in answers {
                match answer {
                    Answer::Reply(Reply::Status(_)) => report.uploaded += 1,
                    Answer::Reply(Reply::Error(message)) => {
                        report.upload_failed += 1;
                        *self.writes_off.lock() = true;
                        if report.writes_refused.is_none() {
                            report.writes_refused = Some(message);
                        }
                    }
                    _ => report.upload_failed += 1,
                }
            }
        }
    }

    /// Records compile times (µs) of jobs, never replacing one already recorded (so that
    /// what a partition reads does not move). A shard's are `provisional`: shards of one
    /// farm run partition concurrently, so they must not see each other's; a later plain
    /// build confirms them ([`RemoteStore::confirm_costs`]).
    pub fn record_costs(&self, costs: &[(ContentKey, u64)], provisional: bool) {
        if self.config.read_only || costs.is_empty() || *self.writes_off.lock() {
            return;
        }
        for chunk in costs.chunks(BATCH) {
            let commands: Vec<Command> = chunk
                .iter()
                .map(|(job, micros)| {
                    Command::new(&[
                        b"SET",
                        cost_key(job, provisional).as_bytes(),
                        micros.to_string().as_bytes(),
                        b"NX",
                    ])
                })
                .collect();
            let Some(answers) = self.exchange(&commands, small_replies()) else {
                return;
            };
            let refused = answers.into_iter().find_map(|a| match a {
                Answer::Reply(Reply::Error(message)) => Some(message),
                _ => None,
            });
            if let Some(message) = refused {
                *self.writes_off.lock() = true;
                let mut report = self.report.lock();
                if report.writes_refused.is_none() {
                    report.writes_refused = Some(message);
                }
                return;
            }
        }
    }

    /// The recorded compile times (µs) of `jobs` (`None`: none recorded, or the remote is
    /// unavailable).
    pub fn costs(&self, jobs: &[ContentKey], provisional: bool) -> Vec<Option<u64>> {
        let mut out = Vec::with_capacity(jobs.len());
        let reading = Reading {
            cap: MAX_COST_BYTES,
            budget: MAX_COST_BYTES * BATCH,
        };
        for chunk in jobs.chunks(BATCH) {
            let commands: Vec<Command> = chunk
                .iter()
                .map(|job| Command::new(&[b"GET", cost_key(job, provisional).as_bytes()]))
                .collect();
            match self.exchange(&commands, reading) {
                Some(answers) => out.extend(answers.into_iter().map(|a| match a {
                    Answer::Reply(Reply::Bulk(text)) => {
                        std::str::from_utf8(&text).ok()?.parse::<u64>().ok()
                    }
                    _ => None,
                })),
                None => out.extend(std::iter::repeat_n(None, chunk.len())),
            }
        }
        out
    }

    /// Turns the provisional costs of `jobs` that have no confirmed cost into confirmed
    /// ones (a plain build after a farm run does this, so the next farm run partitions
    /// with them).
    pub fn confirm_costs(&self, jobs: &[ContentKey]) {
        if self.config.read_only || jobs.is_empty() {
            return;
        }
        let confirmed = self.costs(jobs, false);
        let open: Vec<ContentKey> = jobs
            .iter()
            .zip(&confirmed)
            .filter(|(_, cost)| cost.is_none())
            .map(|(job, _)| *job)
            .collect();
        if open.is_empty() {
            return;
        }
        let pending = self.costs(&open, true);
        let found: Vec<(ContentKey, u64)> = open
            .into_iter()
            .zip(pending)
            .filter_map(|(job, cost)| Some((job, cost?)))
            .collect();
        self.record_costs(&found, false);
    }
}

/// Replies that hold no value (`OK`, a number, an error).
fn small_replies() -> Reading {
    Reading {
        cap: resp::MAX_LINE,
        budget: resp::MAX_LINE * BATCH,
    }
}

/// What [`fuzz_reply`] read.
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct FuzzFindings {
    /// Replies read.
    pub replies: usize,
    /// The longest value read.
    pub longest: usize,
    /// Bytes of values read in all.
    pub total: usize,
    /// Values that decoded (with or without the key).
    pub decoded: usize,
    /// Whether a slot map was read.
    pub slot_map: bool,
}

/// Fuzzing entry point. The first byte chooses what `data[1..]` is read as: even, the
/// replies of a pipeline of `GET`s, with a value cap of `cap` and a round trip's budget of
/// `budget` bytes, as [`RemoteStore::get_each`] reads them, each value decoded as an
/// artifact with and without a key; odd, a `CLUSTER SLOTS` reply, read into a slot map.
/// Nothing may panic, and the fuzz target checks that nothing read (nor any allocation)
/// exceeds the caps.
#[doc(hidden)]
pub fn fuzz_reply(data: &[u8], cap: usize, budget: usize) -> FuzzFindings {
    let mut findings = FuzzFindings::default();
    let Some((&mode, mut input)) = data.split_first() else {
        return findings;
    };
    if mode % 2 == 1 {
        if let Ok(reply) = resp::read_reply(&mut input, session::SLOTS_ALLOWANCE) {
            findings.replies = 1;
            let asked = url::Node {
                host: "seed".into(),
                port: 6379,
            };
            findings.slot_map = cluster::SlotMap::from_reply(reply, &asked).is_ok();
        }
        return findings;
    }
    let ns = Namespace::new("spirv", "fuzz");
    let key = ContentKey::hash(b"fuzz");
    let secret = RemoteKey::from_secret(b"fuzzing secret, 32 bytes long...");
    let mut held = session::Held::new(Reading { cap, budget });
    while let Ok(reply) = resp::read_reply(&mut input, held.allowance()) {
        held.hold(&reply);
        findings.replies += 1;
        if let Reply::Bulk(value) = reply {
            findings.longest = findings.longest.max(value.len());
            findings.total += value.len();
            let keyed = decode(&ns, &key, secret.as_ref(), value.clone()).is_ok();
            if decode(&ns, &key, None, value).is_ok() || keyed {
                findings.decoded += 1;
            }
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_urls_are_errors_that_hide_the_password() {
        for url in [
            "http://:pw123pw@h",
            "redis://:pw123pw@h:x/0",
            "redis://:pw123pw#@h/0#frag",
            "redis://:Tr0ub4dor&3/x@h:99999/0",
        ] {
            let e = RemoteStore::new(RemoteConfig::new(url)).unwrap_err();
            let text = e.to_string();
            assert!(
                !text.contains("pw123pw") && !text.contains("Tr0ub4dor"),
                "{text}"
            );
            assert!(!format!("{e:?}").contains("pw123pw"), "{e:?}");
        }
        assert!(RemoteStore::new(RemoteConfig::new("redis+cluster://")).is_err());
        assert!(RemoteStore::new(RemoteConfig::new("redis://127.0.0.1:1/0")).is_ok());
        let config = RemoteConfig {
            key: RemoteKey::from_secret(b"a secret of sixteen+ bytes"),
            ..RemoteConfig::new("redis://:pw123pw@h/0")
        };
        assert!(!format!("{config:?}").contains("pw123pw"));
        assert!(!format!("{config:?}").contains("sixteen"));
    }

    #[test]
    fn the_fuzz_entry_point_keeps_to_its_caps() {
        let value = encode(
            &Namespace::new("spirv", "fuzz"),
            &ContentKey::hash(b"fuzz"),
            None,
            b"spirv words",
        );
        let mut data = format!("${}\r\n", value.len()).into_bytes();
        data.extend_from_slice(&value);
        data.extend_from_slice(b"\r\n$-1\r\n$100000\r\n");
        data.insert(0, 0);
        let findings = fuzz_reply(&data, 1000, 2000);
        assert_eq!(findings.replies, 2);
        assert_eq!(findings.decoded, 1);
        assert_eq!(findings.longest, value.len());
    }
}
