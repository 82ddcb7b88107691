//! `kiln serve`'s HTTP/1.1 API (axum over hyper), documented in the README's "kiln serve":
//!
//! - `GET /variants/{shader}/{pass}/{target}?keywords=A,B` -> the artifact; `ETag` is the
//!   variant's digest (`If-None-Match` -> 304); compiled on demand when the set is legal
//!   but not built yet. Errors are JSON: 404 for an unknown shader, pass, target or keyword
//!   (naming the legal ones), 400 for a set that cannot be one, 422 for a compile error
//!   (with located diagnostics).
//! - `GET /events` -> Server-Sent Events: `hello` at once, then `variant` (a fetched
//!   variant's artifact changed: the new one is ready), `failed` (it stopped compiling) and
//!   `resync` (this client fell behind: fetch everything again). With `?client=NAME`, only
//!   the variants fetched with the same `client=NAME`.
//! - `GET /status` -> counters as JSON; `GET /usage` -> the usage file of what was fetched.
//!
//! Connections are served one by one through hyper's connection builder so that the header
//! buffer and the time to send headers are bounded, and through a write deadline so that a
//! client that stops reading is cut off; at most [`MAX_CONNECTIONS`] at once.

use super::deadline::WriteDeadline;
use super::hub::{served_key, Entry, Hub, Refusal};
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures_util::stream::{self, Stream, StreamExt};
use kiln::pipeline::{FetchError, VariantRequest};
use std::convert::Infallible;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{broadcast, Semaphore};

/// Connections served at once; more wait to be accepted.
pub const MAX_CONNECTIONS: usize = 1024;

/// The request line and headers must fit in this many bytes (431 otherwise).
pub const MAX_HEADER_BYTES: usize = 16 << 10;

/// Most keywords one request may name (a shader declares far fewer).
const MAX_KEYWORDS: usize = 256;

/// The listener's limits on each connection.
#[derive(Clone)]
pub struct Limits {
    /// A client must send a request's headers within this long of starting it (or of the
    /// previous response, on a kept-alive connection).
    pub header_timeout: Duration,
    /// A write to a client that reads nothing for this long closes its connection.
    pub write_timeout: Duration,
}

#[derive(Clone)]
struct AppState {
    hub: Arc<Hub>,
}

/// The API; with a `token`, every request must carry `Authorization: Bearer <token>`.
pub fn router(hub: Arc<Hub>, token: Option<Arc<str>>) -> Router {
    Router::new()
        .route("/variants/{shader}/{pass}/{target}", get(variant))
        .route("/events", get(events))
        .route("/status", get(status))
        .route("/usage", get(usage))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn(move |request, next| {
            authorize(token.clone(), request, next)
        }))
        .with_state(AppState { hub })
}

/// Accepts connections until the runtime stops.
pub async fn serve(listener: TcpListener, router: Router, limits: Limits) {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
            return;
        };
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors, a connection reset before accept: wait, go on.
                tracing::warn!("kiln serve: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let service = hyper_util::service::TowerToHyperService::new(router.clone());
        let header_timeout = limits.header_timeout;
        let stream = WriteDeadline::new(stream, limits.write_timeout);
        tokio::spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(header_timeout)
                .max_buf_size(MAX_HEADER_BYTES);
            let connection =
                builder.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            // A client that goes away mid-request is no error of the server's.
            let _ = connection.await;
            drop(permit);
        });
    }
}

async fn authorize(token: Option<Arc<str>>, request: Request, next: Next) -> Response {
    if let Some(token) = token {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
        if !given.is_some_and(|given| same_secret(given, token.as_bytes())) {
            let mut refused = error(
                StatusCode::UNAUTHORIZED,
                serde_json::json!({
                    "error": "unauthorized",
                    "message": "this server needs `Authorization: Bearer <token>` (KILN_SERVE_TOKEN)",
                }),
            );
            // A client without the token keeps no connection (nor its slot) open.
            refused
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            return refused;
        }
    }
    next.run(request).await
}

/// Compares without leaking where the first difference is.
fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    let (a, b) = (blake3::hash(given), blake3::hash(expected));
    a == b
}

/// A request's query string: `keywords` (repeatable; each a list joined by `,`) and
/// `client`; other fields are ignored. Parsed here rather
/// than by a typed extractor so that a repeated field is merged, not refused in plain text.
#[derive(Default)]
struct RequestQuery {
    keywords: Vec<String>,
    /// The client's name: `/events?client=NAME` gets only what `NAME` fetched.
    client: Option<String>,
}

