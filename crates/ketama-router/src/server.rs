//! Assembling the process: the composition root. The routing state's
//! owner ([`RoutingCell`]) is built here, and each service gets the one or
//! two handles it uses: the engine, the connection guard and the health
//! checker a [`StateReader`](crate::state::StateReader); discovery,
//! control, the admin API and SIGHUP reloads the cell (their changes go
//! through [`RoutingCell::replace`]); the counters and the discovery
//! record where they are needed. [`crate::process`] then serves until a
//! signal says stop.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;

use crate::access_log::{AccessLog, Reopener};
use crate::admin::serve::AdminServer;
use crate::admin::Admin;
use crate::cell::{ConfigSource, Parts, RoutingCell};
use crate::checker::HealthChecker;
use crate::conn::Admission;
use crate::discovery::DiscoveryState;
use crate::drain::Drain;
use crate::health::HealthRegistry;
use crate::listen::Endpoint;
use crate::listen::{App, Listener};
use crate::metrics::Metrics;
use crate::process::Server;
use crate::reload::SighupReloader;
use crate::service::Background;
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

/// Builds the process for a validated config read from `source` (which
/// reloads read again); [`run`] serves until SIGINT/SIGTERM (a graceful
/// stop waits at most the configured grace period, 1 s by default) or
/// hands the listeners over on SIGQUIT. Returns the routing state's owner
/// too, for embedders and tests.
pub fn build(
    v: Validated,
    source: ConfigSource,
    start: Start,
) -> anyhow::Result<(Server, Arc<RoutingCell>)> {
    let s = &v.config.server;
    let upgrade_sock = upgrade_socket(&v, start.upgrade)?;
    let [proxy, tls, admin_sockets] = sockets(&v, upgrade_sock.as_deref(), start.upgrade)?;
    let file_limit = raise_file_limit();
    let default_max = default_max_connections(file_limit, s.upstream_keepalive_pool_size);
    tracing::info!(
        file_limit,
        max_connections = s.max_connections.unwrap_or(default_max),
        body_buffer_bytes = s.body_buffer_bytes,
        "connection limits"
    );
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
    let (workers, grace) = (s.threads, Duration::from_secs(s.grace_period_seconds));
    let work_stealing = s.work_stealing;
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
    warn_expiring(&cell);

    let drain = Arc::new(Drain::default());
    let apps = apps(
        &cell,
        default_max,
        &metrics,
        &access_log,
        &discovery,
        &control,
        &drain,
    );
    let listeners = listeners([proxy, tls, admin_sockets], apps);
    let background = background(
        &cell,
        discovery,
        control,
        &metrics,
        access_log,
        &start.early,
    );
    let server = Server {
        workers,
        work_stealing,
        grace,
        upgrade_sock,
        listeners,
        background,
        metrics,
        drain,
        early: start.early,
    };
    Ok((server, cell))
}

/// The graceful upgrade socket, checked first: `--upgrade` (`upgrade`)
/// without one, or with an unsafe one, is refused before anything is
/// bound or waited for.
fn upgrade_socket(v: &Validated, upgrade: bool) -> anyhow::Result<Option<std::path::PathBuf>> {
    let upgrade_sock = crate::upgrade::resolve_here(v);
    match &upgrade_sock {
        Some(p) if upgrade => crate::upgrade::check_for_upgrade(p)?,
        Some(p) if crate::upgrade::check(p)? == crate::upgrade::Found::NoDirectory => {
            tracing::warn!(path = %p.display(), "the graceful upgrade socket's directory does not exist yet: an upgrade is refused until it does (mode 0700, the router's user)");
        }
        Some(_) => {}
        None if upgrade => return Err(crate::upgrade::UpgradeSockError::NoSocket.into()),
        None => {}
    }
    match &upgrade_sock {
        Some(p) => tracing::info!(path = %p.display(), "graceful upgrade socket"),
        None => tracing::info!(
            "no graceful upgrade socket (neither server.upgrade_sock nor RUNTIME_DIRECTORY): SIGQUIT stops gracefully without handing the listeners over"
        ),
    }
    Ok(upgrade_sock)
}

/// Every listener's endpoints (by config key) and sockets: proxy, TLS,
/// admin.
type Sockets = [(Vec<Endpoint>, Vec<std::net::TcpListener>); 3];

