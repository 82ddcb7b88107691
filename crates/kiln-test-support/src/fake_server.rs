//! A TCP server on loopback that plays a scripted part instead of Redis: a server that
//! trickles its answer, announces a value larger than it sends, or says anything else a test
//! needs. Each connection runs the script on its own thread; the server stops accepting when
//! dropped, and scripts should bound their own time (see [`FakeServer::stopped`]).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The server; dropping it stops it.
pub struct FakeServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl FakeServer {
    /// Listens on a loopback port; `script` runs for every connection accepted.
    pub fn start<F>(script: F) -> Self
    where
        F: Fn(TcpStream, &AtomicBool) + Send + Sync + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let addr = listener.local_addr().expect("local address");
        let stop = Arc::new(AtomicBool::new(false));
        let script = Arc::new(script);
        let accept = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let script = script.clone();
                    let stop = stop.clone();
                    std::thread::spawn(move || {
                        // What the client sends is read and dropped, so that it never blocks
                        // on a full socket buffer.
                        if let Ok(mut reader) = conn.try_clone() {
                            std::thread::spawn(move || {
                                let mut sink = [0u8; 4096];
                                while matches!(reader.read(&mut sink), Ok(n) if n > 0) {}
                            });
                        }
                        script(conn, &stop);
                    });
                }
            })
        };
        Self {
            addr,
            stop,
            accept: Some(accept),
        }
    }

    /// A server that answers every connection with `first` at once, then sends `then` one
    /// byte every `every` (for at most two minutes): a server too slow to ever finish a reply,
    /// although no gap between two bytes is long.
    pub fn trickling(first: &'static [u8], then: &'static [u8], every: Duration) -> Self {
        Self::start(move |mut conn, stop| {
            if conn.write_all(first).is_err() {
                return;
            }
            let started = Instant::now();
            for byte in then.iter().cycle() {
                if stop.load(Ordering::SeqCst) || started.elapsed() > Duration::from_secs(120) {
                    return;
                }
                std::thread::sleep(every);
                if conn.write_all(std::slice::from_ref(byte)).is_err() {
                    return;
                }
            }
        })
    }

    /// `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://{}/0", self.addr)
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Whether the server was dropped (scripts stop then).
    pub fn stopped(stop: &AtomicBool) -> bool {
        stop.load(Ordering::SeqCst)
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}
