//! `[[discovery]]`: DNS sources, validated.

use super::{addr, err};
use crate::discovery::{DiscoverySource, Query, WeightMode};
use crate::model::{Config, DiscoveryWeight};
use crate::ConfigError;

pub(super) fn discovery_sources(
    config: &Config,
    file: &str,
) -> Result<Vec<DiscoverySource>, ConfigError> {
    let mut out: Vec<DiscoverySource> = Vec::new();
    for (i, d) in config.discovery.iter().enumerate() {
        let k = |key: &str| format!("discovery[{i}].{key}");
        let name_ok = |n: &str| !n.is_empty() && n.len() <= 253 && !n.contains(char::is_whitespace);
        let query = match (&d.srv, &d.name, d.port) {
            (Some(srv), None, None) if name_ok(srv) => Query::Srv(srv.clone()),
            (None, Some(name), Some(port)) if name_ok(name) && port > 0 => Query::Host {
                name: name.clone(),
                port,
            },
            (Some(_), None, Some(_)) => {
                return Err(err(file, k("port"), "an SRV source takes its ports from the records: remove port"))
            }
            (None, Some(_), None) => {
                return Err(err(file, k("port"), "a name source needs the backends' port: port = 8080"))
            }
            _ => {
                return Err(err(
                    file,
                    format!("discovery[{i}]"),
                    "give either srv = \"_service._tcp.domain\" or name = \"host.domain\" with port = N",
                ))
            }
        };
        let weight = match (&query, &d.weight) {
            (Query::Srv(_), None) => WeightMode::Equal,
            (Query::Srv(_), Some(DiscoveryWeight::Mode(m))) if m == "equal" => WeightMode::Equal,
            (Query::Srv(_), Some(DiscoveryWeight::Mode(m))) if m == "srv" => WeightMode::Srv,
            (Query::Host { .. }, None) => WeightMode::Fixed(1),
            (Query::Host { .. }, Some(DiscoveryWeight::Fixed(w))) => WeightMode::Fixed(*w),
            (Query::Srv(_), _) => {
                return Err(err(
                    file,
                    k("weight"),
                    "an SRV source's weight is \"equal\" (default) or \"srv\"",
                ))
            }
            (Query::Host { .. }, _) => {
                return Err(err(
                    file,
                    k("weight"),
                    "a name source's weight is a number (default 1)",
                ))
            }
        };
        let resolvers = d
            .resolvers
            .iter()
            .enumerate()
            .map(|(j, r)| addr(r, file, &format!("discovery[{i}].resolvers[{j}]")))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(l) = d.labels.iter().find(|l| l.is_empty()) {
            return Err(err(file, k("labels"), format!("empty label {l:?}")));
        }
        for (key, ms) in [
            ("min_interval_ms", d.min_interval_ms),
            ("max_interval_ms", d.max_interval_ms),
            ("timeout_ms", d.timeout_ms),
        ] {
            if ms == 0 {
                return Err(err(file, k(key), "must be at least 1 (milliseconds)"));
            }
        }
        if d.min_interval_ms > d.max_interval_ms {
            return Err(err(file, k("min_interval_ms"), "is over max_interval_ms"));
        }
        if !(d.max_remove_share > 0.0 && d.max_remove_share <= 1.0) {
            return Err(err(
                file,
                k("max_remove_share"),
                "must be a share over 0, at most 1.0",
            ));
        }
        if d.confirm == 0 {
            return Err(err(file, k("confirm"), "must be at least 1"));
        }
        if let Some(j) = out.iter().position(|o| o.query == query) {
            return Err(err(
                file,
                format!("discovery[{i}]"),
                format!("repeats discovery[{j}] ({query})"),
            ));
        }
        let ms = std::time::Duration::from_millis;
        out.push(DiscoverySource {
            index: i,
            query,
            weight,
            labels: d.labels.clone(),
            resolvers,
            min_interval: ms(d.min_interval_ms),
            max_interval: ms(d.max_interval_ms),
            timeout: ms(d.timeout_ms),
            max_remove_share: d.max_remove_share,
            confirm: d.confirm,
            wait: d.wait_for_discovery,
            tls: d.tls.then(|| d.sni.clone()),
            h2c: d.h2c,
        });
    }
    Ok(out)
}
