//! Round trips: a pipeline of commands sent, every reply read, under one deadline, to one
//! server or to the nodes of a Cluster; and what a round trip's replies may cost in memory.

use std::collections::BTreeMap;

use super::cluster::{self, SlotMap};
use super::conn::{Conn, Deadline, LinkError, Setup};
use super::resp::{self, Allowance, Reply, RespError, MAX_LINE};
use super::url::Node;

/// One command of a pipeline: the key that routes it (in a Cluster) and its bytes.
pub struct Command {
    /// The key it reads or writes.
    pub key: Vec<u8>,
    /// The command as sent.
    pub wire: Vec<u8>,
}

impl Command {
    /// `args`, routed by `args[1]`.
    pub fn new(args: &[&[u8]]) -> Self {
        let mut wire = Vec::new();
        resp::command(&mut wire, args);
        Self {
            key: args.get(1).map(|k| k.to_vec()).unwrap_or_default(),
            wire,
        }
    }
}

/// What a round trip's replies may cost.
#[derive(Clone, Copy, Debug)]
pub struct Reading {
    /// The longest value read; a longer one is answered [`Answer::TooLarge`], unread.
    pub cap: usize,
    /// Bytes of values one round trip may hold: past it, a value (under the cap) is left
    /// unread, to be asked again in the next round trip ([`Answer::Unread`]). The first
    /// value is always read, so every round trip makes progress.
    pub budget: usize,
}

/// What came back for one command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Its reply (an error reply too: the server refused this command alone).
    Reply(Reply),
    /// A value longer than [`Reading::cap`]; nothing of it was read.
    TooLarge(u64),
    /// Not read: the round trip stopped before it (over budget, or after a value too
    /// large). Ask again.
    Unread,
}

/// The connections to one remote.
pub enum Session {
    /// One server (connected on first use, and again after a reply cut short).
    Single(Option<Conn>),
    /// A Cluster: its slot map and a connection per node used.
    Cluster {
        /// Read on first use, again after a `MOVED`.
        slots: SlotMap,
        /// By node.
        conns: BTreeMap<Node, Conn>,
    },
}

/// Replies held while reading one pipeline.
pub struct Held {
    reading: Reading,
    bytes: usize,
    values: usize,
}

impl Held {
    /// Nothing held yet.
    pub fn new(reading: Reading) -> Self {
        Self {
            reading,
            bytes: 0,
            values: 0,
        }
    }

    /// How long the next value may be. No reply kiln reads in a pipeline (`GET`, `SET`,
    /// `EXISTS`) is an array, so none is accepted.
    pub fn allowance(&self) -> Allowance {
        let max_bulk = if self.values == 0 {
            self.reading.cap
        } else {
            self.reading
                .cap
                .min(self.reading.budget.saturating_sub(self.bytes))
        };
        Allowance {
            max_bulk,
            bytes: max_bulk.saturating_add(MAX_LINE + 2),
            elements: 0,
        }
    }

    /// Counts `reply` as held.
    pub fn hold(&mut self, reply: &Reply) {
        if let Reply::Bulk(bytes) = reply {
            self.bytes += bytes.len();
            self.values += 1;
        }
    }
}

/// Reads the replies to `indices` (in order) from `conn` into `answers`. `Ok(false)` when
/// the pipeline was cut short (the connection is out of step and must be dropped).
fn read_replies(
    conn: &mut Conn,
    indices: &[usize],
    answers: &mut [Answer],
    held: &mut Held,
    deadline: Deadline,
) -> Result<bool, LinkError> {
    for &i in indices {
        match conn.try_reply(held.allowance(), deadline) {
            Ok(reply) => {
                held.hold(&reply);
                answers[i] = Answer::Reply(reply);
            }
            Err(RespError::TooLong { len, .. }) => {
                if len > held.reading.cap as u64 {
                    answers[i] = Answer::TooLarge(len);
                }
                return Ok(false);
            }
            Err(e) => return Err(deadline.resp(e)),
        }
    }
    Ok(true)
}

fn wire(commands: &[Command], indices: &[usize]) -> Vec<u8> {
    let mut wire = Vec::with_capacity(indices.iter().map(|&i| commands[i].wire.len()).sum());
    for &i in indices {
        wire.extend_from_slice(&commands[i].wire);
    }
    wire
}

impl Session {
    /// Nothing connected yet.
    pub fn new(setup: &Setup) -> Self {
        if setup.endpoint.cluster {
            Session::Cluster {
                slots: SlotMap::default(),
                conns: BTreeMap::new(),
            }
        } else {
            Session::Single(None)
        }
    }

