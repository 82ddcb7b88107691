//! What `kiln serve`'s requests and its watch loop share: the project, the artifacts already
//! served (answered without touching the project), every variant a client fetched (checked
//! again after each change), the invalidation stream, usage and counters.
//!
//! Consistency: the project is behind a reader-writer lock. A request that misses the
//! served table fetches under a read lock and enters its answer (and its client's name) in
//! the table before letting go of it; the watch loop brings the project up to date and
//! fetches every watched variant again under the write lock, then replaces the table and
//! sends the events while holding the table's write lock. A hit reads the table and notes
//! its client under the table's read lock. So a client told of a new artifact gets it from
//! its next request; a client whose request was answered before the swap is among those
//! told; and an answer never pairs an artifact with another revision's digest.

use crate::usage::UsageLog;
use crate::watching::Rebuild;
use axum::body::Bytes;
use axum::http::HeaderValue;
use kiln::pipeline::{FetchError, Fetched, Outcome, Project, ProjectError, VariantRequest};
use parking_lot::{Mutex, RwLock};
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::broadcast;

/// One artifact ready to be served: the bytes and the headers that go with them.
pub struct Entry {
    pub bytes: Bytes,
    /// The variant's digest, quoted, as the `ETag`.
    pub etag: HeaderValue,
    /// blake3 of the bytes, hex.
    pub blake3: HeaderValue,
    /// `Lit/Forward[FOG;SKIN]`.
    pub variant: HeaderValue,
    pub content_type: &'static str,
    /// `Link` to the variant's reflection JSON, when the project builds that target.
    pub reflection: Option<HeaderValue>,
}

/// An event for the stream: its SSE name, its JSON data, and the named clients that fetched
/// its variant (a stream opened with `?client=NAME` gets only its own).
pub struct Message {
    pub kind: &'static str,
    pub data: String,
    pub clients: Clients,
}

/// The names of the clients that fetched one variant.
pub type Clients = Arc<FxHashSet<Arc<str>>>;

/// A variant some client fetched, and what it was when last fetched.
struct Watched {
    request: VariantRequest,
    /// blake3 of its artifact; `None` while it fails (or no longer exists).
    hash: Option<kiln::store::ContentKey>,
}

/// Counters for `/status` and the tests.
#[derive(Default)]
pub struct Counters {
    pub requests: AtomicU64,
    /// Answered from the served table.
    pub hits: AtomicU64,
    pub not_modified: AtomicU64,
    /// Fetches whose artifacts the compiler made.
    pub compiled: AtomicU64,
    /// Fetches that found them in the store.
    pub from_store: AtomicU64,
    pub events: AtomicU64,
}

/// The artifacts answered without the project, and their size.
#[derive(Default)]
struct Served {
    entries: FxHashMap<String, Arc<Entry>>,
    bytes: usize,
}

impl Served {
    /// Enters `entry` unless the table would pass [`MAX_SERVED_BYTES`]; a variant left out is
    /// still served, from the project (its engine memo, variant cache and store).
    fn insert(&mut self, key: String, entry: Arc<Entry>) {
        let size = entry.bytes.len();
        if let Some(old) = self.entries.get(&key) {
            self.bytes -= old.bytes.len();
        } else if self.bytes + size > MAX_SERVED_BYTES {
            return;
        }
        self.bytes += size;
        self.entries.insert(key, entry);
    }
}

/// The most artifact bytes the served table holds: a client that fetched 100,000 variants
/// must not make the server hold every artifact.
pub const MAX_SERVED_BYTES: usize = 256 << 20;

/// The most distinct variants the server watches for its clients (each is fetched again
/// after every change). Any legal keyword set may be asked for, and a shader with 30
/// keywords has a billion: a client enumerating them must not grow the server without end.
pub const MAX_WATCHED: usize = 262_144;

/// The most distinct client names (`?client=NAME`) one server keeps.
pub const MAX_CLIENT_NAMES: usize = 1024;

