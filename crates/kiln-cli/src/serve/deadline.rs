//! A connection whose writes must make progress: a client that stops reading (its receive
//! window full, an event stream it never drains) is cut off after a while instead of holding
//! a connection slot, and its task, forever. Reads are bounded by hyper's header timeout.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// `inner`, whose every write or flush that cannot make progress for `timeout` fails with
/// [`io::ErrorKind::TimedOut`].
pub struct WriteDeadline<S> {
    inner: S,
    timeout: Duration,
    /// Armed while a write is pending; disarmed by any progress.
    sleep: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteDeadline<S> {
    pub fn new(inner: S, timeout: Duration) -> Self {
        Self {
            inner,
            timeout,
            sleep: None,
        }
    }

    /// `Ready(Err)` once a pending write has waited `timeout`; otherwise `Pending`.
    fn pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let timeout = self.timeout;
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client read nothing for too long",
            )),
            Poll::Pending => Poll::Pending,
        }
    }

    fn guard<T>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match polled {
            Poll::Ready(result) => {
                self.sleep = None;
                Poll::Ready(result)
            }
            Poll::Pending => self.pending(cx).map(Err),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.guard(cx, polled)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.guard(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.guard(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.guard(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_write_nobody_reads_fails_after_the_timeout_and_progress_rearms_it() {
        let (near, mut far) = tokio::io::duplex(64);
        let mut conn = WriteDeadline::new(near, Duration::from_secs(30));
        // Within the buffer: no wait at all.
        conn.write_all(&[1; 64]).await.unwrap();
        // The reader drains slowly, each read well within the timeout: the writes go on.
        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 64];
            for _ in 0..4 {
                tokio::time::sleep(Duration::from_secs(20)).await;
                far.read_exact(&mut buf).await.unwrap();
            }
            far
        });
        conn.write_all(&[2; 64 * 3]).await.unwrap();
        let _far = reader.await.unwrap();
        // Now nobody reads: the next write that does not fit fails after 30 s.
        conn.write_all(&[3; 64]).await.unwrap();
        let started = tokio::time::Instant::now();
        let e = conn.write_all(&[4; 64]).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(30));
    }
}
