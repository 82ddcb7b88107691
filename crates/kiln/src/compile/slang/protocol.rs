//! The worker protocol: frames of a little-endian `u32` length and that many bytes.
//!
//! Worker to pool, once at start: a JSON [`Hello`]. Pool to worker, per request: a JSON
//! [`super::SlangRequest`]. Worker to pool, per request: a JSON [`Reply`], then, for a
//! [`Reply::Done`], one raw frame per `Ok` output, in order (SPIR-V as JSON numbers would be
//! four times its size).

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};

use super::SlangError;

/// The largest frame either side accepts: beyond it the other side is broken.
const MAX_FRAME: usize = 1 << 30;

/// The worker's first frame.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Hello {
    /// The library's build tag, or why the worker cannot compile.
    pub(super) version: Result<String, SlangError>,
}

/// The worker's answer to one request.
#[derive(Debug, Serialize, Deserialize)]
pub(super) enum Reply {
    /// Compiled (successfully or not); each `Ok(len)` output follows as a raw frame.
    Done {
        outputs: Vec<Result<u64, String>>,
        diagnostics: String,
        served: Vec<String>,
        not_found: Vec<String>,
    },
    /// The request could not be compiled at all.
    Failed(SlangError),
}

pub(super) fn write_frame(out: &mut impl Write, bytes: &[u8]) -> io::Result<()> {
    let len = u32::try_from(bytes.len())
        .ok()
        .filter(|&len| len as usize <= MAX_FRAME)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "frame too large"))?;
    out.write_all(&len.to_le_bytes())?;
    out.write_all(bytes)
}

/// The next frame; `None` at a clean end of stream (between frames).
pub(super) fn read_frame(input: &mut impl Read) -> io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match input.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "frame too large",
        ));
    }
    let mut bytes = vec![0u8; len];
    input.read_exact(&mut bytes)?;
    Ok(Some(bytes))
}

pub(super) fn write_json(out: &mut impl Write, value: &impl Serialize) -> io::Result<()> {
    let bytes = serde_json::to_vec(value).map_err(io::Error::other)?;
    write_frame(out, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_end_cleanly() {
        let mut buffer = Vec::new();
        write_frame(&mut buffer, b"abc").unwrap();
        write_frame(&mut buffer, b"").unwrap();
        let mut input = &buffer[..];
        assert_eq!(
            read_frame(&mut input).unwrap().as_deref(),
            Some(&b"abc"[..])
        );
        assert_eq!(read_frame(&mut input).unwrap().as_deref(), Some(&b""[..]));
        assert!(read_frame(&mut input).unwrap().is_none());
        // A frame cut short is an error, not an end.
        let mut cut = &buffer[..5];
        assert!(read_frame(&mut cut).is_err());
    }
}
