//! Assembling the Pingora server: the composition root. The routing
//! state's owner ([`RoutingCell`]) is built here, and each service gets
//! the one or two handles it uses: the proxy, the connection guard and
//! the health checker a [`StateReader`](crate::state::StateReader);
//! discovery, control, the admin API and SIGHUP reloads the cell (their
//! changes go through [`RoutingCell::replace`]); the counters and the
//! discovery record where they are needed. Then it runs until a signal
//! says stop.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use async_trait::async_trait;
use pingora::apps::http_app::HttpServer;
use pingora::apps::HttpServerOptions;
use pingora::protocols::http::v2::server::H2Options;
use pingora::server::configuration::{Opt, ServerConf};
use pingora::server::{RunArgs, Server, ShutdownSignal, ShutdownSignalWatch};
use pingora::services::background::background_service;

use crate::access_log::{AccessLog, Reopener};
use crate::admin::Admin;
use crate::cell::{ConfigSource, Parts, RoutingCell};
use crate::checker::HealthChecker;
use crate::conn::Guarded;
use crate::discovery::DiscoveryState;
use crate::health::HealthRegistry;
use crate::listen::Listening;
use crate::metrics::Metrics;
use crate::proxy::Router;
use crate::reload::SighupReloader;
use crate::signals::Early;
use ketama_config::Validated;

/// File descriptors kept back from client connections when their limit is
/// derived from the file limit: health checks, the admin API, logs.
const RESERVED_FDS: u64 = 256;

/// How the process starts.
#[derive(Debug, Clone)]
pub struct Start {
    /// Take the listening sockets from a running router (graceful upgrade)
    /// instead of binding them.
    pub upgrade: bool,
    /// The signal handlers installed first thing in `main`.
    pub early: Early,
}

impl Default for Start {
    fn default() -> Self {
        Start {
            upgrade: false,
            early: Early::none(),
        }
    }
}

/// Raises the soft file limit to the hard one; returns the limit in force.
fn raise_file_limit() -> u64 {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(n) => n,
        Err(e) => {
            tracing::warn!("cannot raise the file limit: {e}");
            rlimit::getrlimit(rlimit::Resource::NOFILE).map_or(1024, |(soft, _)| soft)
        }
    }
}

/// Client connections allowed when the config does not say: half of what
/// the file limit leaves after the reserve and the upstream keep-alive
/// pool, since every proxied client connection may hold an upstream one.
pub fn default_max_connections(file_limit: u64, upstream_pool: usize) -> usize {
    (file_limit.saturating_sub(RESERVED_FDS + upstream_pool as u64) / 2).max(1) as usize
}