/// Why the hub refused a request before fetching anything.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error(transparent)]
    Fetch(#[from] FetchError),
    #[error("this server already watches {MAX_WATCHED} variants for its clients; restart it to start over")]
    TooManyVariants,
    #[error("this server already knows {MAX_CLIENT_NAMES} client names; reuse one, or restart it")]
    TooManyClients,
}

pub struct Hub {
    pub project: Arc<RwLock<Project>>,
    served: RwLock<Served>,
    watched: Mutex<BTreeMap<String, Watched>>,
    /// `watched.len()`, read without its lock by `/status` and `/events`, which run on the
    /// server's one async worker while a refresh may hold that lock.
    watched_count: AtomicUsize,
    /// The names clients gave (`?client=NAME`) when fetching each variant. Locked after
    /// `served` where both are (a hit notes its client under `served`'s read lock; a
    /// refresh reads it under `served`'s write lock).
    fetchers: RwLock<FxHashMap<String, Clients>>,
    /// Every client name given, each kept once and shared by `fetchers`.
    names: Mutex<FxHashSet<Arc<str>>>,
    events: broadcast::Sender<Arc<Message>>,
    pub usage: UsageLog,
    pub counters: Counters,
}

/// How many events a slow subscriber may fall behind before it is told to fetch everything
/// again (`resync`).
const EVENT_BACKLOG: usize = 4096;

impl Hub {
    pub fn new(project: Arc<RwLock<Project>>, usage: UsageLog) -> Self {
        Self {
            project,
            served: RwLock::default(),
            watched: Mutex::default(),
            watched_count: AtomicUsize::new(0),
            fetchers: RwLock::default(),
            names: Mutex::default(),
            events: broadcast::channel(EVENT_BACKLOG).0,
            usage,
            counters: Counters::default(),
        }
    }

    /// A client's name, kept once: refused when it is new and the server knows
    /// [`MAX_CLIENT_NAMES`] already. Only a request that names a variant is admitted, so
    /// that requests for nothing use no names up.
    fn admit(&self, name: &str) -> Result<Arc<str>, Refusal> {
        let mut names = self.names.lock();
        if let Some(known) = names.get(name) {
            return Ok(Arc::clone(known));
        }
        if names.len() >= MAX_CLIENT_NAMES {
            return Err(Refusal::TooManyClients);
        }
        let name: Arc<str> = Arc::from(name);
        names.insert(Arc::clone(&name));
        Ok(name)
    }

    /// The served table's answer, if it has one; `client` is noted as its fetcher before a
    /// refresh can replace the table (and send events without it).
    pub fn served(&self, key: &str, client: Option<&str>) -> Result<Option<Arc<Entry>>, Refusal> {
        let table = self.served.read();
        let Some(entry) = table.entries.get(key).cloned() else {
            return Ok(None);
        };
        if let Some(client) = client {
            self.note_client(key, &self.admit(client)?);
        }
        drop(table);
        self.counters.hits.fetch_add(1, Relaxed);
        Ok(Some(entry))
    }

