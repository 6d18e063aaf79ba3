//! How every `ketama fleet` command reaches etcd: the flags and the
//! client they make.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use ketama_fleet::etcd::{Client, Options};
use ketama_fleet::Keys;

/// How to reach etcd (shared by every fleet command).
#[derive(Args, Debug)]
pub(crate) struct EtcdArgs {
    /// etcd endpoint URLs, comma-separated (or repeat the flag).
    #[arg(long, required = true, value_delimiter = ',')]
    etcd: Vec<String>,
    /// The fleet's key prefix, as in the routers' [control] prefix.
    #[arg(long)]
    prefix: String,
    /// Environment variable holding the etcd user (auth enabled).
    #[arg(long, requires = "password_env")]
    user_env: Option<String>,
    /// Environment variable holding the etcd password.
    #[arg(long, requires = "user_env")]
    password_env: Option<String>,
    /// PEM file of the CA of etcd's certificate (https).
    #[arg(long)]
    ca_file: Option<PathBuf>,
    /// PEM client certificate (with --key-file).
    #[arg(long, requires = "key_file", requires = "ca_file")]
    cert_file: Option<PathBuf>,
    /// PEM key of --cert-file.
    #[arg(long, requires = "cert_file")]
    key_file: Option<PathBuf>,
    /// Request timeout in milliseconds.
    #[arg(long, default_value_t = 5000)]
    pub(crate) timeout_ms: u64,
}

pub(crate) fn client(a: &EtcdArgs) -> anyhow::Result<(Client, Keys)> {
    let var = |flag: &str, name: &str| {
        std::env::var(name)
            .ok()
            .filter(|v| !v.is_empty())
            .with_context(|| format!("{flag} {name}: the variable is not set"))
    };
    let credentials = match (&a.user_env, &a.password_env) {
        (Some(u), Some(p)) => Some((var("--user-env", u)?, var("--password-env", p)?)),
        _ => None,
    };
    if !a.prefix.starts_with('/') {
        anyhow::bail!(
            "--prefix {:?}: a key prefix starts with / (e.g. /ketama/prod/)",
            a.prefix
        );
    }
    let c = Client::new(&Options {
        endpoints: a.etcd.clone(),
        credentials,
        ca_file: a.ca_file.clone(),
        client_cert: a.cert_file.clone().zip(a.key_file.clone()),
        timeout: Duration::from_millis(a.timeout_ms),
        watch_idle: Duration::from_millis(a.timeout_ms),
    })?;
    Ok((c, Keys::new(&a.prefix)))
}
