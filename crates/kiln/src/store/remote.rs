//! The remote level of the store: a shared cache on Redis (one server or a Cluster).
//!
//! Design decisions:
//! - The remote is a cache, never a dependency. Every failure (refused connection, timeout,
//!   full memory, refused write) is absorbed here: a read becomes a miss, a write is skipped,
//!   and the first failure of each kind is kept for one warning in the build's report.
//!   After a connection failure the remote is left alone for [`RETRY_AFTER`], so that a
//!   server that went away costs one timeout, not one per artifact.
//! - Fast across a network: reads and writes go in pipelines of up to [`BATCH`] commands
//!   (one round trip each), never one blocking round trip per artifact. Pipelines of `GET`
//!   rather than `MGET`, because a pipeline of single-key commands also works on a Cluster,
//!   where the keys of one `MGET` must share a hash slot.
//! - A value vouches for itself: it carries its own key (namespace and content key), its
//!   length and its blake3 checksum ([`encode`]); a value that is damaged, truncated, of
//!   another format, or stored under another key is rejected and counted, never served.
//! - Credentials never reach a message: every message names the server by [`redact`]ed URL.

use std::fmt;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::ConnectionLike;

use super::verify::{self, CorruptReason, CHECKSUM_LEN};
use super::{ContentKey, Namespace};

/// Commands per pipeline (one round trip).
pub const BATCH: usize = 256;

/// Bytes of values per upload pipeline, so one round trip never carries more than this.
const BATCH_BYTES: usize = 8 << 20;

/// How long the remote is left alone after it could not be reached.
pub const RETRY_AFTER: Duration = Duration::from_secs(30);

/// The format tag every value starts with.
const MAGIC: &[u8; 8] = b"kilnrv1\n";

/// Every key kiln writes starts with this.
pub const KEY_PREFIX: &str = "kiln:v1:";

/// Where the remote cache is and how to use it.
#[derive(Clone, PartialEq, Eq)]
pub struct RemoteConfig {
    /// `redis://[user:password@]host[:port][/db]`, `rediss://` for TLS; for a Redis Cluster,
    /// `redis+cluster://host1:port1,host2:port2` (or `rediss+cluster://`).
    pub url: String,
    /// Read what others uploaded, never write.
    pub read_only: bool,
    /// Connecting gives up after this long.
    pub connect_timeout: Duration,
    /// One command (or pipeline) gives up after this long.
    pub io_timeout: Duration,
}

impl RemoteConfig {
    /// The defaults: read-write, 2 s to connect, 10 s per round trip.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            read_only: false,
            connect_timeout: Duration::from_secs(2),
            io_timeout: Duration::from_secs(10),
        }
    }
}

impl fmt::Debug for RemoteConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteConfig")
            .field("url", &redact(&self.url))
            .field("read_only", &self.read_only)
            .field("connect_timeout", &self.connect_timeout)
            .field("io_timeout", &self.io_timeout)
            .finish()
    }
}

/// `url` with any user name and password replaced by `***`: how every message names it.
pub fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        // Not a URL we can read: say nothing of it that could be a secret.
        return "<remote URL>".to_owned();
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    match authority.rfind('@') {
        Some(at) => format!(
            "{}***@{}{}",
            &url[..scheme_end + 3],
            &authority[at + 1..],
            &rest[authority_end..]
        ),
        None => url.to_owned(),
    }
}

/// A remote URL that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("remote cache {url}: {problem}")]
pub struct RemoteConfigError {
    /// The URL, redacted.
    pub url: String,
    /// What is wrong with it.
    pub problem: String,
}

/// Why a value read from the remote was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rejected {
    /// Not a kiln value of this format (another tool's, or damaged in its header).
    Format,
    /// A kiln value, but for another key (stored under the wrong name).
    WrongKey,
    /// The payload fails its length or checksum.
    Corrupt(CorruptReason),
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejected::Format => f.write_str("not a kiln value"),
            Rejected::WrongKey => f.write_str("value belongs to another key"),
            Rejected::Corrupt(reason) => reason.fmt(f),
        }
    }
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