    /// Fetches through the project (blocking: it may compile), records the variant as
    /// fetched and used, and enters the artifact in the served table.
    pub fn fetch(
        &self,
        key: String,
        request: VariantRequest,
        client: Option<&str>,
    ) -> Result<Arc<Entry>, Refusal> {
        let project = self.project.read();
        if self.watched_count.load(Relaxed) >= MAX_WATCHED
            && !self.watched.lock().contains_key(&key)
        {
            return Err(Refusal::TooManyVariants);
        }
        let fetched = match project.fetch(&request) {
            Ok(fetched) => fetched,
            Err(error) => {
                // A variant that does not compile is watched too: its client is told once
                // an edit fixes it. (A name that does not exist is not a variant to watch.)
                if let FetchError::Failed {
                    variant, target, ..
                } = &error
                {
                    let client = client.map(|name| self.admit(name)).transpose()?;
                    let request = VariantRequest {
                        shader: variant.shader.to_string(),
                        pass: variant.pass.to_string(),
                        keywords: variant.keywords.iter().map(|k| k.to_string()).collect(),
                        target: (*target).to_owned(),
                    };
                    self.watch(&key, || Watched {
                        request,
                        hash: None,
                    });
                    if let Some(client) = &client {
                        self.note_client(&key, client);
                    }
                }
                return Err(error.into());
            }
        };
        self.count(&fetched);
        let client = client.map(|name| self.admit(name)).transpose()?;
        let entry = Arc::new(entry(&fetched, reflects(&project)));
        // Under the read lock: a rebuild cannot come between the fetch and these.
        self.usage.record(&fetched);
        // A variant already watched keeps the state its clients were last told of: the
        // next change compares with that, not with what this request happened to get.
        self.watch(&key, || Watched {
            request: canonical_request(&fetched),
            hash: Some(fetched.hash),
        });
        if let Some(client) = &client {
            self.note_client(&key, client);
        }
        self.served.write().insert(key, Arc::clone(&entry));
        Ok(entry)
    }

    fn watch(&self, key: &str, watched: impl FnOnce() -> Watched) {
        let mut all = self.watched.lock();
        if !all.contains_key(key) {
            all.insert(key.to_owned(), watched());
            self.watched_count.store(all.len(), Relaxed);
        }
    }

    fn count(&self, fetched: &Fetched) {
        match fetched.outcome {
            Some(Outcome::Compiled) => self.counters.compiled.fetch_add(1, Relaxed),
            Some(_) => self.counters.from_store.fetch_add(1, Relaxed),
            None => 0,
        };
    }

