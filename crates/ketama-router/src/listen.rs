//! The router's listening sockets: bound by the router itself at start
//! (so an address in use is a start-up error naming its key), or taken
//! over from the process a graceful upgrade replaces
//! ([`crate::handover`]), then accepted ([`accept_loop`]) and each
//! connection handed to what serves its listener ([`App`]).
//!
//! Each listener says where it listens, in one log line at start
//! (`listening`, with its config key and the address bound): an address
//! with port 0 gets a free port from the kernel, which that line names,
//! for tests and for operators alike.
//!
//! A hand-over names each socket by its address (`127.0.0.1:8080`), or,
//! for port 0, by its config key and address (`admin.listen=127.0.0.1:0`:
//! two listeners may both ask for `127.0.0.1:0`), as Pingora's table of
//! listening descriptors names them.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::time::Duration;

use std::sync::Arc;

use crate::admin::serve::AdminServer;
use crate::conn::Admission;
use crate::service::ShutdownWatch;

/// What serves a listener's connections.
#[derive(Clone)]
pub enum App {
    /// The engine, behind the connection guard (proxy and TLS listeners;
    /// accepted on every worker thread).
    Engine(Arc<Admission>),
    /// The admin API (accepted on the control runtime).
    Admin(Arc<AdminServer>),
}

/// A listening socket, its endpoint and what serves it.
pub struct Listener {
    /// Its config key and address.
    pub endpoint: Endpoint,
    /// The socket, bound or received from the old process.
    pub socket: std::net::TcpListener,
    /// What serves it.
    pub app: App,
}

/// One listening address and the config key that asked for it.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// The config key (`server.listen[0]`, `admin.listen`).
    pub key: String,
    /// The address as configured (port 0: any free port).
    pub addr: SocketAddr,
}

impl Endpoint {
    /// Its name in a hand-over.
    pub fn table_key(&self) -> String {
        if self.addr.port() == 0 {
            // Names are sent separated by spaces.
            format!("{}={}", self.key, self.addr)
        } else {
            self.addr.to_string()
        }
    }
}

/// Binds `e` with `SO_REUSEADDR` and a backlog of 65535; an error names
/// the key and what to do.
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

/// The log line that says where a listener listens (see the module
/// docs): its config key and the address bound.
pub fn announce(e: &Endpoint, socket: &std::net::TcpListener) {
    let local = socket
        .local_addr()
        .map_or_else(|_| e.addr.to_string(), |a| a.to_string());
    tracing::info!(listener = e.key.as_str(), addr = %local, "listening");
}

/// Binds every endpoint now (a start, not an upgrade): the first that
/// cannot be bound is the error.
pub fn bind_all(endpoints: &[Endpoint]) -> anyhow::Result<Vec<std::net::TcpListener>> {
    endpoints.iter().map(bind).collect()
}

/// The listener for each endpoint on an upgrade: received from the old
/// process by its name, or (an endpoint the old process did not have)
/// bound now. Sockets received and not asked for are closed.
pub fn take_all(
    endpoints: &[Endpoint],
    received: &mut HashMap<String, OwnedFd>,
) -> anyhow::Result<Vec<std::net::TcpListener>> {
    endpoints
        .iter()
        .map(|e| match received.remove(&e.table_key()) {
            Some(fd) => {
                let l = std::net::TcpListener::from(fd);
                l.set_nonblocking(true)?;
                Ok(l)
            }
            None => bind(e),
        })
        .collect()
}

/// Accepts until the process stops (or hands over), each connection
/// served on a task of its own; `running` is let go when it returns
/// (see [`crate::drain::Drain::accepting`]).
pub async fn accept_loop(
    listener: tokio::net::TcpListener,
    app: App,
    mut shutdown: ShutdownWatch,
    running: crate::drain::Held,
) {
    let _running = running;
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
                match &app {
                    App::Engine(g) => {
                        tokio::spawn(g.clone().serve_connection(tcp, peer));
                    }
                    App::Admin(a) => {
                        tokio::spawn(a.clone().serve(tcp));
                    }
                }
            }
            // Out of descriptors: accept would fail again at once; let
            // connections close first.
            Err(e) if e.raw_os_error() == Some(24) => {
                tracing::error!("accept failed: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => tracing::debug!("accept failed: {e}"),
        }
    }
}
