//! One connection to one Redis server, every step of which answers to a deadline.
//!
//! The deadline is a point in time, not a per-read timeout: before each read and write the
//! socket's timeout is set to what is left of it, so a server that trickles one byte a
//! second still runs out of time when the round trip does. Connecting (name resolution,
//! TCP, TLS, `AUTH`, `SELECT`, `PING`) answers to the same deadline, and to the connect
//! timeout before it.

use std::io::{self, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::resp::{self, Allowance, Reply, RespError, MAX_LINE};
use super::url::{Endpoint, Node};

/// Why the remote could not be used. No variant carries a credential.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The host name did not resolve (in time).
    #[error("cannot resolve `{host}`: {problem}")]
    Resolve {
        /// The name.
        host: String,
        /// Why.
        problem: String,
    },
    /// TCP could not connect.
    #[error("cannot connect to {node}: {source}")]
    Connect {
        /// The server.
        node: String,
        /// Why.
        source: io::Error,
    },
    /// The round trip's deadline passed.
    #[error("no complete answer within {} ms", .0.as_millis())]
    TimedOut(Duration),
    /// The connection failed (TLS errors too: a certificate that is not trusted, ...).
    #[error("{0}")]
    Io(io::Error),
    /// The server's reply is not Redis, or is over kiln's limits.
    #[error("{0}")]
    Protocol(RespError),
    /// The server wants a password and the URL has none (`NOAUTH`).
    #[error("authentication required: the server wants a password (redis://:PASSWORD@host)")]
    AuthRequired,
    /// `AUTH` was refused.
    #[error("authentication failed ({0})")]
    AuthFailed(&'static str),
    /// A command of the connection's setup was refused.
    #[error("the server refused {command}: {message}")]
    Refused {
        /// `SELECT`, `PING`, `CLUSTER SLOTS`.
        command: &'static str,
        /// The server's error, cut short.
        message: String,
    },
    /// A Cluster whose slots kiln cannot read.
    #[error("cluster: {0}")]
    Cluster(String),
}

/// A round trip's time limit, and how long it was (for messages).
#[derive(Clone, Copy, Debug)]
pub struct Deadline {
    /// When the round trip must be over.
    pub at: Instant,
    /// Its whole length.
    pub budget: Duration,
}

impl Deadline {
    /// `budget` from now (a budget too large for the clock waits a year at most).
    pub fn after(budget: Duration) -> Self {
        let now = Instant::now();
        let budget = budget.min(Duration::from_secs(365 * 24 * 3600));
        Self {
            at: now.checked_add(budget).unwrap_or(now),
            budget,
        }
    }

    fn left(&self) -> Option<Duration> {
        let left = self.at.saturating_duration_since(Instant::now());
        (!left.is_zero()).then_some(left)
    }

    /// An I/O error as a link error: a timeout names the deadline.
    pub fn io(&self, e: io::Error) -> LinkError {
        match e.kind() {
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => LinkError::TimedOut(self.budget),
            _ => LinkError::Io(e),
        }
    }

    /// A reply error as a link error.
    pub fn resp(&self, e: RespError) -> LinkError {
        match e {
            RespError::Io(e) => self.io(e),
            other => LinkError::Protocol(other),
        }
    }
}

/// A socket whose every read and write gets what is left of the deadline as its timeout.
struct Timed {
    sock: TcpStream,
    deadline: Instant,
}

impl Timed {
    fn left(&self) -> io::Result<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        Ok(left)
    }
}

fn timed_out(e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::WouldBlock {
        io::ErrorKind::TimedOut.into()
    } else {
        e
    }
}

impl Read for Timed {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.sock.set_read_timeout(Some(left))?;
        self.sock.read(buf).map_err(timed_out)
    }
}

impl Write for Timed {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.sock.set_write_timeout(Some(left))?;
        self.sock.write(buf).map_err(timed_out)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.sock.flush()
    }
}

enum Stream {
    Plain(Timed),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, Timed>>),
}