impl RequestQuery {
    fn parse(raw: Option<&str>) -> Result<Self, Response> {
        let mut query = RequestQuery::default();
        for (name, value) in form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
            match &*name {
                "keywords" => query.keywords.extend(
                    value
                        .split(',')
                        .filter(|k| !k.is_empty())
                        .map(str::to_owned),
                ),
                // The guard keeps the first `client`; a second one is refused.
                "client" if query.client.replace(value.into_owned()).is_some() => {
                    return Err(invalid_client());
                }
                _ => {}
            }
            if query.keywords.len() > MAX_KEYWORDS {
                return Err(error(
                    StatusCode::BAD_REQUEST,
                    serde_json::json!({
                        "error": "too_many_keywords",
                        "message": format!("more than {MAX_KEYWORDS} keywords in one request"),
                    }),
                ));
            }
        }
        if let Some(name) = &query.client {
            check_client(name)?;
        }
        Ok(query)
    }
}

/// A client's name: 1 to 64 of `A-Z a-z 0-9 . _ -`.
fn check_client(name: &str) -> Result<(), Response> {
    let fine = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if fine {
        return Ok(());
    }
    Err(invalid_client())
}

fn invalid_client() -> Response {
    error(
        StatusCode::BAD_REQUEST,
        serde_json::json!({
            "error": "invalid_client",
            "message": "`client` names a client, once, with 1 to 64 of A-Z a-z 0-9 . _ -",
        }),
    )
}

async fn variant(
    State(state): State<AppState>,
    path: Result<Path<(String, String, String)>, PathRejection>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
) -> Response {
    let hub = state.hub;
    hub.counters.requests.fetch_add(1, Relaxed);
    let (shader, pass, target) = match path {
        Ok(Path(names)) => names,
        // A segment that is not UTF-8 once decoded names nothing the manifest has.
        Err(rejection) => {
            return error(
                StatusCode::BAD_REQUEST,
                serde_json::json!({ "error": "invalid_path", "message": rejection.body_text() }),
            )
        }
    };
    let RequestQuery { keywords, client } = match RequestQuery::parse(raw.as_deref()) {
        Ok(query) => query,
        Err(refused) => return refused,
    };
    let key = served_key(&shader, &pass, &target, &keywords);
    let entry = match hub.served(&key, client.as_deref()) {
        Err(refused) => return refusal(&refused),
        Ok(Some(entry)) => entry,
        Ok(None) => {
            let request = VariantRequest {
                shader,
                pass,
                keywords,
                target,
            };
            let fetching = Arc::clone(&hub);
            match tokio::task::spawn_blocking(move || {
                fetching.fetch(key, request, client.as_deref())
            })
            .await
            {
                Ok(Ok(entry)) => entry,
                Ok(Err(refused)) => return refusal(&refused),
                Err(join) => {
                    return error(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        serde_json::json!({"error": "internal", "message": join.to_string()}),
                    )
                }
            }
        }
    };
    artifact_response(&hub, &entry, &headers)
}

fn artifact_response(hub: &Hub, entry: &Entry, headers: &HeaderMap) -> Response {
    let unchanged = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .any(|value| etag_matches(value, &entry.etag));
    let mut response = if unchanged {
        hub.counters.not_modified.fetch_add(1, Relaxed);
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        entry.bytes.clone().into_response()
    };
    let out = response.headers_mut();
    out.insert(header::ETAG, entry.etag.clone());
    // Revalidate every use: the artifact changes with the sources.
    out.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    out.insert("kiln-blake3", entry.blake3.clone());
    out.insert("kiln-variant", entry.variant.clone());
    if let Some(link) = &entry.reflection {
        out.insert(header::LINK, link.clone());
    }
    if !unchanged {
        out.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(entry.content_type),
        );
    }
    response
}

/// `If-None-Match`: `*`, or a list of entity tags, weak ones compared weakly (RFC 9110).
fn etag_matches(header: &HeaderValue, etag: &HeaderValue) -> bool {
    let Ok(text) = header.to_str() else {
        return false;
    };
    let mine = etag.as_bytes();
    text.split(',')
        .map(str::trim)
        .any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag).as_bytes() == mine)
}

fn refusal(refused: &Refusal) -> Response {
    let kind = match refused {
        Refusal::Fetch(e) => return fetch_error(e),
        Refusal::TooManyVariants => "too_many_variants",
        Refusal::TooManyClients => "too_many_clients",
    };
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        serde_json::json!({ "error": kind, "message": refused.to_string() }),
    )
}

