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
use pingora::services::listening::Service;

use crate::access_log::{AccessLog, Reopener};
use crate::admin::Admin;
use crate::cell::{ConfigSource, Parts, RoutingCell};
use crate::checker::HealthChecker;
use crate::conn::Guarded;
use crate::discovery::DiscoveryState;
use crate::health::HealthRegistry;
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

/// Binds each address the way Pingora will (SO_REUSEADDR) and lets it go,
/// so that an address in use is a clear start-up error naming the key, not
/// a panic inside Pingora's listener thread after 30 s of retries.
fn probe(addrs: &[(String, SocketAddr)]) -> anyhow::Result<()> {
    use socket2::{Domain, Socket, Type};
    for (key, addr) in addrs {
        let fail = |e: std::io::Error| {
            anyhow::anyhow!(
                "cannot listen on {addr} ({key}): {e}: stop what holds it or change {key}"
            )
        };
        let s = Socket::new(Domain::for_address(*addr), Type::STREAM, None).map_err(fail)?;
        s.set_reuse_address(true).map_err(fail)?;
        s.bind(&(*addr).into()).map_err(fail)?;
        s.listen(1).map_err(fail)?;
    }
    Ok(())
}

/// The Unix socket a graceful upgrade hands the listeners over.
pub fn upgrade_sock(v: &Validated) -> String {
    v.config.server.upgrade_sock.clone().unwrap_or_else(|| {
        let first = v.listen[0].to_string().replace([':', '[', ']', '.'], "_");
        std::env::temp_dir()
            .join(format!("ketama-router-{first}.sock"))
            .display()
            .to_string()
    })
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
    if !start.upgrade {
        let mut addrs: Vec<(String, SocketAddr)> = v
            .listen
            .iter()
            .enumerate()
            .map(|(i, a)| (format!("server.listen[{i}]"), *a))
            .chain(
                v.tls_listen
                    .iter()
                    .enumerate()
                    .map(|(i, a)| (format!("tls.listen[{i}]"), *a)),
            )
            .collect();
        addrs.push(("admin.listen".into(), v.admin_listen));
        probe(&addrs)?;
    }
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
        upgrade_sock: upgrade_sock(&v),
        ..ServerConf::default()
    };
    let opt = Opt {
        upgrade: start.upgrade,
        ..Opt::default()
    };
    let mut server = Server::new_with_opt_and_conf(Some(opt), conf);
    server.bootstrap();
    let listen = v.listen.clone();
    let tls_listen = v.tls_listen.clone();
    let h2 = h2_settings(s);
    let admin_listen = v.admin_listen;
    for w in &v.warnings {
        tracing::warn!("{w}");
    }
    for w in crate::tls::check_files(&v)?.1 {
        tracing::warn!("{w}");
    }
    // With [control], the routing sections come from etcd (or the cache
    // file) before anything is built.
    let (shared, etcd_rollout, control) = match v.control {
        Some(_) => {
            let start = crate::control::Control::start(&v)?;
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
    let (health, metrics) = (
        Arc::new(HealthRegistry::default()),
        Arc::new(Metrics::default()),
    );
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

    let router = Router {
        routing: cell.reader(),
        metrics: metrics.clone(),
        access_log: access_log.clone(),
    };
    let mut proxy = pingora::proxy::http_proxy(&server.configuration, router);
    (proxy.server_options, proxy.h2_options) = h2;
    let guard = Guarded::new(proxy, default_max, cell.reader(), metrics.clone());
    if !tls_listen.is_empty() {
        let mut tls = Service::new("ketama tls".to_string(), guard.tls_twin());
        for l in &tls_listen {
            tls.add_listener(listener(l));
        }
        server.add_service(tls);
    }
    let mut proxy = Service::new("ketama proxy".to_string(), guard);
    for l in &listen {
        proxy.add_listener(listener(l));
    }
    let admin = Admin {
        cell: cell.clone(),
        discovery: discovery.clone(),
        control: control.clone(),
        metrics: metrics.clone(),
        access_log: access_log.clone(),
        latency: Default::default(),
    };
    let mut admin = Service::new("ketama admin".to_string(), HttpServer::new_app(admin));
    admin.add_tcp(&admin_listen.to_string());
    server.add_service(proxy);
    server.add_service(admin);
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
            metrics,
        },
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
/// listens, so no signal falls between the two.
struct Signals(Early);

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
        self.0.ready();
        tokio::select! {
            _ = quit.recv() => ShutdownSignal::GracefulUpgrade,
            _ = term.recv() => ShutdownSignal::GracefulTerminate,
            _ = int.recv() => ShutdownSignal::FastShutdown,
        }
    }
}

/// Runs the server until it is told to stop, then exits the process.
pub fn run(server: Server, early: Early) -> ! {
    server.run(RunArgs {
        shutdown_signal: Box::new(Signals(early)),
    });
    std::process::exit(0)
}

/// A client listener without Pingora's 64 KiB read buffer in front of
/// each connection: the HTTP/1 session reads into its own buffer anyway,
/// so the extra one only cost memory (up to 64 KiB per idle keep-alive
/// connection) and a copy.
fn listener(addr: &std::net::SocketAddr) -> pingora::listeners::ListenerConfig {
    pingora::listeners::ListenerConfig::tcp(addr.to_string())
        .l4_buffer(pingora::listeners::L4BufferSettings::default().read(0))
}
