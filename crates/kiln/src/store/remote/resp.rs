//! The Redis protocol (RESP2), both ways: commands out, replies in.
//!
//! kiln reads replies itself rather than through a client library so that a reply can be
//! judged by its header before it is read: a bulk string's length is checked against the
//! caller's allowance before a byte of it is allocated, an array's count before it is
//! reserved, and a line (status, error, number) is cut at [`MAX_LINE`]. A hostile or broken
//! server can make kiln read, never allocate, more than it allowed.

use std::io::{self, BufRead};

/// The longest status, error or header line read.
pub(crate) const MAX_LINE: usize = 4096;

/// Nesting of arrays accepted (`CLUSTER SLOTS` needs 3).
const MAX_DEPTH: usize = 4;

/// A bulk string is read in steps of at most this many bytes, so that what is allocated
/// follows what arrived, not what the header promised.
const READ_STEP: usize = 64 << 10;

/// One reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `$-1` or `*-1`.
    Nil,
    /// `+...`
    Status(String),
    /// `-...`: the server refused this command (the others of a pipeline stand).
    Error(String),
    /// `:...`
    Int(i64),
    /// `$n`
    Bulk(Vec<u8>),
    /// `*n`
    Array(Vec<Reply>),
}

/// What one reply may cost.
#[derive(Clone, Copy, Debug)]
pub struct Allowance {
    /// Longest bulk string.
    pub max_bulk: usize,
    /// Bytes of bulk strings and lines in the whole reply.
    pub bytes: usize,
    /// Array elements in the whole reply.
    pub elements: usize,
}

