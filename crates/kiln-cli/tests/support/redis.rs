//! A real `redis-server` for one test: its own loopback port, its own temporary directory,
//! stopped when dropped. Absent `redis-server`, tests skip with a message, unless
//! `KILN_REQUIRE_REDIS=1` (CI), where that is a failure.
#![allow(dead_code)]

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
    _dir: tempfile::TempDir,
}

fn required() -> bool {
    std::env::var("KILN_REQUIRE_REDIS").is_ok_and(|v| v == "1")
}

/// A loopback port nothing listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl RedisServer {
    /// Starts one with `extra` options (e.g. `["--maxmemory", "1mb"]`); `None` (after saying
    /// why) when `redis-server` is not installed and not required.
    pub fn start(extra: &[&str]) -> Option<Self> {
        let installed = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !installed {
            assert!(
                !required(),
                "KILN_REQUIRE_REDIS=1 but redis-server is not installed"
            );
            eprintln!("skipped: redis-server is not installed (apt-get install redis-server)");
            return None;
        }
        for _ in 0..5 {
            let dir = tempfile::tempdir().unwrap();
            let port = free_port();
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(dir.path())
                .args(extra)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let mut server = RedisServer {
                child: Some(child),
                port,
                _dir: dir,
            };
            if server.wait_ready() {
                return Some(server);
            }
            // Someone else took the port between our probe and the server's bind: again.
            server.stop();
        }
        panic!("redis-server did not start");
    }

    fn wait_ready(&mut self) -> bool {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) {
            if let Some(child) = &mut self.child {
                if child.try_wait().unwrap().is_some() {
                    return false;
                }
            }
            if let Ok(mut con) = self.client().get_connection() {
                if redis::cmd("PING").query::<String>(&mut con).is_ok() {
                    return true;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).unwrap()
    }

    pub fn con(&self) -> redis::Connection {
        self.client().get_connection().unwrap()
    }

    /// Keys matching `pattern`.
    pub fn keys(&self, pattern: &str) -> Vec<String> {
        let mut keys: Vec<String> = redis::cmd("KEYS")
            .arg(pattern)
            .query(&mut self.con())
            .unwrap();
        keys.sort();
        keys
    }

    pub fn get(&self, key: &str) -> Vec<u8> {
        redis::cmd("GET").arg(key).query(&mut self.con()).unwrap()
    }

    pub fn set(&self, key: &str, value: &[u8]) {
        redis::cmd("SET")
            .arg(key)
            .arg(value)
            .query::<()>(&mut self.con())
            .unwrap();
    }

    /// Calls to `command` so far (from `INFO commandstats`).
    pub fn calls(&self, command: &str) -> u64 {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.con())
            .unwrap();
        let prefix = format!("cmdstat_{command}:calls=");
        info.lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .and_then(|rest| rest.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }

    /// Kills the server (as a crash or a lost network would).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}
