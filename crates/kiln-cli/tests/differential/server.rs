//! Serve mode: one `kiln serve --json --report-batches` per sequence on watch mode's copy of
//! the project (its own store, no outputs). After every step it must serve exactly what a
//! clean build wrote (the bytes of every output, `422` for every failed pair), and its event
//! stream must have told of every artifact that changed since the step before, the last
//! event of each variant agreeing with what it serves now, and nothing at all after an edit
//! that changes no artifact.

use super::tree::Tree;
use super::watcher::Watch;
use kiln_client::{Client, Error, Event};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

/// (shader, pass, keywords, target).
type Key = (String, String, Vec<String>, String);

/// What a variant's target is at a step: its artifact's blake3, or failed.
#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    Bytes(String),
    Failed,
}

pub struct Serve {
    process: Watch,
    client: Client,
    events: Receiver<Event>,
    /// Events read from the stream so far (compared with the server's count).
    received: u64,
    /// Every key's state after the step before.
    previous: BTreeMap<Key, State>,
}

impl Serve {
    pub fn start(manifest: &Path, work: &Path) -> Result<Serve, String> {
        let (process, address) = Watch::start_serve(
            manifest,
            &work.join("serve_cache"),
            &work.join("serve_out"),
            &work.join("serve-stderr.log"),
        )?;
        let client = Client::new(&format!("http://{address}"));
        let stream = client.events().map_err(|e| e.to_string())?;
        let (tx, events) = mpsc::channel();
        std::thread::spawn(move || {
            for event in stream.map_while(Result::ok) {
                if tx.send(event).is_err() {
                    break;
                }
            }
        });
        match events.recv_timeout(Duration::from_secs(10)) {
            Ok(Event::Hello) => {}
            other => return Err(format!("no hello on /events: {other:?}")),
        }
        Ok(Serve {
            process,
            client,
            events,
            received: 0,
            previous: BTreeMap::new(),
        })
    }

    pub fn stderr_tail(&self) -> String {
        self.process.stderr_tail()
    }

    /// Checks the server after `step` against the clean build `fresh`; `quiet`: the step
    /// changed no artifact. Returns the discrepancies.
    pub fn check(&mut self, step: usize, fresh: &Tree, quiet: bool) -> Result<Vec<String>, String> {
        self.process
            .sync(&format!("{step}.serve"))
            .map_err(|e| format!("no marker from kiln serve: {e}"))?;
        let events = self.step_events()?;
        let Ok(index) = fresh.index() else {
            // No clean build to compare with (it could not run at all).
            return Ok(Vec::new());
        };
        let expected = expected(&index, fresh);
        let mut problems = Vec::new();
        for (key, state) in &expected {
            let (shader, pass, keywords, target) = key;
            let got = self.client.get(shader, pass, keywords, target);
            let shown = format!("{shader}/{pass}[{}] {target}", keywords.join(";"));
            match (state, got) {
                (State::Bytes(hash), Ok(artifact)) => {
                    if artifact.blake3 != *hash
                        || blake3::hash(&artifact.bytes).to_hex().as_str() != hash
                    {
                        problems.push(format!("{shown}: serves other bytes than a clean build"));
                    }
                }
                (State::Bytes(_), Err(e)) => problems.push(format!(
                    "{shown}: a clean build writes it, serve answers {e}"
                )),
                (State::Failed, Err(Error::Server { status: 422, .. })) => {}
                (State::Failed, Err(e)) => problems.push(format!(
                    "{shown}: fails in a clean build, serve answers {e}"
                )),
                (State::Failed, Ok(_)) => problems.push(format!(
                    "{shown}: fails in a clean build, serve serves an artifact"
                )),
            }
        }
        if quiet && !events.is_empty() {
            problems.push(format!(
                "{} event(s) after an edit that changes no artifact: {events:?}",
                events.len()
            ));
        }
        let mut last: BTreeMap<Key, State> = BTreeMap::new();
        for event in &events {
            match event {
                Event::Variant(changed) => {
                    let key = (
                        changed.shader.clone(),
                        changed.pass.clone(),
                        changed.keywords.clone(),
                        changed.target.clone(),
                    );
                    last.insert(key, State::Bytes(changed.blake3.clone()));
                }
                Event::Failed(value) => {
                    last.insert(key_of(value), State::Failed);
                }
                Event::Resync => problems.push("a resync event".into()),
                _ => {}
            }
        }
        for (key, now) in &expected {
            let Some(before) = self.previous.get(key) else {
                continue;
            };
            match last.get(key) {
                Some(told) if told != now => problems.push(format!(
                    "{key:?}: the last event says {told:?}, a clean build gives {now:?}"
                )),
                None if before != now => problems.push(format!(
                    "{key:?}: changed from {before:?} to {now:?} without an event"
                )),
                _ => {}
            }
        }
        self.previous = expected;
        Ok(problems)
    }

    /// The events this step sent: read until as many arrived as the server counts.
    fn step_events(&mut self) -> Result<Vec<Event>, String> {
        let status = self.client.status().map_err(|e| e.to_string())?;
        let sent = status["events"].as_u64().unwrap_or(0);
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut events = Vec::new();
        while self.received < sent {
            let wait = deadline.saturating_duration_since(Instant::now());
            let event = self
                .events
                .recv_timeout(wait)
                .map_err(|_| format!("{} event(s) sent, {} received", sent, self.received))?;
            self.received += 1;
            events.push(event);
        }
        Ok(events)
    }
}

/// Every (variant, target) of a clean build: its output's hash, or failed.
fn expected(index: &Value, fresh: &Tree) -> BTreeMap<Key, State> {
    let mut all = BTreeMap::new();
    for entry in index["entries"].as_array().into_iter().flatten() {
        let Some(bytes) = entry["path"].as_str().and_then(|p| fresh.files.get(p)) else {
            continue;
        };
        all.insert(
            key_of(entry),
            State::Bytes(blake3::hash(bytes).to_hex().to_string()),
        );
    }
    for failure in index["failures"].as_array().into_iter().flatten() {
        all.insert(key_of(failure), State::Failed);
    }
    all
}

fn key_of(value: &Value) -> Key {
    let text = |name: &str| value[name].as_str().unwrap_or("").to_owned();
    let keywords = value["keywords"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|k| k.as_str().map(str::to_owned))
        .collect();
    (text("shader"), text("pass"), keywords, text("target"))
}
