//! `ketama route`: keys on stdin, servers on stdout.

use std::io::{self, Read, Write};
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::Args;
use ketama::migration::Version;
use ketama::{
    Compat, Layout, Migration, Requirement, RequirementCache, Ring, Rollout, DEFAULT_POINT_MULTIPLE,
};

use crate::args::{load_ring, RingArgs, ServersPath};

/// Options of `ketama route`.
#[derive(Args, Debug)]
pub struct RouteArgs {
    /// Servers file: one `SERVER [WEIGHT] [key=value ...] [down]` per line.
    #[arg(long)]
    servers: ServersPath,
    #[command(flatten)]
    ring: RingArgs,
    /// Print up to R distinct servers per key, in failover order.
    #[arg(long)]
    replicas: Option<usize>,
    /// Route only to servers carrying all these labels (comma-separated).
    #[arg(long, conflicts_with = "require_from_input")]
    require: Option<String>,
    /// Read `KEY<TAB>LABELS` lines (split at the last tab; no tab or empty
    /// LABELS means no requirement).
    #[arg(long)]
    require_from_input: bool,
    /// Servers file of a new ring to migrate to; prints `SERVER<TAB>old|new`.
    #[arg(long, requires = "rollout")]
    to: Option<ServersPath>,
    /// Scheme of the new ring.
    #[arg(long, default_value = "nginx", requires = "to")]
    to_compat: Compat,
    /// Layout of the new ring.
    #[arg(long, default_value = "wide", requires = "to")]
    to_layout: Layout,
    /// Point multiple of the new ring.
    #[arg(long, default_value_t = DEFAULT_POINT_MULTIPLE, requires = "to")]
    to_point_multiple: u32,
    /// Share of keys routed by the new ring, in basis points (0 to 10000).
    #[arg(long, requires = "to")]
    rollout: Option<u32>,
    /// A scope's own rollout, NAME=BP; repeatable.
    #[arg(long, requires = "to")]
    scope_rollout: Vec<String>,
    /// The scope (data center) this routing runs in.
    #[arg(long, requires = "to")]
    scope: Option<String>,
}

/// Bytes read from stdin at a time; answers for every complete line of a
/// chunk are flushed before the next read, which may block.
const CHUNK: usize = 64 * 1024;

/// Memory for requirements (dedicated rings of sparse label combinations)
/// read from the input.
const REQUIREMENT_CACHE: usize = 256 << 20;

/// What routes a key: one ring or a migration, and the label requirement.
struct Router {
    ring: Arc<Ring>,
    migration: Option<(Migration, Option<String>)>,
    fixed: Option<(Requirement, Option<Requirement>)>,
    from_input: bool,
    caches: (RequirementCache, RequirementCache),
    replicas: Option<usize>,
}

fn parse_labels(s: &str) -> Vec<&str> {
    s.split(',').filter(|l| !l.is_empty()).collect()
}

impl Router {
    fn new(args: &RouteArgs) -> anyhow::Result<Self> {
        if args.replicas == Some(0) {
            bail!("--replicas 0 would print nothing: give at least 1");
        }
        let ring = Arc::new(load_ring(&args.servers, args.ring.builder())?);
        let migration = match &args.to {
            None => None,
            Some(path) => {
                let new = RingArgs {
                    compat: args.to_compat,
                    layout: args.to_layout,
                    point_multiple: args.to_point_multiple,
                };
                let new = Arc::new(load_ring(path, new.builder())?);
                let mut rollout = Rollout::new(args.rollout.unwrap_or(0))?;
                for s in &args.scope_rollout {
                    let (name, bp) = s.rsplit_once('=').with_context(|| {
                        format!("--scope-rollout {s:?}: write NAME=BP, e.g. ams=2500")
                    })?;
                    let bp: u32 = bp.parse().with_context(|| {
                        format!(
                            "--scope-rollout {s:?}: {bp:?} is not a whole number of basis points"
                        )
                    })?;
                    if name.is_empty() {
                        bail!("--scope-rollout {s:?}: the scope name is empty");
                    }
                    rollout = rollout.with_scope(name, bp)?;
                }
                Some((
                    Migration::new(ring.clone(), new, rollout),
                    args.scope.clone(),
                ))
            }
        };
        let fixed = match &args.require {
            None => None,
            Some(r) => {
                let labels = parse_labels(r);
                let old = ring
                    .requirement(&labels)
                    .with_context(|| format!("--require {r:?}"))?;
                let new = match &migration {
                    Some((m, _)) => Some(
                        m.new_ring()
                            .requirement(&labels)
                            .with_context(|| format!("--require {r:?} on the --to ring"))?,
                    ),
                    None => None,
                };
                Some((old, new))
            }
        };
        Ok(Router {
            ring,
            migration,
            fixed,
            from_input: args.require_from_input,
            caches: (
                RequirementCache::new(REQUIREMENT_CACHE / 2),
                RequirementCache::new(REQUIREMENT_CACHE / 2),
            ),
            replicas: args.replicas,
        })
    }