/// Builds the Pingora server for a validated config read from `source`
/// (which reloads read again); [`run`] serves until SIGINT/SIGTERM (then
/// waits at most the configured grace period, 1 s by default, instead of
/// Pingora's five minutes) or hands over on SIGQUIT. Returns the routing
/// state's owner too, for embedders and tests.
pub fn build(
    v: Validated,
    source: ConfigSource,
    start: Start,
) -> anyhow::Result<(Server, Arc<RoutingCell>)> {
    let s = &v.config.server;
    // The upgrade socket first: `--upgrade` without one (or with an unsafe
    // one) is refused before anything is bound or waited for.
    let upgrade_sock = crate::upgrade::resolve_here(&v);
    match &upgrade_sock {
        Some(p) if start.upgrade => crate::upgrade::check_for_upgrade(p)?,
        Some(p) if crate::upgrade::check(p)? == crate::upgrade::Found::NoDirectory => {
            tracing::warn!(path = %p.display(), "the graceful upgrade socket's directory does not exist yet: an upgrade is refused until it does (mode 0700, the router's user)");
        }
        Some(_) => {}
        None if start.upgrade => return Err(crate::upgrade::UpgradeSockError::NoSocket.into()),
        None => {}
    }
    // Every listener, by its config key. A start binds them all now, so an
    // address in use is an error naming its key before anything else
    // happens; an upgrade takes them over from the old process instead.
    let endpoint = |key: String, addr: SocketAddr| crate::listen::Endpoint { key, addr };
    let proxy_endpoints: Vec<_> = v
        .listen
        .iter()
        .enumerate()
        .map(|(i, a)| endpoint(format!("server.listen[{i}]"), *a))
        .collect();
    let tls_endpoints: Vec<_> = v
        .tls_listen
        .iter()
        .enumerate()
        .map(|(i, a)| endpoint(format!("tls.listen[{i}]"), *a))
        .collect();
    let admin_endpoints = vec![endpoint("admin.listen".into(), v.admin_listen)];
    let bound = if start.upgrade {
        None
    } else {
        Some((
            crate::listen::bind_all(&proxy_endpoints)?,
            crate::listen::bind_all(&tls_endpoints)?,
            crate::listen::bind_all(&admin_endpoints)?,
        ))
    };
    let (proxy_bound, tls_bound, admin_bound) = match bound {
        Some((p, t, a)) => (Some(p), Some(t), Some(a)),
        None => (None, None, None),
    };
    let file_limit = raise_file_limit();
    let default_max = default_max_connections(file_limit, s.upstream_keepalive_pool_size);
    // Before any session exists: every HTTP/1 body reader takes it when it is made.
    pingora::protocols::http::v1::set_body_buffer_size(s.body_buffer_bytes);
    tracing::info!(
        file_limit,
        max_connections = s.max_connections.unwrap_or(default_max),
        body_buffer_bytes = pingora::protocols::http::v1::body_buffer_size(),
        "connection limits"
    );
    let conf = ServerConf {
        threads: s.threads,
        work_stealing: s.work_stealing,
        grace_period_seconds: Some(s.grace_period_seconds),
        graceful_shutdown_timeout_seconds: Some(s.grace_period_seconds),
        upstream_keepalive_pool_size: s.upstream_keepalive_pool_size,
        // Empty: no graceful upgrade (SIGQUIT stops gracefully instead).
        upgrade_sock: upgrade_sock
            .as_ref()
            .map_or_else(String::new, |p| p.display().to_string()),
        ..ServerConf::default()
    };
    let opt = Opt {
        upgrade: start.upgrade,
        ..Opt::default()
    };
    match &upgrade_sock {
        Some(p) => tracing::info!(path = %p.display(), "graceful upgrade socket"),
        None => tracing::info!(
            "no graceful upgrade socket (neither server.upgrade_sock nor RUNTIME_DIRECTORY): SIGQUIT stops gracefully without handing the listeners over"
        ),
    }
    let mut server = Server::new_with_opt_and_conf(Some(opt), conf);
    server.bootstrap();
    let h2 = h2_settings(s);
    for w in &v.warnings {
        tracing::warn!("{w}");
    }
    // With [control], the routing sections come from etcd (or the cache
    // file) before anything is built.
    let metrics = Arc::new(Metrics::default());
    let (shared, etcd_rollout, control) = match v.control {
        Some(_) => {
            let start = crate::control::Control::start(&v, metrics.clone())?;
            (start.shared, start.rollout, Some(start.control))
        }
        None => (None, None, None),
    };
    let effective = match &shared {
        Some(sh) => v.with_shared(sh.routing.clone(), &sh.name)?,
        None => v.clone(),
    };
    let discovery = Arc::new(discover_at_start(&effective)?);
    drop(effective);
    let health = Arc::new(HealthRegistry::default());
    let access_log = AccessLog::start().context("cannot start the access log's writer thread")?;
    for (source, result, n) in discovery.resolution_counts() {
        metrics.discovery_resolved(&source, result, n);
    }
    let cell = Arc::new(
        RoutingCell::new(
            source,
            v,
            shared,
            discovery.records(),
            etcd_rollout,
            Parts {
                health,
                metrics: metrics.clone(),
                access_log: access_log.clone(),
            },
        )
        .context("cannot build the routing state")?,
    );
    // The certificates the state loaded (once: not read again to warn).
    let first = cell.state();
    let (_, expiring) = crate::tls::certificate_report(&first.validated.file, first.tls.as_deref());
    for w in expiring {
        tracing::warn!("{w}");
    }
    drop(first);

    let router = Router {
        routing: cell.reader(),
        metrics: metrics.clone(),
        access_log: access_log.clone(),
    };
    let mut proxy = pingora::proxy::http_proxy(&server.configuration, router);
    (proxy.server_options, proxy.h2_options) = h2;
    // HTTP/1 is the router's own engine's; Pingora's proxy serves HTTP/2
    // clients, and HTTP/1 clients only with `[upstream_tls] h2`.
    let engine = Arc::new(crate::http1::Engine {
        routing: cell.reader(),
        metrics: metrics.clone(),
        access_log: access_log.clone(),
    });
    let guard = Guarded::new(proxy, default_max, cell.reader(), metrics.clone(), engine);
    if !tls_endpoints.is_empty() {
        server.add_service(Listening::new(
            "ketama tls",
            tls_endpoints,
            tls_bound,
            Arc::new(guard.tls_twin()),
        ));
    }
    server.add_service(Listening::new(
        "ketama proxy",
        proxy_endpoints,
        proxy_bound,
        Arc::new(guard),
    ));
    let admin = Admin {
        cell: cell.clone(),
        discovery: discovery.clone(),
        control: control.clone(),
        metrics: metrics.clone(),
        access_log: access_log.clone(),
        latency: Default::default(),
    };
    server.add_service(Listening::new(
        "ketama admin",
        admin_endpoints,
        admin_bound,
        Arc::new(crate::listen::PingoraApp(Arc::new(HttpServer::new_app(
            admin,
        )))),
    ));
    server.add_service(background_service(
        "health checks",
        HealthChecker {
            routing: cell.reader(),
        },
    ));
    server.add_service(background_service(
        "dns discovery",
        crate::discovery::Discovery {
            cell: cell.clone(),
            discovery,
            metrics: metrics.clone(),
        },
    ));
    server.add_service(background_service(
        "etcd control",
        crate::control::ControlService {
            control,
            cell: cell.clone(),
            metrics: metrics.clone(),
        },
    ));
    server.add_service(background_service(
        "cache totals",
        crate::metrics::cache::CacheTicker { metrics },
    ));
    server.add_service(background_service(
        "sigusr1 access log reopen",
        Reopener { log: access_log },
    ));
    server.add_service(background_service(
        "sighup reload",
        SighupReloader {
            cell: cell.clone(),
            early: start.early.clone(),
        },
    ));
    Ok((server, cell))
}

