//! Socket reads through a 64 KiB buffer, under the TLS layer.
//!
//! rustls reads the socket 4 KiB at a time (the read size of its record buffer), so an 8 KB
//! watch event took three `recvfrom` calls and a 1 MB list page about 250. Go's `crypto/tls`
//! reads what the socket holds. With [`BufferedTcp`] under the TLS layer one system call takes
//! what has arrived and rustls's 4 KiB reads are served from memory; a read at least as large
//! as the buffer bypasses it. Writes go straight to the socket.

use std::{
    io,
    pin::Pin,
    task::{Context, Poll},
};

use hyper_util::{
    client::legacy::connect::{Connected, Connection, HttpConnector},
    rt::TokioIo,
};
use tokio::{
    io::{AsyncRead, AsyncWrite, BufReader, ReadBuf},
    net::TcpStream,
};
use tower::util::MapResponse;

/// The read buffer's size: a few TLS records (16 KiB each at most).
pub(crate) const READ_BUFFER: usize = 64 * 1024;

/// A TCP stream read through a [`READ_BUFFER`]-byte buffer.
#[derive(Debug)]
pub(crate) struct BufferedTcp(BufReader<TcpStream>);

impl BufferedTcp {
    pub(crate) fn new(tcp: TcpStream) -> Self {
        Self(BufReader::with_capacity(READ_BUFFER, tcp))
    }
}

/// [`HttpConnector`] whose connections read through [`BufferedTcp`].
pub(crate) type BufferedConnector =
    MapResponse<HttpConnector, fn(TokioIo<TcpStream>) -> TokioIo<BufferedTcp>>;

/// Wraps `http`'s connections in [`BufferedTcp`].
pub(crate) fn buffered(http: HttpConnector) -> BufferedConnector {
    MapResponse::new(http, |io| TokioIo::new(BufferedTcp::new(io.into_inner())))
}

impl Connection for BufferedTcp {
    fn connected(&self) -> Connected {
        self.0.get_ref().connected()
    }
}

impl AsyncRead for BufferedTcp {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl AsyncWrite for BufferedTcp {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// Bytes written in pieces of every size come back whole and in order through 4 KiB reads
    /// (rustls's) and reads larger than the buffer; writes reach the peer; the connection info
    /// is the socket's.
    #[tokio::test]
    async fn reads_of_any_size_see_the_stream_as_sent() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let sent: Vec<u8> = (0..400_000u32).map(|i| (i % 251) as u8).collect();
        let server = {
            let sent = sent.clone();
            tokio::spawn(async move {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut at = 0;
                for size in [1, 100, 4096, 5000, 16_384, 70_000].iter().cycle() {
                    let end = (at + size).min(sent.len());
                    s.write_all(&sent[at..end]).await.unwrap();
                    s.flush().await.unwrap();
                    at = end;
                    if at == sent.len() {
                        break;
                    }
                }
                let mut echo = [0u8; 5];
                s.read_exact(&mut echo).await.unwrap();
                echo
            })
        };
        let mut tcp = BufferedTcp::new(TcpStream::connect(addr).await.unwrap());
        let mut extensions = http::Extensions::new();
        tcp.connected().get_extras(&mut extensions);
        let info = extensions
            .get::<hyper_util::client::legacy::connect::HttpInfo>()
            .expect("the socket's addresses");
        assert_eq!(info.remote_addr(), addr);
        let mut got = Vec::new();
        let mut small = [0u8; 4096];
        let mut large = vec![0u8; READ_BUFFER * 2];
        while got.len() < sent.len() {
            let buf: &mut [u8] = if got.len() % 3 == 0 {
                &mut large
            } else {
                &mut small
            };
            let n = tcp.read(buf).await.unwrap();
            assert!(n > 0, "the stream ended early at {}", got.len());
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, sent);
        tcp.write_all(b"hello").await.unwrap();
        assert_eq!(&server.await.unwrap(), b"hello");
    }
}