fn fetch_error(e: &FetchError) -> Response {
    let status = match e {
        FetchError::UnknownShader { .. }
        | FetchError::UnknownPass { .. }
        | FetchError::UnknownTarget { .. }
        | FetchError::KeywordSet(kiln::manifest::KeywordSetError::Unknown { .. }) => {
            StatusCode::NOT_FOUND
        }
        FetchError::KeywordSet(_) => StatusCode::BAD_REQUEST,
        FetchError::Failed { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        FetchError::Engine { .. } => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error(status, error_json(e))
}

/// A fetch error as JSON: `error` (a stable kind), `message`, and what else helps: the
/// legal names, the located diagnostics.
pub fn error_json(e: &FetchError) -> serde_json::Value {
    use kiln::manifest::KeywordSetError;
    let mut value = serde_json::json!({ "message": e.to_string() });
    let (kind, known) = match e {
        FetchError::UnknownShader { known, .. } => ("unknown_shader", Some(known.clone())),
        FetchError::UnknownPass { known, .. } => ("unknown_pass", Some(known.clone())),
        FetchError::UnknownTarget { known, .. } => ("unknown_target", Some(known.clone())),
        FetchError::KeywordSet(KeywordSetError::Unknown { declared, .. }) => (
            "unknown_keyword",
            Some(
                declared
                    .split(", ")
                    .filter(|k| *k != "none")
                    .map(str::to_owned)
                    .collect(),
            ),
        ),
        FetchError::KeywordSet(KeywordSetError::Invalid { .. }) => ("invalid_keyword", None),
        FetchError::KeywordSet(KeywordSetError::Conflicting { .. }) => {
            ("conflicting_keywords", None)
        }
        FetchError::Failed {
            variant,
            target,
            diagnostics,
        } => {
            value["variant"] = variant.to_string().into();
            value["target"] = (*target).into();
            value["diagnostics"] = diagnostics
                .iter()
                .map(|d| {
                    serde_json::json!({
                        "message": d.message,
                        "file": d.location.as_ref().map(|l| l.file.display().to_string()),
                        "line": d.location.as_ref().map(|l| l.line).filter(|line| *line > 0),
                        "column": d.location.as_ref().filter(|l| l.line > 0).map(|l| l.columns.start + 1),
                        "variant": d.variant,
                        "target": d.target.map(|t| t.name()),
                    })
                })
                .collect();
            ("compile_failed", None)
        }
        FetchError::Engine { .. } => ("internal", None),
    };
    value["error"] = kind.into();
    if let Some(known) = known {
        value["known"] = known.into();
    }
    value
}

fn error(status: StatusCode, body: serde_json::Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn method_not_allowed() -> Response {
    let mut refused = error(
        StatusCode::METHOD_NOT_ALLOWED,
        serde_json::json!({
            "error": "method_not_allowed",
            "message": "kiln serve answers GET (and HEAD) only",
        }),
    );
    refused
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
    refused
}

async fn not_found() -> Response {
    error(
        StatusCode::NOT_FOUND,
        serde_json::json!({
            "error": "not_found",
            "message": "kiln serve answers GET /variants/{shader}/{pass}/{target}?keywords=A,B, /events, /status and /usage",
        }),
    )
}

async fn events(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, Response> {
    let query = RequestQuery::parse(raw.as_deref())?;
    let only: Option<Arc<str>> = query.client.map(Arc::from);
    let receiver = state.hub.subscribe();
    let hello = Event::default()
        .event("hello")
        .data(serde_json::json!({ "watched": state.hub.watched_len() }).to_string());
    let updates = stream::unfold((receiver, only), |(mut receiver, only)| async move {
        let event = loop {
            match receiver.recv().await {
                Ok(message) => {
                    let mine = only
                        .as_ref()
                        .is_none_or(|name| message.clients.contains(name));
                    if mine {
                        break Event::default().event(message.kind).data(&message.data);
                    }
                }
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    break Event::default()
                        .event("resync")
                        .data(serde_json::json!({ "missed": missed }).to_string())
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        };
        Some((Ok(event), (receiver, only)))
    });
    Ok(Sse::new(stream::once(async { Ok(hello) }).chain(updates))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

async fn status(State(state): State<AppState>) -> Response {
    let hub = &state.hub;
    let c = &hub.counters;
    let body = serde_json::json!({
        "requests": c.requests.load(Relaxed),
        "hits": c.hits.load(Relaxed),
        "not_modified": c.not_modified.load(Relaxed),
        "compiled": c.compiled.load(Relaxed),
        "from_store": c.from_store.load(Relaxed),
        "events": c.events.load(Relaxed),
        "watched": hub.watched_len(),
        "used": hub.usage.len(),
    });
    (
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn usage(State(state): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/toml")],
        state.hub.usage.usage_file(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn if_none_match_takes_lists_weak_tags_and_star() {
        let etag = HeaderValue::from_static("\"0123456789ab\"");
        let matches = |h: &'static str| etag_matches(&HeaderValue::from_static(h), &etag);
        assert!(matches("\"0123456789ab\""));
        assert!(matches("\"x\", W/\"0123456789ab\""));
        assert!(matches("*"));
        assert!(!matches("\"0123456789ac\""));
        assert!(!matches("0123456789ab"));
    }
}
