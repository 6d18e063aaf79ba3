//! The router's listening sockets: bound by the router itself at start
//! (so an address in use is a start-up error naming its key), or taken
//! over from the process a graceful upgrade replaces, then accepted in a
//! Pingora service of the router's own, which hands each connection's
//! socket to a [`Serve`] (the connection guard, which makes Pingora
//! streams only for what Pingora serves; the admin API, a Pingora app,
//! through [`PingoraApp`]).
//!
//! Each listener says where it listens, in one log line at start
//! (`listening`, with its config key and the address bound): an address
//! with port 0 gets a free port from the kernel, which that line names,
//! for tests and for operators alike.
//!
//! The sockets are registered in Pingora's table of listening
//! descriptors, which a graceful upgrade sends to the new process: under
//! their address (`127.0.0.1:8080`, as Pingora's own listeners register
//! them, so an upgrade from or to a build that listened through Pingora
//! hands them over too), or, for port 0, under their config key and
//! address (`admin.listen=127.0.0.1:0`: two listeners may both ask for
//! `127.0.0.1:0`).

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pingora::apps::ServerApp;
use pingora::protocols::l4::stream::Stream as L4Stream;
use pingora::protocols::{GetSocketDigest, SocketDigest};
use pingora::server::{ListenFds, ShutdownWatch};
use pingora::services::Service;

/// One listening address and the config key that asked for it.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// The config key (`server.listen[0]`, `admin.listen`).
    pub key: String,
    /// The address as configured (port 0: any free port).
    pub addr: SocketAddr,
}

impl Endpoint {
    /// Its name in the table of descriptors an upgrade hands over.
    fn table_key(&self) -> String {
        if self.addr.port() == 0 {
            // Pingora sends the table's names separated by spaces.
            format!("{}={}", self.key, self.addr)
        } else {
            self.addr.to_string()
        }
    }
}

/// Binds `e` as Pingora's listeners bind (`SO_REUSEADDR`, a backlog of
/// 65535); an error names the key and what to do.
fn bind(e: &Endpoint) -> anyhow::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let fail = |err: std::io::Error| {
        anyhow::anyhow!(
            "cannot listen on {} ({}): {err}: stop what holds it or change {}",
            e.addr,
            e.key,
            e.key
        )
    };
    let s = Socket::new(Domain::for_address(e.addr), Type::STREAM, None).map_err(fail)?;
    s.set_reuse_address(true).map_err(fail)?;
    s.bind(&e.addr.into()).map_err(fail)?;
    s.listen(65535).map_err(fail)?;
    s.set_nonblocking(true).map_err(fail)?;
    Ok(s.into())
}

/// Binds every endpoint now (a start, not an upgrade): the first that
/// cannot be bound is the error.
pub fn bind_all(endpoints: &[Endpoint]) -> anyhow::Result<Vec<std::net::TcpListener>> {
    endpoints.iter().map(bind).collect()
}

/// What serves an accepted connection. Its future is the connection's
/// task itself (no box): what an idle connection holds is its size.
pub trait Serve: Send + Sync + 'static {
    /// Serves `tcp`, from `peer`, until it closes.
    fn serve(
        self: Arc<Self>,
        tcp: tokio::net::TcpStream,
        peer: SocketAddr,
        shutdown: ShutdownWatch,
    ) -> impl std::future::Future<Output = ()> + Send + 'static;
    /// After the listeners stopped accepting (see Pingora's
    /// `ServerApp::cleanup`).
    fn cleanup(&self) -> impl std::future::Future<Output = ()> + Send;
}

/// A Pingora app served on the router's listeners: each connection as the
/// Pingora stream its listeners would have made.
pub struct PingoraApp<A>(pub Arc<A>);

impl<A: ServerApp + Send + Sync + 'static> Serve for PingoraApp<A> {
    async fn serve(
        self: Arc<Self>,
        tcp: tokio::net::TcpStream,
        peer: SocketAddr,
        shutdown: ShutdownWatch,
    ) {
        let mut next = self.0.process_new(stream(tcp, peer), &shutdown).await;
        while let Some(s) = next {
            next = self.0.process_new(s, &shutdown).await;
        }
    }

    async fn cleanup(&self) {
        self.0.cleanup().await
    }
}

/// A Pingora service of the router's own that accepts on its endpoints
/// and hands each connection to `app`; see the module docs.
pub struct Listening<A> {
    name: String,
    endpoints: Vec<Endpoint>,
    /// Bound at start (`None`: an upgrade, taken from the table instead).
    bound: Option<Vec<std::net::TcpListener>>,
    app: Arc<A>,
}