/// A value as stored: the format tag, its own key (namespace name, content key), the
/// payload's blake3 checksum and length, the payload.
pub fn encode(ns: &Namespace, key: &ContentKey, payload: &[u8]) -> Vec<u8> {
    let ns_name = ns.dir_name().as_bytes();
    let mut value =
        Vec::with_capacity(MAGIC.len() + 4 + ns_name.len() + 32 + 32 + 8 + payload.len());
    value.extend_from_slice(MAGIC);
    value.extend_from_slice(&(ns_name.len() as u32).to_le_bytes());
    value.extend_from_slice(ns_name);
    value.extend_from_slice(key.as_bytes());
    value.extend_from_slice(&verify::checksum(payload));
    value.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    value.extend_from_slice(payload);
    value
}

/// The payload of `value` if it is the intact value of `key` in `ns`.
pub fn decode(ns: &Namespace, key: &ContentKey, mut value: Vec<u8>) -> Result<Vec<u8>, Rejected> {
    fn take<'a>(rest: &mut &'a [u8], n: usize) -> Result<&'a [u8], Rejected> {
        if rest.len() < n {
            return Err(Rejected::Format);
        }
        let (head, tail) = rest.split_at(n);
        *rest = tail;
        Ok(head)
    }
    let mut rest = &value[..];
    if take(&mut rest, MAGIC.len())? != MAGIC {
        return Err(Rejected::Format);
    }
    let ns_len = take(&mut rest, 4)?;
    let ns_len = u32::from_le_bytes([ns_len[0], ns_len[1], ns_len[2], ns_len[3]]) as usize;
    let ns_name = take(&mut rest, ns_len)?;
    let content = take(&mut rest, 32)?;
    if ns_name != ns.dir_name().as_bytes() || content != key.as_bytes() {
        return Err(Rejected::WrongKey);
    }
    let checksum = take(&mut rest, CHECKSUM_LEN)?.to_vec();
    let len = take(&mut rest, 8)?;
    let mut len_bytes = [0u8; 8];
    len_bytes.copy_from_slice(len);
    let declared = u64::from_le_bytes(len_bytes);
    verify::verify(declared, &checksum, rest).map_err(Rejected::Corrupt)?;
    let header = value.len() - rest.len();
    value.drain(..header);
    Ok(value)
}

/// What the remote did since the last [`RemoteStore::take_report`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RemoteReport {
    /// The remote, redacted.
    pub url: String,
    /// Whether it was used read-only.
    pub read_only: bool,
    /// Artifacts fetched (and verified).
    pub fetched: usize,
    /// Artifacts asked for and not there.
    pub missed: usize,
    /// Values rejected: damaged, of another format or stored under another key.
    pub rejected: usize,
    /// The first rejected value: its key and why.
    pub first_rejected: Option<String>,
    /// Artifacts uploaded.
    pub uploaded: usize,
    /// Artifacts not uploaded because the remote refused or failed.
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

/// Connection state: the connection (made on first use) and when to retry after a failure.
enum Link {
    Idle,
    Single(redis::Connection),
    Cluster(Box<redis::cluster::ClusterConnection>),
    Down(Instant),
}

enum Target {
    Single(redis::Client),
    Cluster(redis::cluster::ClusterClient),
}

/// The remote cache on Redis. Thread-safe; one connection, pipelines for batches.
pub struct RemoteStore {
    config: RemoteConfig,
    redacted: String,
    target: Target,
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
            .finish()
    }
}

/// Which failures mean "do not talk to this server for a while".
fn is_link_failure(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_unrecoverable_error()
}

