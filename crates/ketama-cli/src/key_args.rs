//! The routing key of the commands that price keys (`route`, `analyze`,
//! `diff`, `migrate-plan --simulate`): the router's `[key]`, read from a
//! file (`--key-config`: a router's config file, or one holding only
//! `[key]`) or said with flags, and validated by the router's own rules
//! (`ketama_config::request_key`), so that the key priced here is the key
//! the router routes by.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use ketama::key::RequestKey;
use ketama_config::model::{KeySection, NormalizeSection};

/// `[key]` as options.
#[derive(Args, Debug, Clone, Default)]
pub struct KeyArgs {
    /// Take each request's key as a router with this file's `[key]` does
    /// (a router's config file, or one holding only `[key]`); the input
    /// lines are then requests (see --request-format).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["key_template", "key_balance"])]
    pub key_config: Option<PathBuf>,
    /// `[key] template`: nginx's `hash <template>` (e.g.
    /// '$host$request_uri', '$cookie_sid').
    #[arg(long, value_name = "TEMPLATE", conflicts_with = "key_balance")]
    pub key_template: Option<String>,
    /// `[key] balance`: HAProxy's balance line (e.g. 'url_param id',
    /// 'hdr(host) use_domain_only').
    #[arg(long, value_name = "LINE")]
    pub key_balance: Option<String>,
    /// `[key.normalize] sort_query`: sort the query's parameters.
    #[arg(long, conflicts_with = "key_config")]
    pub sort_query: bool,
    /// `[key.normalize] drop_query`: leave this parameter out (repeatable).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["key_config", "keep_query"])]
    pub drop_query: Vec<String>,
    /// `[key.normalize] keep_query`: keep only this parameter
    /// (repeatable).
    #[arg(long, value_name = "NAME", conflicts_with = "key_config")]
    pub keep_query: Vec<String>,
    /// `[key.normalize] lowercase_host`.
    #[arg(long, conflicts_with = "key_config")]
    pub lowercase_host: bool,
    /// A migration's new side's `[key]` (a router's config file, or one
    /// holding only `[key]`): each side routes its own key, the side chosen
    /// by the new key, as the router does with `[migration.key]`; the old
    /// side keeps the key above (by default the router's, `$request_uri`).
    #[arg(long, value_name = "FILE")]
    pub to_key_config: Option<PathBuf>,
    /// How the input lines say a request, when a key is given: `target`
    /// (the request target as sent, origin-form `/a?b` or absolute-form
    /// `http://host/a?b`) or `access-log` (the router's JSON access log,
    /// whose lines carry the fields a configured key reads).
    #[arg(long, value_enum, default_value = "target")]
    pub request_format: RequestFormat,
}

/// How input lines say a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Default)]
pub enum RequestFormat {
    /// A request target as sent.
    #[default]
    Target,
    /// A line of the router's JSON access log.
    AccessLog,
}

impl KeyArgs {
    /// Whether any key option was given (else input lines are keys).
    pub fn given(&self) -> bool {
        self.key_config.is_some()
            || self.to_key_config.is_some()
            || self.key_template.is_some()
            || self.key_balance.is_some()
            || self.sort_query
            || !self.drop_query.is_empty()
            || !self.keep_query.is_empty()
            || self.lowercase_host
    }

    /// The (current side's) key, validated for rings of these schemes
    /// (each named as the option that sets it): the router's default
    /// (`$request_uri`) when only --to-key-config was given; `None` when
    /// no key option was.
    pub fn key(&self, rings: &[(ketama::Scheme, &str)]) -> anyhow::Result<Option<RequestKey>> {
        if !self.given() {
            return Ok(None);
        }
        let (section, file) = match &self.key_config {
            Some(path) => {
                let name = path.display().to_string();
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("--key-config {name}: cannot read"))?;
                (ketama_config::key_section(&text, &name)?, name)
            }
            None => (self.section(), "the key options".to_string()),
        };
        Ok(Some(ketama_config::request_key(&section, &file, rings)?))
    }

    /// The new side's key (--to-key-config), validated for its ring's
    /// scheme (`ring`, named as the option that sets it).
    pub fn to_key(&self, ring: (ketama::Scheme, &str)) -> anyhow::Result<Option<RequestKey>> {
        let Some(p) = &self.to_key_config else {
            return Ok(None);
        };
        let name = p.display().to_string();
        let text = std::fs::read_to_string(p)
            .with_context(|| format!("--to-key-config {name}: cannot read"))?;
        let section = ketama_config::key_section(&text, &name)?;
        Ok(Some(ketama_config::request_key(&section, &name, &[ring])?))
    }

    /// Both sides' keys, when any key option was given: the current
    /// side's ([`key`](Self::key)) and the new side's (--to-key-config,
    /// else the current one's).
    pub fn both(
        &self,
        from: (ketama::Scheme, &str),
        to: (ketama::Scheme, &str),
    ) -> anyhow::Result<Option<(RequestKey, RequestKey)>> {
        let Some(old) = self.key(&[from])? else {
            return Ok(None);
        };
        let new = match self.to_key(to)? {
            Some(k) => k,
            None => {
                self.key(&[to])?;
                old.clone()
            }
        };
        Ok(Some((old, new)))
    }

    /// The flags as a `[key]` table.
    fn section(&self) -> KeySection {
        let list = |v: &[String]| (!v.is_empty()).then(|| v.to_vec());
        KeySection {
            template: self.key_template.clone(),
            balance: self.key_balance.clone(),
            normalize: NormalizeSection {
                sort_query: self.sort_query,
                drop_query: list(&self.drop_query),
                keep_query: list(&self.keep_query),
                lowercase_host: self.lowercase_host,
            },
            ..KeySection::default()
        }
    }
}
