//! Assembling the Pingora server: the proxy service, the admin API, health
//! checks and SIGHUP reloads.

use std::sync::Arc;

use pingora::apps::http_app::HttpServer;
use pingora::server::configuration::ServerConf;
use pingora::server::Server;
use pingora::services::background::background_service;
use pingora::services::listening::Service;

use crate::admin::Admin;
use crate::app::App;
use crate::health::HealthChecker;
use crate::proxy::Router;
use crate::reload::SighupReloader;
use ketama_config::Validated;

/// Builds the Pingora server for a validated config; `run_forever` on the
/// result serves until SIGINT/SIGTERM (then waits at most the configured
/// grace period, 1 s by default, instead of Pingora's five minutes).
pub fn build(
    v: Validated,
    config_path: Option<std::path::PathBuf>,
    config_text: Option<String>,
) -> anyhow::Result<(Server, Arc<App>)> {
    let s = &v.config.server;
    let conf = ServerConf {
        threads: s.threads,
        work_stealing: s.work_stealing,
        grace_period_seconds: Some(s.grace_period_seconds),
        graceful_shutdown_timeout_seconds: Some(s.grace_period_seconds),
        upstream_keepalive_pool_size: s.upstream_keepalive_pool_size,
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(None, conf);
    server.bootstrap();
    let listen = v.listen.clone();
    let admin_listen = v.admin_listen;
    let app = Arc::new(App::new(v, config_path, config_text)?);

    let mut proxy =
        pingora::proxy::http_proxy_service(&server.configuration, Router { app: app.clone() });
    for l in &listen {
        proxy.add_tcp(&l.to_string());
    }
    let mut admin = Service::new(
        "ketama admin".to_string(),
        HttpServer::new_app(Admin { app: app.clone() }),
    );
    admin.add_tcp(&admin_listen.to_string());
    server.add_service(proxy);
    server.add_service(admin);
    server.add_service(background_service(
        "health checks",
        HealthChecker { app: app.clone() },
    ));
    server.add_service(background_service(
        "sighup reload",
        SighupReloader { app: app.clone() },
    ));
    Ok((server, app))
}