impl RemoteStore {
    /// Checks the URL; connects on first use, never here (a server that is down must not
    /// stop a build from starting).
    pub fn new(config: RemoteConfig) -> Result<Self, RemoteConfigError> {
        let redacted = redact(&config.url);
        let bad = |problem: String| RemoteConfigError {
            url: redacted.clone(),
            problem,
        };
        let url = config.url.trim();
        let target = if let Some(rest) = url
            .strip_prefix("redis+cluster://")
            .map(|r| ("redis", r))
            .or_else(|| url.strip_prefix("rediss+cluster://").map(|r| ("rediss", r)))
        {
            let (scheme, rest) = rest;
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let (userinfo, hosts) = match authority.rfind('@') {
                Some(at) => (&authority[..=at], &authority[at + 1..]),
                None => ("", authority),
            };
            let nodes: Vec<String> = hosts
                .split(',')
                .filter(|h| !h.is_empty())
                .map(|h| format!("{scheme}://{userinfo}{h}{path}"))
                .collect();
            if nodes.is_empty() {
                return Err(bad("a cluster URL needs at least one host".into()));
            }
            let client = redis::cluster::ClusterClientBuilder::new(nodes)
                .connection_timeout(config.connect_timeout)
                .response_timeout(config.io_timeout)
                .retries(1)
                .build()
                .map_err(|e| bad(scrub(&e.to_string(), &config.url)))?;
            Target::Cluster(client)
        } else {
            if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
                return Err(bad(
                    "use redis://, rediss:// (TLS), redis+cluster:// or rediss+cluster://".into(),
                ));
            }
            let client =
                redis::Client::open(url).map_err(|e| bad(scrub(&e.to_string(), &config.url)))?;
            Target::Single(client)
        };
        let report = RemoteReport {
            url: redacted.clone(),
            read_only: config.read_only,
            ..RemoteReport::default()
        };
        Ok(Self {
            config,
            redacted,
            target,
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
            ..RemoteReport::default()
        };
        std::mem::replace(&mut *report, fresh)
    }