    /// Remembers that the client named `client` fetched the variant of `key`.
    fn note_client(&self, key: &str, client: &Arc<str>) {
        let known = |fetchers: &FxHashMap<String, Clients>| {
            fetchers
                .get(key)
                .is_some_and(|names| names.contains(client))
        };
        if known(&self.fetchers.read()) {
            return;
        }
        let mut fetchers = self.fetchers.write();
        let names = fetchers.entry(key.to_owned()).or_default();
        // Events already sent hold the old set; the next ones get the new.
        Arc::make_mut(names).insert(Arc::clone(client));
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Message>> {
        self.events.subscribe()
    }

    /// How many variants clients have fetched.
    pub fn watched_len(&self) -> usize {
        self.watched_count.load(Relaxed)
    }

    fn send(&self, kind: &'static str, data: &serde_json::Value, clients: Clients) {
        self.counters.events.fetch_add(1, Relaxed);
        // No subscriber is no error: nobody is listening yet.
        let _ = self.events.send(Arc::new(Message {
            kind,
            data: data.to_string(),
            clients,
        }));
    }

    /// After the project changed (called with it locked for writing): every watched variant
    /// fetched again, the served table replaced, and one event per variant whose artifact
    /// changed, began failing or is gone. Returns (checked, changed, failing).
    fn refresh_watched(&self, project: &Project) -> (usize, usize, usize) {
        // Nothing adds to `watched` meanwhile (requests fetch under the project's read
        // lock), so its lock need not be held while the fetches compile.
        let (keys, requests): (Vec<String>, Vec<VariantRequest>) = self
            .watched
            .lock()
            .iter()
            .map(|(key, w)| (key.clone(), w.request.clone()))
            .unzip();
        let results = project.fetch_all(&requests);
        let reflection = reflects(project);
        let mut served = Served::default();
        let mut events = Vec::new();
        let (mut changed, mut failing) = (0, 0);
        let mut watched = self.watched.lock();
        for (key, result) in keys.into_iter().zip(results) {
            let Some(state) = watched.get_mut(&key) else {
                continue;
            };
            match result {
                Ok(fetched) => {
                    self.count(&fetched);
                    if state.hash != Some(fetched.hash) {
                        changed += 1;
                        events.push((key.clone(), "variant", variant_event(&fetched)));
                    }
                    served.insert(key, Arc::new(entry(&fetched, reflection)));
                    state.hash = Some(fetched.hash);
                }
                Err(error) => {
                    failing += 1;
                    if state.hash.is_some() {
                        let mut data = super::http::error_json(&error);
                        data["shader"] = state.request.shader.clone().into();
                        data["pass"] = state.request.pass.clone().into();
                        data["keywords"] = state.request.keywords.clone().into();
                        data["target"] = state.request.target.clone().into();
                        events.push((key, "failed", data));
                    }
                    state.hash = None;
                }
            }
        }
        let checked = watched.len();
        drop(watched);
        // The events go out once the table serves what they announce, to the clients
        // noted up to the swap: a hit notes its client under the table's read lock, so
        // one answered from the old table is among them, and one answered from the new
        // needs no event. They are sent after the lock is let go: hits need not wait.
        let mut table = self.served.write();
        *table = served;
        let told: Vec<Clients> = {
            let fetchers = self.fetchers.read();
            events
                .iter()
                .map(|(key, _, _)| fetchers.get(key).cloned().unwrap_or_default())
                .collect()
        };
        drop(table);
        for ((_, kind, data), clients) in events.into_iter().zip(told) {
            self.send(kind, &data, clients);
        }
        (checked, changed, failing)
    }
}

fn canonical_request(fetched: &Fetched) -> VariantRequest {
    VariantRequest {
        shader: fetched.variant.shader.to_string(),
        pass: fetched.variant.pass.to_string(),
        keywords: fetched
            .variant
            .keywords
            .iter()
            .map(|k| k.to_string())
            .collect(),
        target: fetched.target.name().to_owned(),
    }
}

fn variant_event(fetched: &Fetched) -> serde_json::Value {
    serde_json::json!({
        "shader": &*fetched.variant.shader,
        "pass": &*fetched.variant.pass,
        "keywords": fetched.variant.keywords.iter().map(|k| &**k).collect::<Vec<_>>(),
        "target": fetched.target.name(),
        "digest": fetched.digest,
        "blake3": fetched.hash.to_hex(),
        "bytes": fetched.bytes.len(),
    })
}

/// Whether the project builds the reflection target (then every artifact links to its
/// variant's reflection).
fn reflects(project: &Project) -> bool {
    project
        .manifest()
        .targets
        .iter()
        .any(|t| t.target() == kiln::compile::Target::Reflection)
}

/// `</variants/{shader}/{pass}/reflection?keywords=...>; rel="describedby"`.
fn reflection_link(fetched: &Fetched) -> String {
    let keywords: Vec<String> = fetched
        .variant
        .keywords
        .iter()
        .map(|k| path_escape(k))
        .collect();
    format!(
        "</variants/{}/{}/reflection?keywords={}>; rel=\"describedby\"",
        path_escape(&fetched.variant.shader),
        path_escape(&fetched.variant.pass),
        keywords.join(",")
    )
}

/// Percent-encodes all but RFC 3986's unreserved characters.
fn path_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(byte))
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

fn entry(fetched: &Fetched, reflection: bool) -> Entry {
    let header = |text: String| {
        HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
    };
    Entry {
        // Shared with the project's copy, not copied: a refresh makes an entry for every
        // watched variant.
        bytes: Bytes::from_owner(Arc::clone(&fetched.bytes)),
        etag: header(format!("\"{}\"", fetched.digest)),
        blake3: header(fetched.hash.to_hex()),
        variant: header(fetched.variant.to_string()),
        content_type: content_type(fetched.target.name()),
        reflection: (reflection && fetched.target != kiln::compile::Target::Reflection)
            .then(|| header(reflection_link(fetched))),
    }
}

fn content_type(target: &str) -> &'static str {
    match target {
        "spirv" => "application/octet-stream",
        "reflection" => "application/json",
        _ => "text/plain; charset=utf-8",
    }
}

