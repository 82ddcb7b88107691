//! A blocking client for `kiln serve`, for Rust engines and tools: a variant's artifact by
//! (shader, pass, keywords, target), revalidated by its digest, and the stream of
//! invalidations to reload from. No async runtime: one HTTP/1.1 agent (ureq) that keeps its
//! connections alive.
//!
//! ```no_run
//! let client = kiln_client::Client::new("http://127.0.0.1:7171");
//! let lit = client.get("Lit", "Forward", &["SKIN", "FOG"], "spirv")?;
//! println!("{} bytes, digest {}", lit.bytes.len(), lit.digest);
//! for event in client.events()? {
//!     if let kiln_client::Event::Variant(changed) = event? {
//!         let fresh = client.get(&changed.shader, &changed.pass, &changed.keywords, &changed.target)?;
//!         println!("reload {}: {} bytes", changed.shader, fresh.bytes.len());
//!     }
//! }
//! # Ok::<(), kiln_client::Error>(())
//! ```

use serde::Deserialize;
use std::io::{BufRead, BufReader, Read};

/// The largest artifact the client reads (a compiled shader is far smaller).
pub const MAX_ARTIFACT_BYTES: u64 = 256 << 20;

/// One variant's artifact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Artifact {
    /// The artifact's bytes.
    pub bytes: Vec<u8>,
    /// The variant's 12-hex digest (the `ETag`, unquoted).
    pub digest: String,
    /// blake3 of the bytes, hex.
    pub blake3: String,
    /// Where the variant's reflection JSON is (`/variants/.../reflection?keywords=...`),
    /// when the project builds the `reflection` target.
    pub reflection: Option<String>,
}

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server answered with an error: its status and JSON body (`error`, `message`,
    /// and `known` names or located `diagnostics`).
    #[error("kiln serve answered {status}: {message}")]
    Server {
        /// HTTP status.
        status: u16,
        /// The body's `error` kind (`unknown_shader`, `compile_failed`, ...).
        kind: String,
        /// The body's `message`.
        message: String,
        /// The whole body.
        body: serde_json::Value,
    },
    /// No answer (connection refused, reset, timed out, malformed).
    #[error("kiln serve: {0}")]
    Http(String),
    /// The event stream could not be read.
    #[error("kiln serve event stream: {0}")]
    Stream(#[from] std::io::Error),
}

/// A fetched variant whose artifact changed: fetch it again.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Changed {
    /// Shader.
    pub shader: String,
    /// Pass.
    pub pass: String,
    /// Keywords, canonical.
    pub keywords: Vec<String>,
    /// Target.
    pub target: String,
    /// The new digest.
    pub digest: String,
    /// blake3 of the new artifact, hex.
    pub blake3: String,
    /// Its size.
    pub bytes: u64,
}

/// One event of `GET /events`.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// The stream is open: every change from now on will be told.
    Hello,
    /// A fetched variant has a new artifact, ready to fetch.
    Variant(Changed),
    /// A fetched variant stopped compiling (or no longer exists): the JSON error, with its
    /// `shader`, `pass`, `keywords` and `target`. Keep the last artifact.
    Failed(serde_json::Value),
    /// This client fell behind and missed events: fetch everything again.
    Resync,
    /// An event this client does not know (a newer server).
    Other {
        /// Its name.
        name: String,
        /// Its data.
        data: String,
    },
}

/// A client of one `kiln serve`.
#[derive(Clone)]
pub struct Client {
    base: String,
    agent: ureq::Agent,
    token: Option<String>,
    name: Option<String>,
}

impl Client {
    /// A client of the server at `base` (`http://127.0.0.1:7171`).
    pub fn new(base: &str) -> Self {
        let config = ureq::Agent::config_builder()
            // Error statuses are answers, read here, not transport errors.
            .http_status_as_error(false)
            .build();
        Self {
            base: base.trim_end_matches('/').to_owned(),
            agent: ureq::Agent::new_with_config(config),
            token: None,
            name: None,
        }
    }

    /// Names this client (1 to 64 of `A-Z a-z 0-9 . _ -`): its event stream then carries
    /// only the variants it fetched itself.
    pub fn with_name(mut self, name: &str) -> Self {
        self.name = Some(name.to_owned());
        self
    }

    fn client_query(&self, separator: char) -> String {
        self.name
            .as_deref()
            .map(|name| format!("{separator}client={}", escape(name)))
            .unwrap_or_default()
    }

    /// Sends `Authorization: Bearer <token>` with every request.
    pub fn with_token(mut self, token: &str) -> Self {
        self.token = Some(token.to_owned());
        self
    }

    fn url(&self, shader: &str, pass: &str, keywords: &[impl AsRef<str>], target: &str) -> String {
        let keywords: Vec<&str> = keywords.iter().map(AsRef::as_ref).collect();
        format!(
            "{}/variants/{}/{}/{}?keywords={}{}",
            self.base,
            escape(shader),
            escape(pass),
            escape(target),
            escape(&keywords.join(",")),
            self.client_query('&')
        )
    }

    fn request(&self, url: &str) -> ureq::RequestBuilder<ureq::typestate::WithoutBody> {
        let request = self.agent.get(url);
        match &self.token {
            Some(token) => request.header("Authorization", format!("Bearer {token}")),
            None => request,
        }
    }

    /// The artifact of a variant (keywords in any order), compiled by the server if need be.
    pub fn get(
        &self,
        shader: &str,
        pass: &str,
        keywords: &[impl AsRef<str>],
        target: &str,
    ) -> Result<Artifact, Error> {
        // Without a known digest no `If-None-Match` is sent, so a 304 is the server's fault.
        self.get_if_changed(shader, pass, keywords, target, None)?
            .ok_or_else(|| {
                Error::Http("304 Not Modified to a request without If-None-Match".into())
            })
    }

