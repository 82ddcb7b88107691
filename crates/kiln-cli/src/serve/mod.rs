//! `kiln serve`: a running engine's door to the project. Variants by (shader, pass,
//! keywords, target) over HTTP, compiled on demand through the same pipeline and store as
//! `kiln build`; the project watched by the same loop as `kiln watch`; every client told,
//! on an event stream, when a variant it fetched has a new artifact; every variant fetched
//! recorded for `kiln usage`.
//!
//! - `hub.rs`: what requests and the watch loop share (the served table, the watched
//!   variants, the events) and the serve-side [`crate::watching::Rebuild`].
//! - `http.rs`: the HTTP API, its limits and its access check.
//! - `deadline.rs`: a connection whose writes must make progress.

mod deadline;
mod http;
mod hub;

use crate::build::ProjectArgs;
use crate::usage::UsageLog;
use crate::watching;
use hub::{Hub, ServeRebuild};
use parking_lot::RwLock;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// The port `kiln serve` listens on by default (on loopback).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7171";

/// The environment variable holding the token clients must send (never an argument: a
/// command line is visible to every user of the machine).
pub const TOKEN_VAR: &str = "KILN_SERVE_TOKEN";

/// A token shorter than this is refused: it would be guessed.
const MIN_TOKEN_BYTES: usize = 16;

#[derive(clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub project: ProjectArgs,
    /// Address to listen on. Anything but loopback needs `--allow-remote` and a token in
    /// KILN_SERVE_TOKEN.
    #[arg(long, default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// Accept a non-loopback `--listen` address (clients then must send the token).
    #[arg(long)]
    pub allow_remote: bool,
    /// Also build every variant of the manifest and write the outputs, as `kiln watch`
    /// does (by default only what clients ask for is compiled, and nothing is written
    /// besides the store).
    #[arg(long)]
    pub write_outputs: bool,
    #[command(flatten)]
    pub watching: crate::watching::WatchingArgs,
    /// A client must send a request's headers within this many milliseconds.
    #[arg(long, default_value_t = 10_000, hide = true)]
    pub header_timeout_ms: u64,
    /// A write to a client that reads nothing for this many milliseconds closes its
    /// connection.
    #[arg(long, default_value_t = 30_000, hide = true)]
    pub write_timeout_ms: u64,
}

pub fn run(args: &ServeArgs) -> ExitCode {
    let token = match access_token(args) {
        Ok(token) => token,
        Err(e) => {
            say!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let project = match args.watching.open(&args.project) {
        Ok(project) => project,
        Err(code) => return code,
    };
    let usage = UsageLog::open(project.cache_dir());
    let project = Arc::new(RwLock::new(project));
    let hub = Arc::new(Hub::new(Arc::clone(&project), usage));
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .max_blocking_threads(256)
        .thread_name("kiln-serve")
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            say!("error: cannot start the server's threads: {e}");
            return ExitCode::from(2);
        }
    };
    let listener = match runtime.block_on(tokio::net::TcpListener::bind(args.listen)) {
        Ok(listener) => listener,
        Err(e) => {
            say!("error: cannot listen on {}: {e}", args.listen);
            return ExitCode::from(2);
        }
    };
    let address = listener.local_addr().unwrap_or(args.listen);
    let limits = http::Limits {
        header_timeout: Duration::from_millis(args.header_timeout_ms),
        write_timeout: Duration::from_millis(args.write_timeout_ms),
    };
    runtime.spawn(http::serve(
        listener,
        http::router(Arc::clone(&hub), token),
        limits,
    ));
    if args.project.json {
        crate::render::stdout_line(
            &serde_json::json!({ "listening": address.to_string() }).to_string(),
        );
    }
    say!("kiln serve: listening on http://{address}");
    let settings = watching::Settings {
        debounce_ms: args.watching.debounce_ms,
        report_batches: args.watching.report_batches,
        json: args.project.json,
        outputs: args.write_outputs,
    };
    let code = watching::run(
        &project,
        &settings,
        &mut ServeRebuild {
            hub,
            write_outputs: args.write_outputs,
            json: args.project.json,
        },
    );
    runtime.shutdown_timeout(Duration::from_secs(1));
    code
}

/// The token clients must send: required off loopback, optional on it.
fn access_token(args: &ServeArgs) -> Result<Option<Arc<str>>, String> {
    let token = std::env::var(TOKEN_VAR).ok().filter(|t| !t.is_empty());
    if let Some(token) = &token {
        if token.len() < MIN_TOKEN_BYTES {
            return Err(format!(
                "{TOKEN_VAR} is shorter than {MIN_TOKEN_BYTES} bytes: use a long random secret (e.g. `openssl rand -hex 32`)"
            ));
        }
    }
    if !args.listen.ip().is_loopback() {
        if !args.allow_remote {
            return Err(format!(
                "--listen {}: not a loopback address; other machines could fetch the project's shaders. Pass --allow-remote (and set {TOKEN_VAR}) to serve them",
                args.listen
            ));
        }
        if token.is_none() {
            return Err(format!(
                "--listen {} --allow-remote needs {TOKEN_VAR}: clients off this machine must send `Authorization: Bearer <token>`",
                args.listen
            ));
        }
    }
    Ok(token.map(Arc::from))
}