/// Pingora's HTTP/2 settings from `[server]`, fixed at start: the idle
/// time of a connection with no open stream (`keepalive_timeout_ms`),
/// streams at once, and the decoded header list's cap
/// (`max_header_bytes`, as `SETTINGS_MAX_HEADER_LIST_SIZE`).
fn h2_settings(
    s: &ketama_config::model::ServerSection,
) -> (Option<HttpServerOptions>, Option<H2Options>) {
    let mut options = HttpServerOptions::default();
    options.h2_idle_timeout = Some(std::time::Duration::from_millis(s.keepalive_timeout_ms));
    let mut h2 = H2Options::new();
    h2.max_concurrent_streams(s.h2_max_concurrent_streams)
        .max_header_list_size(s.max_header_bytes as u32);
    (Some(options), Some(h2))
}

/// Resolves the config's discovery sources once before the first
/// routing state is built. A source that fails is logged and the router
/// starts with the rest; with no backend at all it refuses to start,
/// unless a source says `wait_for_discovery`: then it asks again until one
/// answers.
fn discover_at_start(v: &Validated) -> anyhow::Result<DiscoveryState> {
    let state = DiscoveryState::default();
    if v.discovery.is_empty() {
        return Ok(state);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start a runtime for DNS discovery")?;
    let wait = v.discovery.iter().any(|d| d.wait);
    let retry = v
        .discovery
        .iter()
        .map(|d| d.min_interval)
        .min()
        .unwrap_or_default();
    loop {
        rt.block_on(crate::discovery::resolve_all(&state, v));
        let found = state.discovered(v).len();
        if found > 0 || !v.config.backends.is_empty() {
            tracing::info!(discovered = found, "discovery at start");
            return Ok(state);
        }
        if !wait {
            anyhow::bail!(
                "{}: no backends: no [[backends]] and no discovery source answered ({}); fix the sources, add static backends, or set wait_for_discovery = true to wait for them",
                v.file,
                v.discovery.iter().map(|d| d.id()).collect::<Vec<_>>().join("; ")
            );
        }
        tracing::warn!("no backends yet; waiting for discovery (wait_for_discovery = true)");
        std::thread::sleep(retry);
    }
}

/// Pingora's own signal watch (SIGQUIT upgrade, SIGTERM graceful, SIGINT
/// fast), which also tells the early handlers to stand down once it
/// listens, so no signal falls between the two. Without an upgrade socket
/// SIGQUIT is a graceful stop; with one, the listeners go only to a safe
/// socket of this user's (or root's), else the router serves on.
struct Signals {
    early: Early,
    /// The upgrade socket (`None`: SIGQUIT stops gracefully).
    upgrade_sock: Option<std::path::PathBuf>,
}

#[async_trait]
impl ShutdownSignalWatch for Signals {
    async fn recv(&self) -> ShutdownSignal {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut quit), Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::quit()),
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            tracing::error!("cannot listen for signals: stopping");
            return ShutdownSignal::FastShutdown;
        };
        self.early.ready();
        loop {
            tokio::select! {
                _ = quit.recv() => {
                    let Some(path) = &self.upgrade_sock else {
                        tracing::warn!("SIGQUIT without an upgrade socket: stopping gracefully, the listeners are not handed over");
                        return ShutdownSignal::GracefulTerminate;
                    };
                    // Whoever made the socket receives the listeners: only
                    // a safe one of this user's (or root's) gets them.
                    match crate::upgrade::check_before_handover(path) {
                        Ok(()) => return ShutdownSignal::GracefulUpgrade,
                        Err(e) => tracing::error!("SIGQUIT: the listeners are not handed over, serving on: {e}"),
                    }
                }
                _ = term.recv() => return ShutdownSignal::GracefulTerminate,
                _ = int.recv() => return ShutdownSignal::FastShutdown,
            }
        }
    }
}

/// Runs the server until it is told to stop, then exits the process.
pub fn run(server: Server, early: Early) -> ! {
    let sock = &server.configuration.upgrade_sock;
    let upgrade_sock = (!sock.is_empty()).then(|| std::path::PathBuf::from(sock));
    server.run(RunArgs {
        shutdown_signal: Box::new(Signals {
            early,
            upgrade_sock,
        }),
    });
    std::process::exit(0)
}