/// The served table's key of a request: its keywords canonical (sorted, distinct, without
/// `_`), so that every spelling of one variant finds one entry. Each part is written after
/// its length: names come from the request unchecked (the table is looked up before the
/// project), so no separator could keep `FOG;SKIN` or a name holding NUL from spelling
/// another variant's key.
pub fn served_key(shader: &str, pass: &str, target: &str, keywords: &[String]) -> String {
    let words = keywords
        .iter()
        .map(String::as_str)
        .filter(|k| *k != kiln::manifest::NONE_KEYWORD);
    let set = kiln_runtime::canon::canonicalize(words.collect());
    let mut key = String::new();
    for part in [shader, pass, target].into_iter().chain(set) {
        key.push_str(&part.len().to_string());
        key.push(':');
        key.push_str(part);
    }
    key
}

/// `kiln serve`'s rebuild: the project brought up to date (built and written with
/// `--write-outputs`), then every watched variant fetched again and the clients told.
pub struct ServeRebuild {
    pub hub: Arc<Hub>,
    pub write_outputs: bool,
    pub json: bool,
}

impl Rebuild for ServeRebuild {
    fn needed(&self, project: &Project) -> bool {
        if self.write_outputs {
            project.is_dirty()
        } else {
            project.has_changes()
        }
    }

    fn rebuild(
        &mut self,
        project: &mut Project,
        first_event: Option<Instant>,
    ) -> Result<(), ProjectError> {
        let started = Instant::now();
        let (files, manifest_changed, built) = if self.write_outputs {
            let report = project.build(&|_| {})?;
            let built = format!(
                "{} variants built: {} compiled, {} failed; {} outputs written",
                report.variants, report.compiled, report.failed, report.outputs_written
            );
            (report.changed_files, report.manifest_changed, Some(built))
        } else {
            let prepared = project.prepare()?;
            (prepared.changed_files, prepared.manifest_changed, None)
        };
        let (checked, changed, failing) = self.hub.refresh_watched(project);
        let latency_ms = first_event.map(|event| {
            started.saturating_duration_since(event).as_secs_f64() * 1000.0
                + started.elapsed().as_secs_f64() * 1000.0
        });
        let mut causes: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        if manifest_changed {
            causes.push("kiln.toml".into());
        }
        if self.json {
            crate::render::stdout_line(
                &serde_json::json!({
                    "changed": causes,
                    "watched": checked,
                    "events": changed,
                    "failing": failing,
                    "event_ms": latency_ms,
                })
                .to_string(),
            );
        } else if first_event.is_some() {
            let latency = latency_ms
                .map(|ms| format!(", {ms:.1} ms from the file event"))
                .unwrap_or_default();
            say!(
                "changed: {} -> {checked} fetched variants checked: {changed} changed (clients told), {failing} failing{latency}",
                if causes.is_empty() { "nothing".to_owned() } else { causes.join(", ") }
            );
        }
        if let Some(built) = built {
            if !self.json {
                say!("{built}");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::served_key;

    #[test]
    fn every_spelling_of_a_keyword_set_is_one_key() {
        let key = |words: &[&str]| {
            let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
            served_key("Lit", "Forward", "spirv", &words)
        };
        assert_eq!(key(&["SKIN", "FOG"]), key(&["FOG", "SKIN", "FOG", "_"]));
        assert_ne!(key(&["FOG"]), key(&["SKIN"]));
        assert_eq!(key(&[]), key(&["_"]));
        // A request's names are not checked before the lookup: none spells another key.
        assert_ne!(key(&["FOG;SKIN"]), key(&["FOG", "SKIN"]));
        let nul = |shader: &str, pass: &str| served_key(shader, pass, "spirv", &[]);
        assert_ne!(
            nul("Lit\u{0}Forward", "spirv"),
            nul("Lit", "Forward\u{0}spirv")
        );
    }
}
