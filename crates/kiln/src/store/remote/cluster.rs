//! Redis Cluster routing: which node serves a key's hash slot.

use super::conn::LinkError;
use super::resp::Reply;
use super::url::Node;

/// Hash slots in a Redis Cluster.
pub const SLOTS: usize = 16384;

/// CRC16/XMODEM, the checksum Redis Cluster hashes keys with.
fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The slot of `key`: of its hash tag (`{...}`, when not empty) or of the whole key.
pub fn slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16(tagged.unwrap_or(key)) % SLOTS as u16
}

/// Which node serves each slot (the masters of `CLUSTER SLOTS`).
#[derive(Debug, Default)]
pub struct SlotMap {
    nodes: Vec<Node>,
    /// Index into `nodes` per slot; `u16::MAX`: no node.
    slots: Vec<u16>,
}

impl SlotMap {
    /// Whether it was never read (or read empty).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The node serving `slot`.
    pub fn node(&self, slot: u16) -> Option<&Node> {
        let index = *self.slots.get(usize::from(slot))?;
        self.nodes.get(usize::from(index))
    }

    /// Reads a `CLUSTER SLOTS` reply; `asked` names a node announced without an address.
    pub fn from_reply(reply: Reply, asked: &Node) -> Result<Self, LinkError> {
        let bad =
            |what: &str| LinkError::Cluster(format!("unexpected CLUSTER SLOTS reply ({what})"));
        let Reply::Array(ranges) = reply else {
            return Err(match reply {
                Reply::Error(message) => LinkError::Refused {
                    command: "CLUSTER SLOTS",
                    message: message.chars().take(200).collect(),
                },
                _ => bad("not an array"),
            });
        };
        let mut map = SlotMap {
            nodes: Vec::new(),
            slots: vec![u16::MAX; SLOTS],
        };
        for range in ranges {
            let Reply::Array(fields) = range else {
                return Err(bad("a range is not an array"));
            };
            let (Some(Reply::Int(start)), Some(Reply::Int(end)), Some(Reply::Array(master))) =
                (fields.first(), fields.get(1), fields.get(2))
            else {
                return Err(bad("a range without start, end and master"));
            };
            let (Some(Reply::Bulk(host)), Some(Reply::Int(port))) = (master.first(), master.get(1))
            else {
                return Err(bad("a master without address and port"));
            };
            let (Ok(start), Ok(end), Ok(port)) = (
                usize::try_from(*start),
                usize::try_from(*end),
                u16::try_from(*port),
            ) else {
                return Err(bad("a number out of range"));
            };
            if start > end || end >= SLOTS {
                return Err(bad("a slot out of range"));
            }
            let host = String::from_utf8_lossy(host).into_owned();
            // An empty or `?` address means "the node you asked" (Redis 7).
            let node = if host.is_empty() || host == "?" {
                Node {
                    host: asked.host.clone(),
                    port,
                }
            } else {
                Node { host, port }
            };
            let index = match map.nodes.iter().position(|n| *n == node) {
                Some(index) => index,
                None => {
                    map.nodes.push(node);
                    map.nodes.len() - 1
                }
            };
            let index = u16::try_from(index).map_err(|_| bad("too many nodes"))?;
            map.slots[start..=end].fill(index);
        }
        Ok(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_redis_cluster_slots() {
        // The test vector of the Redis Cluster specification.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        // As `CLUSTER KEYSLOT` answers.
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        assert_eq!(slot(b"foo{}{bar}"), slot(b"foo{}{bar}"));
        assert_eq!(slot(b"{}x"), crc16(b"{}x") % SLOTS as u16);
    }

    #[test]
    fn a_slot_map_is_read_from_cluster_slots() {
        let node = |host: &str, port: i64| {
            Reply::Array(vec![
                Reply::Bulk(host.as_bytes().to_vec()),
                Reply::Int(port),
                Reply::Bulk(b"id".to_vec()),
            ])
        };
        let reply = Reply::Array(vec![
            Reply::Array(vec![
                Reply::Int(0),
                Reply::Int(8191),
                node("10.0.0.1", 7000),
            ]),
            Reply::Array(vec![
                Reply::Int(8192),
                Reply::Int(16383),
                node("", 7001),
                node("r", 1),
            ]),
        ]);
        let asked = Node {
            host: "seed".into(),
            port: 7001,
        };
        let map = SlotMap::from_reply(reply, &asked).unwrap();
        assert_eq!(map.node(0).unwrap().host, "10.0.0.1");
        assert_eq!(map.node(16383).unwrap(), &asked);
        assert!(SlotMap::from_reply(Reply::Int(1), &asked).is_err());
        let bad = Reply::Array(vec![Reply::Array(vec![
            Reply::Int(5),
            Reply::Int(SLOTS as i64),
            node("a", 1),
        ])]);
        assert!(SlotMap::from_reply(bad, &asked).is_err());
    }
}