impl Stream {
    fn set_deadline(&mut self, at: Instant) {
        match self {
            Stream::Plain(timed) => timed.deadline = at,
            Stream::Tls(tls) => tls.sock.deadline = at,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

/// What every connection of one remote shares.
pub struct Setup {
    /// The URL, read.
    pub endpoint: Endpoint,
    /// Connecting gives up after this long (and at the round trip's deadline).
    pub connect_timeout: Duration,
    tls: std::sync::OnceLock<Result<Arc<rustls::ClientConfig>, String>>,
}

impl Setup {
    /// For `endpoint`.
    pub fn new(endpoint: Endpoint, connect_timeout: Duration) -> Self {
        Self {
            endpoint,
            connect_timeout,
            tls: std::sync::OnceLock::new(),
        }
    }

    /// rustls with the system's root certificates (`SSL_CERT_FILE` and `SSL_CERT_DIR`
    /// honoured), read once.
    fn tls(&self) -> Result<Arc<rustls::ClientConfig>, LinkError> {
        self.tls
            .get_or_init(|| {
                let mut roots = rustls::RootCertStore::empty();
                for cert in rustls_native_certs::load_native_certs().certs {
                    // A certificate rustls cannot use is skipped, as a browser would.
                    let _ = roots.add(cert);
                }
                // ring, not aws-lc: no cmake or C toolchain to build. Newer rustls deprecate
                // this for its lack of post-quantum key exchange, which Redis servers do not
                // offer anyway.
                #[allow(deprecated)]
                let provider = Arc::new(rustls::crypto::ring::default_provider());
                rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map(|builder| {
                        Arc::new(builder.with_root_certificates(roots).with_no_client_auth())
                    })
                    .map_err(|e| e.to_string())
            })
            .clone()
            .map_err(|e| LinkError::Io(io::Error::other(e)))
    }
}

/// An open, authenticated connection.
pub struct Conn {
    io: BufReader<Stream>,
}

/// What a setup reply may be: short.
const SMALL: Allowance = Allowance {
    max_bulk: MAX_LINE,
    bytes: 4 * MAX_LINE,
    elements: 16,
};

impl Conn {
    /// Connects to `node`, then `AUTH`, `SELECT` and `PING` in one round trip.
    pub fn open(setup: &Setup, node: &Node, deadline: Deadline) -> Result<Self, LinkError> {
        let connect_by = Instant::now()
            .checked_add(setup.connect_timeout)
            .map_or(deadline.at, |by| by.min(deadline.at));
        let connect = Deadline {
            at: connect_by,
            budget: setup.connect_timeout.min(deadline.budget),
        };
        let addrs = resolve(node, connect)?;
        let mut last = None;
        let mut sock = None;
        for addr in addrs {
            let Some(left) = connect.left() else {
                return Err(LinkError::TimedOut(connect.budget));
            };
            match TcpStream::connect_timeout(&addr, left) {
                Ok(s) => {
                    sock = Some(s);
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        let sock = match (sock, last) {
            (Some(sock), _) => sock,
            (None, Some(e)) if e.kind() == io::ErrorKind::TimedOut => {
                return Err(LinkError::TimedOut(connect.budget))
            }
            (None, e) => {
                return Err(LinkError::Connect {
                    node: node.to_string(),
                    source: e.unwrap_or_else(|| io::ErrorKind::NotFound.into()),
                })
            }
        };
        // Pipelines are written whole: no reason to wait for an ACK between writes.
        let _ = sock.set_nodelay(true);
        let timed = Timed {
            sock,
            deadline: deadline.at,
        };
        let stream = if setup.endpoint.tls {
            let name = rustls::pki_types::ServerName::try_from(node.host.clone())
                .map_err(|e| LinkError::Io(io::Error::new(io::ErrorKind::InvalidInput, e)))?;
            let client = rustls::ClientConnection::new(setup.tls()?, name)
                .map_err(|e| LinkError::Io(io::Error::other(e)))?;
            Stream::Tls(Box::new(rustls::StreamOwned::new(client, timed)))
        } else {
            Stream::Plain(timed)
        };
        let mut conn = Conn {
            io: BufReader::with_capacity(64 << 10, stream),
        };
        conn.handshake(setup, deadline)?;
        Ok(conn)
    }

    fn handshake(&mut self, setup: &Setup, deadline: Deadline) -> Result<(), LinkError> {
        let credentials = &setup.endpoint.credentials;
        let mut wire = Vec::new();
        let auth = credentials.password.is_some();
        if let Some(password) = &credentials.password {
            match &credentials.user {
                Some(user) => resp::command(&mut wire, &[b"AUTH", user, password]),
                None => resp::command(&mut wire, &[b"AUTH", password]),
            }
        }
        let db = setup.endpoint.db.to_string();
        let select = setup.endpoint.db != 0;
        if select {
            resp::command(&mut wire, &[b"SELECT", db.as_bytes()]);
        }
        resp::command(&mut wire, &[b"PING"]);
        self.send(&wire, deadline)?;
        // Every reply is read before judging, so that the first cause is the one named.
        let mut replies = Vec::new();
        for _ in 0..(usize::from(auth) + usize::from(select) + 1) {
            replies.push(self.reply(SMALL, deadline)?);
        }
        let mut replies = replies.into_iter();
        if auth {
            if let Some(Reply::Error(message)) = replies.next() {
                return Err(LinkError::AuthFailed(
                    if message.contains("without any password configured") {
                        "the server has no password: remove it from the URL"
                    } else if message.starts_with("WRONGPASS") || message.contains("invalid") {
                        "wrong user name or password"
                    } else {
                        "the server refused AUTH"
                    },
                ));
            }
        }
        let named = |command: &'static str, message: String| {
            if message.starts_with("NOAUTH") {
                LinkError::AuthRequired
            } else {
                LinkError::Refused {
                    command,
                    message: message.chars().take(200).collect(),
                }
            }
        };
        if select {
            if let Some(Reply::Error(message)) = replies.next() {
                return Err(named("SELECT", message));
            }
        }
        match replies.next() {
            Some(Reply::Status(pong)) if pong == "PONG" => Ok(()),
            Some(Reply::Error(message)) => Err(named("PING", message)),
            _ => Err(LinkError::Protocol(RespError::Malformed(
                "no PONG in answer to PING",
            ))),
        }
    }

    /// Sends `wire` (commands) whole.
    pub fn send(&mut self, wire: &[u8], deadline: Deadline) -> Result<(), LinkError> {
        let stream = self.io.get_mut();
        stream.set_deadline(deadline.at);
        stream
            .write_all(wire)
            .and_then(|()| stream.flush())
            .map_err(|e| deadline.io(e))
    }

    /// Reads one reply within `allowance`.
    pub fn reply(&mut self, allowance: Allowance, deadline: Deadline) -> Result<Reply, LinkError> {
        self.try_reply(allowance, deadline)
            .map_err(|e| deadline.resp(e))
    }

    /// Reads one reply within `allowance`; a [`RespError::TooLong`] leaves the connection
    /// out of step (drop it).
    pub fn try_reply(
        &mut self,
        allowance: Allowance,
        deadline: Deadline,
    ) -> Result<Reply, RespError> {
        self.io.get_mut().set_deadline(deadline.at);
        resp::read_reply(&mut self.io, allowance)
    }
}

/// `node`'s addresses: an address as is; a name resolved on a helper thread, so that a
/// resolver that hangs costs the connect deadline, not more (the thread finishes alone).
fn resolve(node: &Node, deadline: Deadline) -> Result<Vec<SocketAddr>, LinkError> {
    if let Ok(ip) = node.host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, node.port)]);
    }
    let host = node.host.clone();
    let port = node.port;
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("kiln-resolve".into())
        .spawn(move || {
            let _ = tx.send((host.as_str(), port).to_socket_addrs().map(Vec::from_iter));
        });
    if let Err(e) = spawned {
        return Err(LinkError::Io(e));
    }
    let Some(left) = deadline.left() else {
        return Err(LinkError::TimedOut(deadline.budget));
    };
    match rx.recv_timeout(left) {
        Ok(Ok(addrs)) if !addrs.is_empty() => Ok(addrs),
        Ok(Ok(_)) => Err(LinkError::Resolve {
            host: node.host.clone(),
            problem: "no address".into(),
        }),
        Ok(Err(e)) => Err(LinkError::Resolve {
            host: node.host.clone(),
            problem: e.to_string(),
        }),
        Err(_) => Err(LinkError::TimedOut(deadline.budget)),
    }
}
