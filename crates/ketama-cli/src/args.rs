//! Options and helpers shared by several commands.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Args;
use ketama::{
    KeyHash, Layout, Node, Ring, RingBuilder, RingSettings, Scheme, DEFAULT_POINT_MULTIPLE,
};

/// How to build a ring: scheme, layout and point multiple.
#[derive(Args, Debug, Clone)]
pub struct RingArgs {
    /// Hashing scheme: nginx, pingora-v1, pingora-v2, libmemcached,
    /// twemproxy (see --key-hash), haproxy (HAProxy's `hash-type
    /// consistent`: sdbm with avalanche; haproxy:FUNCTION[+avalanche] for
    /// sdbm, djb2, wt6 or crc32), envoy-ring-hash (Envoy's and gRPC's
    /// ring_hash; envoy-ring-hash:min=N,max=N[,murmur2], or :grpc for
    /// gRPC's sizes) or maglev (Envoy's; maglev:PRIME for the table size).
    #[arg(long, default_value = "nginx")]
    pub compat: Scheme,
    /// twemproxy's key hash: md5, fnv1a_64 (twemproxy's default), fnv1a_32,
    /// fnv1_64, fnv1_32, crc16, crc32, crc32a, one_at_a_time, hsieh, murmur
    /// or jenkins.
    #[arg(long)]
    pub key_hash: Option<KeyHash>,
    /// Storage layout: wide, packed or compact (routing is the same in every layout).
    #[arg(long, default_value = "wide")]
    pub layout: Layout,
    /// Points per weight unit (at least 1; the memcached schemes take only
    /// their own 160, haproxy only its 16, which the default stands for).
    #[arg(long, default_value_t = DEFAULT_POINT_MULTIPLE, value_parser = clap::value_parser!(u32).range(1..))]
    pub point_multiple: u32,
}

impl RingArgs {
    /// The settings these options describe.
    pub fn settings(&self) -> anyhow::Result<RingSettings> {
        Ok(RingSettings {
            compat: with_key_hash(self.compat, self.key_hash, "--key-hash")?,
            layout: self.layout,
            point_multiple: self.point_multiple,
        })
    }
}

/// Refuses the memcached schemes for a command that varies the points per
/// server (`sweep`, `recommend`): theirs are fixed.
pub fn refuse_fixed_points(compat: Scheme, command: &str) -> anyhow::Result<()> {
    if let Some(m) = compat.fixed_point_multiple() {
        if compat.is_envoy() {
            bail!(
                "--compat {compat}: {command} varies the points per server, and {} sizes its ring from its own settings instead (envoy-ring-hash:min=N,max=N or maglev:PRIME); see its balance with `ketama analyze --compat {compat}`",
                compat.name(),
            );
        }
        let what = if compat.is_memcached() {
            format!("{m} on average")
        } else {
            format!("{m} per weight unit")
        };
        bail!(
            "--compat {compat}: {command} varies the points per server, which {} fixes at {what}; see its balance with `ketama analyze --compat {compat}`",
            compat.name(),
        );
    }
    Ok(())
}

/// The scheme `--compat` names with `--key-hash` applied: twemproxy takes
/// any key hash, libmemcached only its own md5, the CRC-32 schemes none.
pub fn with_key_hash(
    compat: Scheme,
    key_hash: Option<KeyHash>,
    flag: &str,
) -> anyhow::Result<Scheme> {
    match (compat, key_hash) {
        (c, None) => Ok(c),
        (Scheme::Twemproxy(_), Some(h)) => Ok(Scheme::Twemproxy(h)),
        (Scheme::Libmemcached, Some(KeyHash::Md5)) => Ok(Scheme::Libmemcached),
        (Scheme::Haproxy(_), Some(h)) => bail!(
            "{flag} {h} does not apply to haproxy: its hash function is part of the scheme's name, as in --compat haproxy:djb2+avalanche (sdbm, djb2, wt6 or crc32, optionally +avalanche)"
        ),
        (c, Some(h)) => bail!(
            "{flag} {h} does not apply to {c}: the key hash is chosen only for twemproxy (--compat twemproxy {flag} {h}); {c} hashes keys with {}",
            if c == Scheme::Libmemcached { "md5" } else { "CRC-32" }
        ),
    }
}