/// Every listener, by its config key. A start binds them all now, so an
/// address in use is an error naming its key before anything else
/// happens; an upgrade takes them over from the old process instead.
fn sockets(
    v: &Validated,
    upgrade_sock: Option<&std::path::Path>,
    upgrade: bool,
) -> anyhow::Result<Sockets> {
    let endpoint = |key: String, addr: SocketAddr| Endpoint { key, addr };
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
    let (proxy_sockets, tls_sockets, admin_sockets) = match (upgrade_sock, upgrade) {
        (Some(path), true) => {
            let mut received = crate::handover::receive(path)?;
            tracing::info!(sockets = received.len(), "listening sockets received");
            let taken = (
                crate::listen::take_all(&proxy_endpoints, &mut received)?,
                crate::listen::take_all(&tls_endpoints, &mut received)?,
                crate::listen::take_all(&admin_endpoints, &mut received)?,
            );
            for name in received.keys() {
                tracing::warn!(
                    socket = name.as_str(),
                    "a listening socket received and not in this config: closed"
                );
            }
            taken
        }
        _ => (
            crate::listen::bind_all(&proxy_endpoints)?,
            crate::listen::bind_all(&tls_endpoints)?,
            crate::listen::bind_all(&admin_endpoints)?,
        ),
    };
    Ok([
        (proxy_endpoints, proxy_sockets),
        (tls_endpoints, tls_sockets),
        (admin_endpoints, admin_sockets),
    ])
}

/// Warns of the certificates the first state loaded that expire soon
/// (once: reloads do not read them again to warn).
fn warn_expiring(cell: &RoutingCell) {
    let first = cell.state();
    let (_, expiring) = crate::tls::certificate_report(&first.validated.file, first.tls.as_deref());
    for w in expiring {
        tracing::warn!("{w}");
    }
}

/// What serves each kind of listener: the engine behind the connection
/// guard (plain and TLS), and the admin API.
fn apps(
    cell: &Arc<RoutingCell>,
    default_max: usize,
    metrics: &Arc<Metrics>,
    access_log: &AccessLog,
    discovery: &Arc<DiscoveryState>,
    control: &Option<Arc<crate::control::Control>>,
    drain: &Arc<Drain>,
) -> [App; 3] {
    let engine = Arc::new(crate::engine::Engine {
        routing: cell.reader(),
        metrics: metrics.clone(),
        access_log: access_log.clone(),
    });
    let guard = Admission::new(
        default_max,
        cell.reader(),
        metrics.clone(),
        engine,
        drain.clone(),
    );
    let tls_guard = App::Engine(Arc::new(guard.tls_twin()));
    let admin = App::Admin(Arc::new(AdminServer {
        admin: Admin {
            cell: cell.clone(),
            discovery: discovery.clone(),
            control: control.clone(),
            metrics: metrics.clone(),
            access_log: access_log.clone(),
            latency: Default::default(),
        },
    }));
    [App::Engine(Arc::new(guard)), tls_guard, admin]
}

/// Each socket with its endpoint and what serves it.
fn listeners(sockets: Sockets, apps: [App; 3]) -> Vec<Listener> {
    let mut listeners = Vec::new();
    for ((endpoints, sockets), app) in sockets.into_iter().zip(apps) {
        for (endpoint, socket) in endpoints.into_iter().zip(sockets) {
            listeners.push(Listener {
                endpoint,
                socket,
                app: app.clone(),
            });
        }
    }
    listeners
}

/// The services beside the listeners, by name.
fn background(
    cell: &Arc<RoutingCell>,
    discovery: Arc<DiscoveryState>,
    control: Option<Arc<crate::control::Control>>,
    metrics: &Arc<Metrics>,
    access_log: AccessLog,
    early: &Early,
) -> Vec<(&'static str, Arc<dyn Background>)> {
    vec![
        (
            "health checks",
            Arc::new(HealthChecker {
                routing: cell.reader(),
            }),
        ),
        (
            "dns discovery",
            Arc::new(crate::discovery::Discovery {
                cell: cell.clone(),
                discovery,
                metrics: metrics.clone(),
            }),
        ),
        (
            "etcd control",
            Arc::new(crate::control::ControlService {
                control,
                cell: cell.clone(),
                metrics: metrics.clone(),
            }),
        ),
        (
            "cache totals",
            Arc::new(crate::metrics::cache::CacheTicker {
                metrics: metrics.clone(),
            }),
        ),
        (
            "sigusr1 access log reopen",
            Arc::new(Reopener { log: access_log }),
        ),
        (
            "sighup reload",
            Arc::new(SighupReloader {
                cell: cell.clone(),
                early: early.clone(),
            }),
        ),
    ]
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

/// Serves until a signal says stop, then exits the process with the
/// status [`Server::run`] returns.
pub fn run(server: Server) -> ! {
    std::process::exit(server.run())
}