    /// As [`Client::get`], but `None` when the variant's digest is still `known`.
    pub fn get_if_changed(
        &self,
        shader: &str,
        pass: &str,
        keywords: &[impl AsRef<str>],
        target: &str,
        known: Option<&str>,
    ) -> Result<Option<Artifact>, Error> {
        let url = self.url(shader, pass, keywords, target);
        let mut request = self.request(&url);
        if let Some(digest) = known {
            request = request.header("If-None-Match", format!("\"{digest}\""));
        }
        let mut response = request.call().map_err(|e| Error::Http(e.to_string()))?;
        let status = response.status().as_u16();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .trim_matches('"')
                .to_owned()
        };
        let digest = header("etag");
        let blake3 = header("kiln-blake3");
        let link = header("link");
        let reflection = link
            .strip_prefix('<')
            .and_then(|rest| rest.split_once('>'))
            .map(|(target, _)| target.to_owned());
        match status {
            304 => Ok(None),
            200 => {
                let bytes = response
                    .body_mut()
                    .with_config()
                    .limit(MAX_ARTIFACT_BYTES)
                    .read_to_vec()
                    .map_err(|e| Error::Http(e.to_string()))?;
                Ok(Some(Artifact {
                    bytes,
                    digest,
                    blake3,
                    reflection,
                }))
            }
            _ => {
                let text = response
                    .body_mut()
                    .with_config()
                    .limit(1 << 20)
                    .read_to_string()
                    .unwrap_or_default();
                let body: serde_json::Value =
                    serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
                Err(Error::Server {
                    status,
                    kind: body["error"].as_str().unwrap_or("").to_owned(),
                    message: body["message"].as_str().unwrap_or("").to_owned(),
                    body,
                })
            }
        }
    }

    /// The server's counters (`GET /status`).
    pub fn status(&self) -> Result<serde_json::Value, Error> {
        let mut response = self
            .request(&format!("{}/status", self.base))
            .call()
            .map_err(|e| Error::Http(e.to_string()))?;
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| Error::Http(e.to_string()))?;
        serde_json::from_str(&text).map_err(|e| Error::Http(e.to_string()))
    }

    /// The invalidation stream (`GET /events`), read as it comes; the first event is
    /// [`Event::Hello`].
    pub fn events(&self) -> Result<Events, Error> {
        let response = self
            .request(&format!("{}/events{}", self.base, self.client_query('?')))
            .call()
            .map_err(|e| Error::Http(e.to_string()))?;
        if response.status().as_u16() != 200 {
            return Err(Error::Http(format!(
                "/events answered {}",
                response.status()
            )));
        }
        let reader = response.into_body().into_reader();
        Ok(Events {
            reader: BufReader::new(Box::new(reader)),
        })
    }
}

/// Percent-encodes everything but unreserved characters (RFC 3986) and the keyword comma.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b',' => {
                out.push(byte as char)
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// The events of one `GET /events`, in order; ends when the server closes the stream.
pub struct Events {
    reader: BufReader<Box<dyn Read + Send>>,
}

impl Iterator for Events {
    type Item = Result<Event, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        let (mut name, mut data) = (String::new(), String::new());
        let mut line = String::new();
        loop {
            line.clear();
            match self.reader.read_line(&mut line) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => return Some(Err(Error::Stream(e))),
            }
            let text = line.trim_end_matches(['\r', '\n']);
            if text.is_empty() {
                if name.is_empty() && data.is_empty() {
                    continue;
                }
                return Some(Ok(parse_event(name, data)));
            }
            // Comments (`:`) keep the connection alive.
            if let Some(value) = text.strip_prefix("event:") {
                name = value.trim_start().to_owned();
            } else if let Some(value) = text.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(value.strip_prefix(' ').unwrap_or(value));
            }
        }
    }
}

fn parse_event(name: String, data: String) -> Event {
    match name.as_str() {
        "hello" => Event::Hello,
        "resync" => Event::Resync,
        "variant" => match serde_json::from_str(&data) {
            Ok(changed) => Event::Variant(changed),
            Err(_) => Event::Other { name, data },
        },
        "failed" => match serde_json::from_str(&data) {
            Ok(value) => Event::Failed(value),
            Err(_) => Event::Other { name, data },
        },
        _ => Event::Other { name, data },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_read_across_lines_comments_and_unknown_names() {
        let stream = ": keep-alive\n\nevent: hello\ndata: {}\n\nevent: variant\ndata: {\"shader\":\"Lit\",\"pass\":\"Forward\",\"keywords\":[\"FOG\"],\"target\":\"spirv\",\"digest\":\"0123456789ab\",\"blake3\":\"ff\",\"bytes\":4}\n\nevent: future\ndata: a\ndata: b\n\n";
        let events = Events {
            reader: BufReader::new(Box::new(std::io::Cursor::new(stream.as_bytes().to_vec()))),
        };
        let all: Vec<Event> = events.map(Result::unwrap).collect();
        assert_eq!(all.len(), 3, "{all:?}");
        assert_eq!(all[0], Event::Hello);
        let Event::Variant(changed) = &all[1] else {
            panic!("{all:?}")
        };
        assert_eq!(changed.keywords, ["FOG"]);
        assert_eq!(
            all[2],
            Event::Other {
                name: "future".into(),
                data: "a\nb".into()
            }
        );
    }

    #[test]
    fn names_are_escaped_and_keywords_stay_comma_separated() {
        let client = Client::new("http://h:1/");
        assert_eq!(
            client.url("A B/c", "P", &["FOG", "SKIN"], "spirv"),
            "http://h:1/variants/A%20B%2Fc/P/spirv?keywords=FOG,SKIN"
        );
    }
}
