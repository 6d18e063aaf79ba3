//! A simulation's requests under the router's keys (`migrate-plan
//! --simulate` with the key options): each distinct line of the trace is
//! a request target, routed by the old side's key on the old ring and the
//! new side's on the new, the side chosen by the new key
//! (`ketama::analysis::cache_sim::SimRequest`). The caches hold objects by
//! the new key (`--cache-key new-key`: the cache's key changes with the
//! router's, as it should) or by the target as sent (`target`: nginx's
//! default `proxy_cache_key` left as it was). Each distinct request's keys
//! are taken once.

use anyhow::bail;
use ketama::key::{KeyBufs, RequestKey};
use ketama::request::Taken;

use crate::key_args::RequestFormat;
use crate::trace::Workload;

/// What the simulated caches key objects by (`--cache-key`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum CacheKey {
    /// The new side's routing key.
    #[default]
    NewKey,
    /// The request target as sent.
    Target,
}

/// One request's old and new keys.
type Keys = (Vec<u8>, Vec<u8>);

/// A workload's requests, with their keys when the key options are given.
pub struct Requests<'w> {
    w: &'w Workload,
    cache: CacheKey,
    /// Per distinct name: its old and new keys; `None` when a key took
    /// nothing of it (the router sends it round robin: left out).
    keyed: Option<Vec<Option<Keys>>>,
}

/// What a key took, as bytes a simulation routes; `None` for nothing.
fn bytes_of(t: Taken<'_>, n: usize) -> anyhow::Result<Option<Vec<u8>>> {
    match t {
        Taken::Bytes(b) => Ok(Some(b.to_vec())),
        Taken::Nothing => Ok(None),
        Taken::Address(_) | Taken::Envoy(_) => bail!(
            "trace line {n}: the key takes a client's address or Envoy's 64-bit hash, which a trace of targets does not carry: price such a key with ketama diff over the router's access log"
        ),
    }
}

impl<'w> Requests<'w> {
    /// The workload's requests; with `keys` (old side's, new side's), the
    /// names read as request targets and keyed.
    pub fn new(
        w: &'w Workload,
        keys: Option<&(RequestKey, RequestKey)>,
        format: RequestFormat,
        cache: CacheKey,
    ) -> anyhow::Result<Self> {
        let Some((old, new)) = keys else {
            return Ok(Requests {
                w,
                cache,
                keyed: None,
            });
        };
        if format != RequestFormat::Target {
            bail!("--simulate reads a trace of request targets: leave out --request-format access-log (price an access log with ketama diff)");
        }
        let (mut a, mut b) = (KeyBufs::default(), KeyBufs::default());
        let mut keyed = Vec::with_capacity(w.names.len());
        for (i, name) in w.names.iter().enumerate() {
            let req = crate::requests::parse(name, format, i + 1)?;
            let o = old.take(&req, &mut a, &mut None, |t| bytes_of(t, i + 1))?;
            let n = new.take(&req, &mut b, &mut None, |t| bytes_of(t, i + 1))?;
            keyed.push(o.zip(n));
        }
        Ok(Requests {
            w,
            cache,
            keyed: Some(keyed),
        })
    }

    /// The requests in order: (object, old key, new key).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8], &[u8])> + '_ {
        self.w.order.iter().filter_map(move |&i| {
            let name = self.w.names[i as usize].as_slice();
            match &self.keyed {
                None => Some((name, name, name)),
                Some(k) => k[i as usize].as_ref().map(|(o, n)| {
                    let object = match self.cache {
                        CacheKey::NewKey => n.as_slice(),
                        CacheKey::Target => name,
                    };
                    (object, o.as_slice(), n.as_slice())
                }),
            }
        })
    }

    /// Requests no key placed (left out).
    pub fn unkeyed(&self) -> u64 {
        match &self.keyed {
            None => 0,
            Some(k) => self
                .w
                .order
                .iter()
                .filter(|&&i| k[i as usize].is_none())
                .count() as u64,
        }
    }
}