    /// Runs `pipe` on the connection, connecting first if needed. `None` when the remote
    /// cannot be used now (the failure is recorded once).
    fn run<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
    ) -> Option<Result<T, redis::RedisError>> {
        let mut link = self.link.lock();
        if let Link::Down(since) = *link {
            if since.elapsed() < RETRY_AFTER {
                return None;
            }
            *link = Link::Idle;
        }
        if let Link::Idle = *link {
            match self.connect() {
                Ok(connected) => *link = connected,
                Err(e) => {
                    self.unavailable(&e);
                    *link = Link::Down(Instant::now());
                    return None;
                }
            }
        }
        self.report.lock().round_trips += 1;
        let result = match &mut *link {
            Link::Single(con) => pipe.query::<T>(con),
            Link::Cluster(con) => {
                // A Cluster pipeline sends each command to its key's node (a plain one would
                // send them all to the first key's). Results of ignored commands come back
                // too: callers that ignore them ask for `()`.
                let mut cluster = redis::cluster::cluster_pipe();
                for command in pipe.cmd_iter() {
                    cluster.add_command(command.clone());
                }
                cluster.query::<T>(con)
            }
            Link::Idle | Link::Down(_) => return None,
        };
        if let Err(e) = &result {
            if is_link_failure(e) {
                self.unavailable(e);
                *link = Link::Down(Instant::now());
                return None;
            }
        }
        Some(result)
    }

    fn connect(&self) -> Result<Link, redis::RedisError> {
        match &self.target {
            Target::Single(client) => {
                let con = client.get_connection_with_timeout(self.config.connect_timeout)?;
                con.set_read_timeout(Some(self.config.io_timeout))?;
                con.set_write_timeout(Some(self.config.io_timeout))?;
                let mut link = Link::Single(con);
                // A server that accepts connections but does not answer fails here, once.
                if let Link::Single(con) = &mut link {
                    if !con.check_connection() {
                        return Err(redis::RedisError::from(std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            "no answer to PING",
                        )));
                    }
                }
                Ok(link)
            }
            Target::Cluster(client) => Ok(Link::Cluster(Box::new(client.get_connection()?))),
        }
    }

    fn unavailable(&self, e: &redis::RedisError) {
        let mut report = self.report.lock();
        if report.unavailable.is_none() {
            report.unavailable = Some(scrub(&e.to_string(), &self.config.url));
        }
    }

    /// Fetches the artifacts of `keys`, in pipelines of [`BATCH`]. Each answer is `Some`
    /// payload (verified) or `None` (missing, rejected, or the remote failed: all counted).
    pub fn get_many(&self, keys: &[(&Namespace, &ContentKey)]) -> Vec<Option<Vec<u8>>> {
        let mut out = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(BATCH) {
            let mut pipe = redis::pipe();
            for (ns, key) in chunk {
                pipe.cmd("GET").arg(artifact_key(ns, key));
            }
            let values: Vec<Option<Vec<u8>>> = match self.run(&pipe) {
                Some(Ok(values)) => values,
                Some(Err(e)) => {
                    // A server error that is not a link failure: these reads fail alone.
                    self.unavailable(&e);
                    self.report.lock().read_failed += chunk.len();
                    out.extend(std::iter::repeat_n(None, chunk.len()));
                    continue;
                }
                None => {
                    self.report.lock().read_failed += chunk.len();
                    out.extend(std::iter::repeat_n(None, chunk.len()));
                    continue;
                }
            };
            let mut report = self.report.lock();
            for ((ns, key), value) in chunk.iter().zip(values) {
                let Some(value) = value else {
                    report.missed += 1;
                    out.push(None);
                    continue;
                };
                match decode(ns, key, value) {
                    Ok(payload) => {
                        report.fetched += 1;
                        out.push(Some(payload));
                    }
                    Err(why) => {
                        report.rejected += 1;
                        if report.first_rejected.is_none() {
                            report.first_rejected =
                                Some(format!("{}: {why}", artifact_key(ns, key)));
                        }
                        out.push(None);
                    }
                }
            }
        }
        out
    }

    /// Which of `keys` the remote lacks (`true`: absent, or unknown because the remote
    /// failed, so that a caller uploads rather than trusts).
    pub fn lacks(&self, keys: &[(&Namespace, &ContentKey)]) -> Vec<bool> {
        let mut out = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(BATCH) {
            let mut pipe = redis::pipe();
            for (ns, key) in chunk {
                pipe.cmd("EXISTS").arg(artifact_key(ns, key));
            }
            match self.run::<Vec<u64>>(&pipe) {
                Some(Ok(found)) => out.extend(found.into_iter().map(|n| n == 0)),
                _ => out.extend(std::iter::repeat_n(true, chunk.len())),
            }
        }
        out
    }

    /// Uploads `entries` in pipelines (at most [`BATCH`] entries or 8 MiB each). Does
    /// nothing when read-only; a refusal (full, read-only replica, no permission) stops
    /// the uploads of this build and is reported once.
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
            let mut pipe = redis::pipe();
            for (ns, key, payload) in chunk {
                pipe.cmd("SET")
                    .arg(artifact_key(ns, key))
                    .arg(encode(ns, key, payload))
                    .ignore();
            }
            match self.run::<()>(&pipe) {
                Some(Ok(())) => self.report.lock().uploaded += chunk.len(),
                Some(Err(e)) => {
                    *self.writes_off.lock() = true;
                    let mut report = self.report.lock();
                    report.upload_failed += chunk.len();
                    if report.writes_refused.is_none() {
                        report.writes_refused = Some(scrub(&e.to_string(), &self.config.url));
                    }
                }
                None => self.report.lock().upload_failed += chunk.len(),
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
            let mut pipe = redis::pipe();
            for (job, micros) in chunk {
                pipe.cmd("SET")
                    .arg(cost_key(job, provisional))
                    .arg(*micros)
                    .arg("NX")
                    .ignore();
            }
            if let Some(Err(e)) = self.run::<()>(&pipe) {
                *self.writes_off.lock() = true;
                let mut report = self.report.lock();
                if report.writes_refused.is_none() {
                    report.writes_refused = Some(scrub(&e.to_string(), &self.config.url));
                }
                return;
            }
        }
    }

    /// The recorded compile times (µs) of `jobs` (`None`: none recorded, or the remote is
    /// unavailable).
    pub fn costs(&self, jobs: &[ContentKey], provisional: bool) -> Vec<Option<u64>> {
        let mut out = Vec::with_capacity(jobs.len());
        for chunk in jobs.chunks(BATCH) {
            let mut pipe = redis::pipe();
            for job in chunk {
                pipe.cmd("GET").arg(cost_key(job, provisional));
            }
            match self.run::<Vec<Option<String>>>(&pipe) {
                Some(Ok(values)) => out.extend(
                    values
                        .into_iter()
                        .map(|v| v.and_then(|text| text.parse::<u64>().ok())),
                ),
                _ => out.extend(std::iter::repeat_n(None, chunk.len())),
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

/// `message` with the URL's credentials removed (a client error may quote the URL).
fn scrub(message: &str, url: &str) -> String {
    let mut text = message.replace(url, &redact(url));
    if let Some(scheme_end) = url.find("://") {
        let rest = &url[scheme_end + 3..];
        let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
        if let Some(at) = authority.rfind('@') {
            let userinfo = &authority[..at];
            for secret in userinfo.split(':').filter(|s| s.len() >= 3) {
                text = text.replace(secret, "***");
            }
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns() -> Namespace {
        Namespace::new("spirv", "naga 30")
    }

    #[test]
    fn redact_hides_user_and_password_only() {
        assert_eq!(redact("redis://h:6379/0"), "redis://h:6379/0");
        assert_eq!(redact("redis://:s3cret@h:6379/0"), "redis://***@h:6379/0");
        assert_eq!(redact("rediss://u:p@w@h/1?x=1"), "rediss://***@h/1?x=1");
        assert_eq!(redact("no url s3cret"), "<remote URL>");
        assert_eq!(
            scrub(
                "cannot reach redis://:s3cret@h:1 (s3cret)",
                "redis://:s3cret@h:1"
            ),
            "cannot reach redis://***@h:1 (***)"
        );
    }

    #[test]
    fn a_value_round_trips_and_vouches_for_its_key() {
        let key = ContentKey::hash(b"text");
        let value = encode(&ns(), &key, b"payload");
        assert_eq!(decode(&ns(), &key, value.clone()).unwrap(), b"payload");
        let other = ContentKey::hash(b"other");
        assert_eq!(
            decode(&ns(), &other, value.clone()),
            Err(Rejected::WrongKey)
        );
        let msl = Namespace::new("msl", "naga 30");
        assert_eq!(decode(&msl, &key, value.clone()), Err(Rejected::WrongKey));
        let mut flipped = value.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert_eq!(
            decode(&ns(), &key, flipped),
            Err(Rejected::Corrupt(CorruptReason::ChecksumMismatch))
        );
        let mut cut = value.clone();
        cut.pop();
        assert!(matches!(
            decode(&ns(), &key, cut),
            Err(Rejected::Corrupt(CorruptReason::LengthMismatch { .. }))
        ));
        assert_eq!(decode(&ns(), &key, b"junk".to_vec()), Err(Rejected::Format));
        assert_eq!(decode(&ns(), &key, Vec::new()), Err(Rejected::Format));
    }

    #[test]
    fn bad_urls_are_errors_that_hide_the_password() {
        let e = RemoteStore::new(RemoteConfig::new("http://:pw123@h")).unwrap_err();
        assert!(!e.to_string().contains("pw123"), "{e}");
        assert!(RemoteStore::new(RemoteConfig::new("redis+cluster://")).is_err());
        assert!(RemoteStore::new(RemoteConfig::new("redis://127.0.0.1:1/0")).is_ok());
    }
}
