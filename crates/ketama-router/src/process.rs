//! The router's process: `[server] threads` worker threads, each a
//! runtime of its own accepting on every proxy and TLS listener (a
//! connection stays on the thread that accepted it: its buffers, its
//! backend connections and its parked neighbours are that thread's), and
//! a control runtime for the admin API and the background services
//! (health checks, discovery, etcd control, reloads), then the signals:
//!
//! | signal | what the router does |
//! |---|---|
//! | SIGTERM | graceful stop: stops accepting (every accept loop has seen the stop before anything else), lets the request heads being read arrive (2 s at most, within the grace period), closes the idle connections, waits up to `grace_period_seconds` for the rest, exits 0 |
//! | SIGINT | stops at once, exits 0 |
//! | SIGQUIT | graceful upgrade: hands the listening sockets to the process started with `--upgrade` ([`crate::handover`]), then stops gracefully; without an upgrade socket, a graceful stop; with an unsafe one, serves on |
//! | SIGHUP, SIGUSR1 | reload, reopen the access log (their services) |

use std::os::fd::{AsFd, AsRawFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::conn::Admission;
use crate::listen::{App, Listener};
use crate::metrics::Metrics;
use crate::service::{Background, ShutdownWatch};
use crate::signals::Early;

/// The process, assembled ([`crate::server::build`]), to [`Server::run`].
pub struct Server {
    /// Worker threads.
    pub workers: usize,
    /// One runtime whose threads share the connections, instead of a
    /// runtime per thread (`[server] work_stealing`).
    pub work_stealing: bool,
    /// How long a graceful stop waits for what is in flight.
    pub grace: Duration,
    /// The upgrade socket (`None`: SIGQUIT stops gracefully).
    pub upgrade_sock: Option<PathBuf>,
    /// Every listener.
    pub listeners: Vec<Listener>,
    /// Every background service, by name.
    pub background: Vec<(&'static str, Arc<dyn Background>)>,
    /// The counters (open connections, at a stop).
    pub metrics: Arc<Metrics>,
    /// The client connections' graceful stop.
    pub drain: Arc<crate::drain::Drain>,
    /// The signal handlers installed first thing.
    pub early: Early,
}

/// How the process was told to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    Graceful,
    Fast,
}

impl Server {
    /// Serves until a signal says stop (see the module docs); returns the
    /// process's exit status.
    pub fn run(self) -> i32 {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let (exit_tx, exit_rx) = tokio::sync::watch::channel(false);
        // Each worker runtime accepts on every engine listener (a socket
        // of its own, cloned); with work stealing one runtime does.
        let runtimes = if self.work_stealing {
            1
        } else {
            self.workers.max(1)
        };
        let mut threads = Vec::new();
        for i in 0..runtimes {
            let mut mine = Vec::new();
            for l in &self.listeners {
                if let App::Engine(g) = &l.app {
                    match l.socket.try_clone() {
                        Ok(s) => mine.push((s, g.clone(), self.drain.accepting.hold())),
                        Err(e) => {
                            tracing::error!(listener = l.endpoint.key.as_str(), "{e}");
                            return 1;
                        }
                    }
                }
            }
            let (rx, exit_rx) = (rx.clone(), exit_rx.clone());
            let (stealing, workers) = (self.work_stealing, self.workers.max(1));
            let spawned = std::thread::Builder::new()
                .name(format!("ketama worker {i}"))
                .spawn(move || {
                    let rt = if stealing {
                        tokio::runtime::Builder::new_multi_thread()
                            .worker_threads(workers)
                            .thread_name("ketama worker")
                            .enable_all()
                            .build()
                    } else {
                        tokio::runtime::Builder::new_current_thread()
                            .enable_all()
                            .build()
                    };
                    match rt {
                        Ok(rt) => rt.block_on(accept_on(mine, rx, exit_rx)),
                        Err(e) => {
                            tracing::error!("cannot start a worker runtime: {e}");
                            std::process::exit(1);
                        }
                    }
                });
            match spawned {
                Ok(t) => threads.push(t),
                Err(e) => {
                    tracing::error!("cannot start a worker thread: {e}");
                    return 1;
                }
            }
        }
        let control = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("ketama control")
            .enable_all()
            .build();
        let control = match control {
            Ok(rt) => rt,
            Err(e) => {
                tracing::error!("cannot start the control runtime: {e}");
                return 1;
            }
        };
        let code = control.block_on(self.control(tx, rx));
        let _ = exit_tx.send(true);
        code
    }

    /// The control runtime's part: the admin listener, the background
    /// services, the signals and the stop.
    async fn control(self, tx: tokio::sync::watch::Sender<bool>, rx: ShutdownWatch) -> i32 {
        for l in &self.listeners {
            crate::listen::announce(&l.endpoint, &l.socket);
            if let App::Admin(_) = &l.app {
                let socket = match l
                    .socket
                    .try_clone()
                    .and_then(tokio::net::TcpListener::from_std)
                {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::error!(listener = l.endpoint.key.as_str(), "{e}");
                        return 1;
                    }
                };
                tokio::spawn(crate::listen::accept_loop(
                    socket,
                    l.app.clone(),
                    rx.clone(),
                    self.drain.accepting.hold(),
                ));
            }
        }
        for (name, service) in &self.background {
            let (s, rx) = (service.clone(), rx.clone());
            tracing::debug!(service = name, "starting");
            tokio::spawn(async move { s.start(rx).await });
        }
        let stop = match self.signals().await {
            Some(s) => s,
            None => return 1,
        };
        let _ = tx.send(true);
        if stop == Stop::Fast {
            return 0;
        }
        // A connection accepted just before the stop, whose request is on
        // its way, would lose it if closed now: every accept loop on the
        // worker threads sees the stop first (until then one may still
        // take a connection from a socket the new process shares, unseen
        // by the counts below), the heads being read arrive (at most 2 s,
        // within the grace period), then the idle connections close,
        // then what is in flight finishes.
        let deadline = tokio::time::Instant::now() + self.grace;
        let heads = tokio::time::Instant::now() + self.grace.min(Duration::from_secs(2));
        self.drain.accepting.until_none(heads).await;
        self.drain.heads.until_none(heads).await;
        self.drain.close_idle();
        while self.metrics.open_connections() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let open = self.metrics.open_connections();
        if open > 0 {
            tracing::warn!(
                open,
                grace = ?self.grace,
                "graceful stop: the grace period is over, closing the connections still open (raise [server] grace_period_seconds if their requests should finish)"
            );
        }
        0
    }

    /// Waits for a signal that stops the router; hands the listeners over
    /// on SIGQUIT when it can. `None`: the signals cannot be watched.
    async fn signals(&self) -> Option<Stop> {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut quit), Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::quit()),
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            tracing::error!("cannot listen for signals: stopping");
            return None;
        };
        self.early.ready();
        loop {
            tokio::select! {
                _ = quit.recv() => {
                    let Some(path) = &self.upgrade_sock else {
                        tracing::warn!("SIGQUIT without an upgrade socket: stopping gracefully, the listeners are not handed over");
                        return Some(Stop::Graceful);
                    };
                    // Whoever made the socket receives the listeners: only
                    // a safe one of this user's (or root's) gets them.
                    if let Err(e) = crate::upgrade::check_before_handover(path) {
                        tracing::error!("SIGQUIT: the listeners are not handed over, serving on: {e}");
                        continue;
                    }
                    let sockets: Vec<(String, std::os::fd::BorrowedFd<'_>)> = self
                        .listeners
                        .iter()
                        .map(|l| (l.endpoint.table_key(), l.socket.as_fd()))
                        .collect();
                    let path = path.clone();
                    let sent = tokio::task::block_in_place(|| crate::handover::send(&path, &sockets));
                    match sent {
                        Ok(()) => {
                            tracing::info!(
                                sockets = ?self.listeners.iter().map(|l| l.socket.as_raw_fd()).collect::<Vec<_>>(),
                                "listening sockets handed over; stopping gracefully"
                            );
                            return Some(Stop::Graceful);
                        }
                        Err(e) => tracing::error!("SIGQUIT: the hand-over failed, serving on: {e}"),
                    }
                }
                _ = term.recv() => return Some(Stop::Graceful),
                _ = int.recv() => return Some(Stop::Fast),
            }
        }
    }
}

/// A worker runtime's part: an accept loop on each of its sockets, until
/// the process exits.
async fn accept_on(
    sockets: Vec<(std::net::TcpListener, Arc<Admission>, crate::drain::Held)>,
    stop: ShutdownWatch,
    mut exit: tokio::sync::watch::Receiver<bool>,
) {
    for (socket, guard, running) in sockets {
        match tokio::net::TcpListener::from_std(socket) {
            Ok(l) => {
                tokio::spawn(crate::listen::accept_loop(
                    l,
                    App::Engine(guard),
                    stop.clone(),
                    running,
                ));
            }
            Err(e) => tracing::error!("cannot accept: {e}"),
        }
    }
    let _ = exit.wait_for(|&x| x).await;
}