/// Why a reply could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RespError {
    /// The connection failed or timed out.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// Not RESP2.
    #[error("not a Redis reply ({0})")]
    Malformed(&'static str),
    /// A bulk string longer than allowed: nothing of it was read (the connection is no
    /// longer in step and must be dropped).
    #[error("a value of {len} bytes, over the {allowed} bytes allowed")]
    TooLong {
        /// What its header said.
        len: u64,
        /// What was allowed.
        allowed: usize,
    },
    /// An array, line or reply over its allowance.
    #[error("a reply over its size limits ({0})")]
    TooBig(&'static str),
}

/// Appends one command (an array of bulk strings) to `out`.
pub fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.push(b'*');
    out.extend_from_slice(args.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    for arg in args {
        out.push(b'$');
        out.extend_from_slice(arg.len().to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// Reads one reply within `allowance`.
pub fn read_reply<R: BufRead>(r: &mut R, allowance: Allowance) -> Result<Reply, RespError> {
    let mut left = allowance;
    read(r, &mut left, 0)
}

fn read<R: BufRead>(r: &mut R, left: &mut Allowance, depth: usize) -> Result<Reply, RespError> {
    let line = read_line(r, left)?;
    let (&kind, text) = line
        .split_first()
        .ok_or(RespError::Malformed("empty line"))?;
    let text = std::str::from_utf8(text).map_err(|_| RespError::Malformed("not UTF-8"))?;
    match kind {
        b'+' => Ok(Reply::Status(text.to_owned())),
        b'-' => Ok(Reply::Error(text.to_owned())),
        b':' => Ok(Reply::Int(parse_int(text)?)),
        b'$' => {
            let len = parse_int(text)?;
            if len < 0 {
                return Ok(Reply::Nil);
            }
            let len = len as u64;
            let allowed = left.max_bulk.min(left.bytes);
            if len > allowed as u64 {
                return Err(RespError::TooLong { len, allowed });
            }
            let len = len as usize;
            left.bytes -= len;
            let body = read_exact_growing(r, len)?;
            let mut crlf = [0u8; 2];
            r.read_exact(&mut crlf)?;
            if crlf != *b"\r\n" {
                return Err(RespError::Malformed("bulk string not ended by CRLF"));
            }
            Ok(Reply::Bulk(body))
        }
        b'*' => {
            let count = parse_int(text)?;
            if count < 0 {
                return Ok(Reply::Nil);
            }
            if depth >= MAX_DEPTH {
                return Err(RespError::TooBig("arrays nested too deep"));
            }
            let count = count as u64;
            if count > left.elements as u64 {
                return Err(RespError::TooBig("too many array elements"));
            }
            let count = count as usize;
            left.elements -= count;
            // Reserved as elements arrive: the count is only a promise.
            let mut items = Vec::with_capacity(count.min(64));
            for _ in 0..count {
                items.push(read(r, left, depth + 1)?);
            }
            Ok(Reply::Array(items))
        }
        _ => Err(RespError::Malformed("unknown reply type")),
    }
}

fn parse_int(text: &str) -> Result<i64, RespError> {
    text.parse::<i64>()
        .map_err(|_| RespError::Malformed("bad number"))
}

/// One line without its CRLF, at most [`MAX_LINE`] bytes (and counted in `left.bytes`).
fn read_line<R: BufRead>(r: &mut R, left: &mut Allowance) -> Result<Vec<u8>, RespError> {
    let mut line = Vec::new();
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
        }
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(at) => (at + 1, true),
            None => (buf.len(), false),
        };
        if line.len() + take > MAX_LINE + 2 || line.len() + take > left.bytes {
            return Err(RespError::TooBig("line too long"));
        }
        line.extend_from_slice(&buf[..take]);
        r.consume(take);
        if done {
            break;
        }
    }
    left.bytes -= line.len();
    if line.len() < 2 || line[line.len() - 2] != b'\r' {
        return Err(RespError::Malformed("line not ended by CRLF"));
    }
    line.truncate(line.len() - 2);
    Ok(line)
}

/// `len` bytes, the buffer growing with what arrives (at most doubling, never past `len`).
fn read_exact_growing<R: BufRead>(r: &mut R, len: usize) -> io::Result<Vec<u8>> {
    let mut body: Vec<u8> = Vec::new();
    while body.len() < len {
        if body.len() == body.capacity() {
            let grow = body.capacity().max(READ_STEP).min(len - body.len());
            body.reserve_exact(grow);
        }
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let room = (body.capacity() - body.len()).min(len - body.len());
        let take = buf.len().min(room);
        body.extend_from_slice(&buf[..take]);
        r.consume(take);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wide() -> Allowance {
        Allowance {
            max_bulk: 1 << 20,
            bytes: 1 << 20,
            elements: 1000,
        }
    }

    fn parse(bytes: &[u8], allowance: Allowance) -> Result<Reply, RespError> {
        read_reply(&mut &bytes[..], allowance)
    }

    #[test]
    fn commands_and_replies() {
        let mut out = Vec::new();
        command(&mut out, &[b"GET", b"k"]);
        assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
        assert_eq!(
            parse(b"+OK\r\n", wide()).unwrap(),
            Reply::Status("OK".into())
        );
        assert_eq!(
            parse(b"-ERR x\r\n", wide()).unwrap(),
            Reply::Error("ERR x".into())
        );
        assert_eq!(parse(b":-3\r\n", wide()).unwrap(), Reply::Int(-3));
        assert_eq!(parse(b"$-1\r\n", wide()).unwrap(), Reply::Nil);
        assert_eq!(
            parse(b"$3\r\na\r\n\r\n", wide()).unwrap(),
            Reply::Bulk(b"a\r\n".to_vec())
        );
        assert_eq!(
            parse(b"*2\r\n:1\r\n$0\r\n\r\n", wide()).unwrap(),
            Reply::Array(vec![Reply::Int(1), Reply::Bulk(Vec::new())])
        );
        assert!(matches!(parse(b"$3\r\nab", wide()), Err(RespError::Io(_))));
        assert!(matches!(
            parse(b"?\r\n", wide()),
            Err(RespError::Malformed(_))
        ));
        assert!(matches!(
            parse(b"+OK\n", wide()),
            Err(RespError::Malformed(_))
        ));
    }

    #[test]
    fn lengths_are_judged_before_anything_is_read() {
        let small = Allowance {
            max_bulk: 10,
            ..wide()
        };
        // Only the header is there: the verdict needs nothing more.
        assert!(matches!(
            parse(b"$200000000\r\n", small),
            Err(RespError::TooLong {
                len: 200_000_000,
                allowed: 10
            })
        ));
        assert!(matches!(
            parse(b"$9223372036854775807\r\n", small),
            Err(RespError::TooLong { .. })
        ));
        assert!(matches!(
            parse(b"*4000000000\r\n", wide()),
            Err(RespError::TooBig(_))
        ));
        let line = format!("+{}\r\n", "x".repeat(MAX_LINE + 1));
        assert!(matches!(
            parse(line.as_bytes(), wide()),
            Err(RespError::TooBig(_))
        ));
        // The whole reply's bytes are counted, not only each string's.
        let few = Allowance {
            max_bulk: 10,
            bytes: 30,
            elements: 100,
        };
        assert!(matches!(
            parse(
                b"*3\r\n$8\r\naaaaaaaa\r\n$8\r\nbbbbbbbb\r\n$8\r\ncccccccc\r\n",
                few
            ),
            Err(RespError::TooLong { .. } | RespError::TooBig(_))
        ));
        let deep = "*1\r\n".repeat(MAX_DEPTH + 1) + ":1\r\n";
        assert!(matches!(
            parse(deep.as_bytes(), wide()),
            Err(RespError::TooBig(_))
        ));
    }
}