    /// One round trip: every command sent, and one [`Answer`] per command, all before
    /// `deadline`. An error means the remote cannot be used now.
    pub fn exchange(
        &mut self,
        setup: &Setup,
        commands: &[Command],
        reading: Reading,
        deadline: Deadline,
    ) -> Result<Vec<Answer>, LinkError> {
        let mut answers = vec![Answer::Unread; commands.len()];
        let mut held = Held::new(reading);
        match self {
            Session::Single(slot) => {
                let conn = match slot {
                    Some(conn) => conn,
                    None => {
                        // A URL always names a host (`Endpoint::parse`); never index on it.
                        let node =
                            setup
                                .endpoint
                                .nodes
                                .first()
                                .ok_or_else(|| LinkError::Resolve {
                                    host: String::new(),
                                    problem: "no host".into(),
                                })?;
                        slot.insert(Conn::open(setup, node, deadline)?)
                    }
                };
                let all: Vec<usize> = (0..commands.len()).collect();
                conn.send(&wire(commands, &all), deadline)?;
                if !read_replies(conn, &all, &mut answers, &mut held, deadline)? {
                    *slot = None;
                }
            }
            Session::Cluster { slots, conns } => {
                let mut pending: Vec<usize> = (0..commands.len()).collect();
                for attempt in 0..2 {
                    if slots.is_empty() || attempt > 0 {
                        *slots = read_slots(setup, conns, deadline)?;
                    }
                    let mut by_node: BTreeMap<Node, Vec<usize>> = BTreeMap::new();
                    for &i in &pending {
                        match slots.node(cluster::slot(&commands[i].key)) {
                            Some(node) => by_node.entry(node.clone()).or_default().push(i),
                            None => {
                                answers[i] = Answer::Reply(Reply::Error(
                                    "CLUSTERDOWN no node serves this key's slot".into(),
                                ))
                            }
                        }
                    }
                    for (node, indices) in &by_node {
                        let conn = match conns.entry(node.clone()) {
                            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                            std::collections::btree_map::Entry::Vacant(e) => {
                                e.insert(Conn::open(setup, node, deadline)?)
                            }
                        };
                        conn.send(&wire(commands, indices), deadline)?;
                        if !read_replies(conn, indices, &mut answers, &mut held, deadline)? {
                            conns.remove(node);
                        }
                    }
                    // A slot moved (resharding, failover): read the map again and resend
                    // those commands, once.
                    pending.retain(|&i| {
                        matches!(&answers[i], Answer::Reply(Reply::Error(message))
                            if message.starts_with("MOVED ") || message.starts_with("ASK "))
                    });
                    if pending.is_empty() {
                        break;
                    }
                }
            }
        }
        Ok(answers)
    }
}

/// What a `CLUSTER SLOTS` reply may cost: a few fields per range, at most one range per
/// slot, short strings.
pub const SLOTS_ALLOWANCE: Allowance = Allowance {
    max_bulk: MAX_LINE,
    bytes: 16 << 20,
    elements: 1 << 20,
};

/// `CLUSTER SLOTS`, from a node already connected or else from the seeds in turn.
pub fn read_slots(
    setup: &Setup,
    conns: &mut BTreeMap<Node, Conn>,
    deadline: Deadline,
) -> Result<SlotMap, LinkError> {
    let mut wire = Vec::new();
    resp::command(&mut wire, &[b"CLUSTER", b"SLOTS"]);
    let allowance = SLOTS_ALLOWANCE;
    let mut candidates: Vec<Node> = conns.keys().cloned().collect();
    candidates.extend(setup.endpoint.nodes.iter().cloned());
    let mut last = None;
    for node in candidates {
        let conn = match conns.entry(node.clone()) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => {
                match Conn::open(setup, &node, deadline) {
                    Ok(conn) => e.insert(conn),
                    Err(
                        error @ (LinkError::TimedOut(_)
                        | LinkError::AuthRequired
                        | LinkError::AuthFailed(_)),
                    ) => return Err(error),
                    Err(error) => {
                        last = Some(error);
                        continue;
                    }
                }
            }
        };
        let read = conn
            .send(&wire, deadline)
            .and_then(|()| conn.reply(allowance, deadline));
        match read.and_then(|reply| SlotMap::from_reply(reply, &node)) {
            Ok(map) if !map.is_empty() => return Ok(map),
            Ok(_) => last = Some(LinkError::Cluster("no slot is served".into())),
            Err(error @ LinkError::TimedOut(_)) => return Err(error),
            Err(error) => {
                conns.remove(&node);
                last = Some(error);
            }
        }
    }
    Err(last.unwrap_or_else(|| LinkError::Cluster("no node to ask".into())))
}
