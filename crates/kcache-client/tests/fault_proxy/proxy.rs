//! A TCP proxy on 127.0.0.1 that injects network faults between clients and one server. It
//! forwards bytes (TLS passes through untouched), so what it simulates is the network:
//!
//! - [`FaultProxy::cut`]: every open connection is closed (a reset load balancer, a restarted
//!   node);
//! - [`FaultProxy::stall`]: nothing is forwarded in either direction until
//!   [`FaultProxy::resume`]; the connections stay open and carry on afterwards (a congested
//!   link);
//! - [`FaultProxy::partition`]: the open connections go half-open for good (they stay open, and
//!   forward nothing ever again: a dead node, a dropped NAT entry, a frozen load balancer), and
//!   new connections are accepted but answered with silence (a black hole) until
//!   [`FaultProxy::heal`], which closes those black-holed ones and forwards new connections
//!   again. The half-open ones stay half-open: only the client can find out they are dead.

use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
};

use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{TcpListener, TcpStream},
    sync::watch,
};
use tokio_util::sync::CancellationToken;

/// One proxied connection's switches.
struct Conn {
    /// Cancelled by `cut`: the connection is closed.
    cut: CancellationToken,
    /// Set by `partition`: nothing more is forwarded, the sockets are held open.
    dead: AtomicBool,
}

struct Shared {
    upstream: SocketAddr,
    conns: Mutex<Vec<Arc<Conn>>>,
    /// `true` while stalled.
    stalled: watch::Sender<bool>,
    /// `true` while partitioned (new connections are black-holed).
    partitioned: AtomicBool,
    /// Connections accepted during a partition, closed by `heal`.
    black_holed: Mutex<Vec<TcpStream>>,
    /// Ends every task when the proxy is dropped.
    shutdown: CancellationToken,
}

/// The proxy; dropping it closes everything.
pub(crate) struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
    }
}

impl FaultProxy {
    /// Listens on 127.0.0.1 (a free port) and forwards to `upstream`.
    pub(crate) async fn start(upstream: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            upstream,
            conns: Mutex::default(),
            stalled: watch::Sender::new(false),
            partitioned: AtomicBool::new(false),
            black_holed: Mutex::default(),
            shutdown: CancellationToken::new(),
        });
        tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
        Ok(Self { addr, shared })
    }

    /// The address clients connect to.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Closes every open connection.
    pub(crate) fn cut(&self) {
        for c in self.shared.conns.lock().unwrap().drain(..) {
            c.cut.cancel();
        }
    }

    /// Stops forwarding until [`FaultProxy::resume`].
    pub(crate) fn stall(&self) {
        self.shared.stalled.send_replace(true);
    }

    /// Forwards again what a stall held back.
    pub(crate) fn resume(&self) {
        self.shared.stalled.send_replace(false);
    }

    /// Makes every open connection half-open for good and black-holes new ones.
    pub(crate) fn partition(&self) {
        self.shared.partitioned.store(true, Ordering::SeqCst);
        for c in self.shared.conns.lock().unwrap().iter() {
            c.dead.store(true, Ordering::SeqCst);
        }
    }

    /// Ends a partition: black-holed connections are closed, new ones are forwarded. Under the
    /// lock the accept loop black-holes under, so that a connection accepted while the
    /// partition ends is either closed here or forwarded, never black-holed for good.
    pub(crate) fn heal(&self) {
        let mut held = self.shared.black_holed.lock().unwrap();
        self.shared.partitioned.store(false, Ordering::SeqCst);
        held.clear();
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let accepted = tokio::select! {
            () = shared.shutdown.cancelled() => return,
            a = listener.accept() => a,
        };
        let Ok((client, _)) = accepted else { continue };
        // Checked and held under one lock with `heal` (see there).
        let client = {
            let mut held = shared.black_holed.lock().unwrap();
            if shared.partitioned.load(Ordering::SeqCst) {
                held.push(client);
                continue;
            }
            client
        };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(shared.upstream).await else {
                return;
            };
            let conn = Arc::new(Conn {
                cut: shared.shutdown.child_token(),
                dead: AtomicBool::new(false),
            });
            shared.conns.lock().unwrap().push(Arc::clone(&conn));
            let (cr, cw) = client.into_split();
            let (sr, sw) = server.into_split();
            let up = pump(cr, sw, &conn, &shared);
            let down = pump(sr, cw, &conn, &shared);
            tokio::select! {
                () = conn.cut.cancelled() => {}
                _ = futures::future::join(up, down) => {}
            }
            shared
                .conns
                .lock()
                .unwrap()
                .retain(|c| !Arc::ptr_eq(c, &conn));
        });
    }
}

/// Copies `from` to `to` until EOF, honouring stalls; once the connection is dead it holds both
/// halves open and forwards nothing (returns only when the connection is cut).
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    conn: &Conn,
    shared: &Shared,
) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut stalled = shared.stalled.subscribe();
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => {
                let _ = to.shutdown().await;
                return;
            }
            Ok(n) => n,
        };
        if stalled.wait_for(|s| !*s).await.is_err() {
            return;
        }
        if conn.dead.load(Ordering::SeqCst) {
            // Half-open: swallow whatever comes, answer nothing, never close.
            while from.read(&mut buf).await.is_ok_and(|n| n > 0) {}
            std::future::pending::<()>().await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