    /// Whether every key is a plain lookup on one ring (the batched path).
    fn plain(&self) -> bool {
        self.migration.is_none()
            && self.fixed.is_none()
            && !self.from_input
            && self.replicas.is_none()
    }

    /// Answers one input line (without its newline).
    fn answer(&self, line: &[u8], line_no: u64, out: &mut impl Write) -> anyhow::Result<()> {
        let (key, labels) = if self.from_input {
            match line.iter().rposition(|&b| b == b'\t') {
                Some(t) => (&line[..t], Some(&line[t + 1..])),
                None => (line, None),
            }
        } else {
            (line, None)
        };
        let labels: Vec<&str> = match labels {
            Some(l) => parse_labels(
                std::str::from_utf8(l)
                    .with_context(|| format!("stdin line {line_no}: the labels are not UTF-8"))?,
            ),
            None => Vec::new(),
        };
        let (ring, version) = match &self.migration {
            Some((m, scope)) => {
                let v = m.version(key, scope.as_deref());
                m.count(v);
                (m.ring(v), Some(v))
            }
            None => (&*self.ring, None),
        };
        let cached;
        let req: Option<&Requirement> = match (&self.fixed, version) {
            (Some((old, _)), None | Some(Version::Old)) => Some(old),
            (Some((_, Some(new))), Some(Version::New)) => Some(new),
            _ if !labels.is_empty() => {
                let cache = if version == Some(Version::New) {
                    &self.caches.1
                } else {
                    &self.caches.0
                };
                cached = cache
                    .get(ring, &labels)
                    .with_context(|| format!("stdin line {line_no}"))?;
                Some(&*cached)
            }
            _ => None,
        };
        let hash = Ring::hash_key(key);
        let take = self.replicas.unwrap_or(1);
        let mut any = false;
        let nodes: Box<dyn Iterator<Item = usize>> = match req {
            Some(r) => ring.failover_required(hash, r),
            None => {
                let mut f = ring.failover_for_hash(hash);
                Box::new(std::iter::from_fn(move || f.next_index()))
            }
        };
        for n in nodes.take(take) {
            if any {
                out.write_all(b" ")?;
            }
            out.write_all(ring.nodes()[n].server().as_bytes())?;
            any = true;
        }
        if !any {
            out.write_all(b"-")?;
        }
        if let Some(v) = version {
            out.write_all(b"\t")?;
            out.write_all(v.name().as_bytes())?;
        }
        out.write_all(b"\n")?;
        Ok(())
    }
}

pub fn run(args: RouteArgs) -> anyhow::Result<()> {
    let router = Router::new(&args)?;
    let stdin = io::stdin();
    let stdout = io::stdout();
    let mut input = stdin.lock();
    let mut out = io::BufWriter::with_capacity(CHUNK, stdout.lock());
    let mut pending: Vec<u8> = Vec::with_capacity(2 * CHUNK);
    let mut chunk = vec![0u8; CHUNK];
    let mut batch = Batch::default();
    let mut line_no = 0u64;
    loop {
        let n = match input.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("cannot read keys from stdin"),
        };
        if n == 0 {
            if !pending.is_empty() {
                batch.keys.push((0, pending.len()));
            }
            batch.answer(&router, &pending, &mut line_no, &mut out)?;
            out.flush()?;
            return Ok(());
        }
        pending.extend_from_slice(&chunk[..n]);
        let mut start = 0;
        while let Some(len) = pending[start..].iter().position(|&b| b == b'\n') {
            let end = start + len;
            let key_end = if end > start && pending[end - 1] == b'\r' {
                end - 1
            } else {
                end
            };
            batch.keys.push((start, key_end));
            start = end + 1;
        }
        batch.answer(&router, &pending, &mut line_no, &mut out)?;
        pending.drain(..start);
        out.flush()?;
    }
}

/// The lines of one chunk of input (as byte ranges of the pending buffer).
/// Plain lookups go through the batch API so that their memory accesses
/// overlap.
#[derive(Default)]
struct Batch {
    keys: Vec<(usize, usize)>,
    hashes: Vec<u32>,
    nodes: Vec<Option<usize>>,
}

impl Batch {
    fn answer(
        &mut self,
        router: &Router,
        buf: &[u8],
        line_no: &mut u64,
        out: &mut impl Write,
    ) -> anyhow::Result<()> {
        if router.plain() {
            let ring = &router.ring;
            self.hashes.clear();
            self.hashes
                .extend(self.keys.iter().map(|&(s, e)| Ring::hash_key(&buf[s..e])));
            ring.node_indices_for_hashes(&self.hashes, &mut self.nodes);
            for n in &self.nodes {
                match n {
                    Some(i) => out.write_all(ring.nodes()[*i].server().as_bytes())?,
                    None => out.write_all(b"-")?,
                }
                out.write_all(b"\n")?;
            }
            *line_no += self.keys.len() as u64;
        } else {
            for &(s, e) in &self.keys {
                *line_no += 1;
                router.answer(&buf[s..e], *line_no, out)?;
            }
        }
        self.keys.clear();
        Ok(())
    }
}