impl<A> Listening<A> {
    /// A service named `name` serving `app` on `endpoints`, with the
    /// sockets [`bind_all`] bound for them (`None` on an upgrade: the old
    /// process's are taken over).
    pub fn new(
        name: &str,
        endpoints: Vec<Endpoint>,
        bound: Option<Vec<std::net::TcpListener>>,
        app: Arc<A>,
    ) -> Self {
        Listening {
            name: name.to_string(),
            endpoints,
            bound,
            app,
        }
    }
}

/// The listener for `e`: bound at start, or received from the old process,
/// or (an upgrade from a process that did not have it) bound now.
fn take(
    e: &Endpoint,
    bound: Option<std::net::TcpListener>,
    fds: Option<&ListenFds>,
) -> anyhow::Result<std::net::TcpListener> {
    let key = e.table_key();
    let listener = match bound {
        Some(l) => l,
        None => {
            let inherited = fds.and_then(|f| f.lock().take_tcp_listener(&key));
            match inherited {
                Some(l) => {
                    l.set_nonblocking(true)?;
                    return Ok(l);
                }
                None => bind(e)?,
            }
        }
    };
    if let Some(f) = fds {
        f.lock().add(key, listener.as_raw_fd());
    }
    Ok(listener)
}

#[async_trait]
impl<A: Serve> Service for Listening<A> {
    async fn start_service(
        &mut self,
        fds: Option<ListenFds>,
        shutdown: ShutdownWatch,
        listeners_per_fd: usize,
    ) {
        let mut bound = self.bound.take().map(|b| b.into_iter());
        let mut loops = Vec::new();
        for e in &self.endpoints {
            let listener = take(e, bound.as_mut().and_then(|b| b.next()), fds.as_ref())
                .and_then(|l| Ok(tokio::net::TcpListener::from_std(l)?));
            let listener = match listener {
                Ok(l) => Arc::new(l),
                Err(err) => {
                    // A start binds at build time, so only an upgrade gets
                    // here; without this listener the process cannot serve.
                    tracing::error!(listener = e.key.as_str(), "{err:#}");
                    std::process::exit(1);
                }
            };
            let local = listener
                .local_addr()
                .map_or_else(|_| e.addr.to_string(), |a| a.to_string());
            tracing::info!(listener = e.key.as_str(), addr = %local, "listening");
            for _ in 0..listeners_per_fd.max(1) {
                let (l, app, shutdown) = (listener.clone(), self.app.clone(), shutdown.clone());
                loops.push(tokio::spawn(accept_loop(l, app, shutdown)));
            }
        }
        for l in loops {
            let _ = l.await;
        }
        self.app.cleanup().await;
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn listen_addresses(&self) -> Option<Vec<String>> {
        Some(self.endpoints.iter().map(Endpoint::table_key).collect())
    }
}

/// Accepts until the server shuts down (or hands over), each connection
/// served on a task of its own.
async fn accept_loop<A: Serve>(
    listener: Arc<tokio::net::TcpListener>,
    app: Arc<A>,
    mut shutdown: ShutdownWatch,
) {
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    return;
                }
                continue;
            }
        };
        match accepted {
            Ok((tcp, peer)) => {
                let _ = tcp.set_nodelay(true);
                tokio::spawn(app.clone().serve(tcp, peer, shutdown.clone()));
            }
            // Out of descriptors: accept would fail again at once; let
            // connections close first, as Pingora's own listeners do.
            Err(e) if e.raw_os_error() == Some(24) => {
                tracing::error!("accept failed: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => tracing::debug!("accept failed: {e}"),
        }
    }
}

/// The socket digest Pingora keeps of a connection: its descriptor and
/// the peer's address (`X-Forwarded-For`, the access log).
pub fn socket_digest(tcp: &tokio::net::TcpStream, peer: SocketAddr) -> SocketDigest {
    let digest = SocketDigest::from_raw_fd(tcp.as_raw_fd());
    let _ = digest.peer_addr.set(Some(peer.into()));
    digest
}

/// An accepted socket (`TCP_NODELAY` set) as the Pingora stream its apps
/// take: no read buffer (the HTTP/1 session reads into its own),
/// Pingora's default 1460-byte write buffer, its socket digest; `early`
/// bytes already read from it are read again first.
pub fn stream_with(
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    early: &[u8],
) -> pingora::protocols::l4::stream::Stream {
    let digest = socket_digest(&tcp, peer);
    let mut s = L4Stream::from(tcp);
    s.set_buffer(pingora::protocols::l4::stream::L4BufferSettings::default().read(0));
    s.set_socket_digest(digest);
    if !early.is_empty() {
        s.rewind(early);
    }
    s
}

/// [`stream_with`] and nothing read yet, boxed as Pingora's apps take it.
pub fn stream(tcp: tokio::net::TcpStream, peer: SocketAddr) -> pingora::protocols::Stream {
    Box::new(stream_with(tcp, peer, &[]))
}