/// Reads and parses a servers file. A file with no server at all is an
/// error (a file whose servers are all down or drained is not).
pub fn read_nodes(path: &Path) -> anyhow::Result<Vec<Node>> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read servers file {name}"))?;
    let nodes = ketama::parse_servers(&text, path)?;
    if nodes.is_empty() {
        bail!("servers file {name} lists no server: write one SERVER [WEIGHT] per line");
    }
    Ok(nodes)
}

/// Builds a ring from nodes read from `path` (named in the error).
pub fn build_ring(path: &Path, nodes: Vec<Node>, settings: RingSettings) -> anyhow::Result<Ring> {
    RingBuilder::from(settings).build(nodes).with_context(|| {
        format!(
            "cannot build a {} ring from {}",
            settings.compat,
            path.display()
        )
    })
}

/// Reads a servers file and builds a ring from it.
pub fn load_ring(path: &Path, settings: RingSettings) -> anyhow::Result<Ring> {
    build_ring(path, read_nodes(path)?, settings)
}

/// A servers file path argument.
pub type ServersPath = PathBuf;

/// The current and the new ring of a two-ring command (`diff`,
/// `migrate-plan`, `route --to`).
#[derive(Args, Debug, Clone)]
pub struct TwoRings {
    /// Servers file of the current ring.
    #[arg(long)]
    pub from: ServersPath,
    /// Servers file of the new ring.
    #[arg(long)]
    pub to: ServersPath,
    /// Scheme of the current ring: nginx, pingora-v1, pingora-v2,
    /// libmemcached, twemproxy, haproxy, envoy-ring-hash or maglev (as
    /// --compat).
    #[arg(long, default_value = "nginx")]
    pub from_compat: Scheme,
    /// twemproxy key hash of the current ring (as --key-hash).
    #[arg(long)]
    pub from_key_hash: Option<KeyHash>,
    /// Layout of the current ring: wide, packed or compact.
    #[arg(long, default_value = "wide")]
    pub from_layout: Layout,
    /// Point multiple of the current ring (at least 1).
    #[arg(long, default_value_t = DEFAULT_POINT_MULTIPLE, value_parser = clap::value_parser!(u32).range(1..))]
    pub from_point_multiple: u32,
    /// Scheme of the new ring: nginx, pingora-v1, pingora-v2, libmemcached,
    /// twemproxy, haproxy, envoy-ring-hash or maglev (as --compat).
    #[arg(long, default_value = "nginx")]
    pub to_compat: Scheme,
    /// twemproxy key hash of the new ring (as --key-hash).
    #[arg(long)]
    pub to_key_hash: Option<KeyHash>,
    /// Layout of the new ring: wide, packed or compact.
    #[arg(long, default_value = "wide")]
    pub to_layout: Layout,
    /// Point multiple of the new ring (at least 1).
    #[arg(long, default_value_t = DEFAULT_POINT_MULTIPLE, value_parser = clap::value_parser!(u32).range(1..))]
    pub to_point_multiple: u32,
}

impl TwoRings {
    /// Builds both rings.
    pub fn load(&self) -> anyhow::Result<(Ring, Ring)> {
        let from = RingSettings {
            compat: with_key_hash(self.from_compat, self.from_key_hash, "--from-key-hash")?,
            layout: self.from_layout,
            point_multiple: self.from_point_multiple,
        };
        let to = RingSettings {
            compat: with_key_hash(self.to_compat, self.to_key_hash, "--to-key-hash")?,
            layout: self.to_layout,
            point_multiple: self.to_point_multiple,
        };
        Ok((load_ring(&self.from, from)?, load_ring(&self.to, to)?))
    }
}

/// A JSON number, or null where the value is undefined (NaN, infinite).
pub fn num(x: f64) -> serde_json::Value {
    if x.is_finite() {
        serde_json::json!(x)
    } else {
        serde_json::Value::Null
    }
}
