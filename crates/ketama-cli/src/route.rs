//! `ketama route`: keys on stdin, servers on stdout. Every answer is the
//! library's routing decision (`RouteTable`); this file reads lines and
//! prints servers.

use std::io::{self, Read, Write};
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::Args;
use ketama::{
    Layout, Migration, Need, Rollout, RouteTable, Scheme, Version, DEFAULT_POINT_MULTIPLE,
};

use crate::args::{load_ring, RingArgs, ServersPath};
use crate::key_args::{KeyArgs, RequestFormat};

/// Options of `ketama route`.
#[derive(Args, Debug)]
pub struct RouteArgs {
    /// Servers file: one `SERVER [WEIGHT] [key=value ...] [down]` per line.
    #[arg(long)]
    servers: ServersPath,
    #[command(flatten)]
    ring: RingArgs,
    /// Print up to R distinct servers per key, in failover order (at least 1).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    replicas: Option<u64>,
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
    /// Scheme of the new ring: nginx, pingora-v1, pingora-v2, libmemcached,
    /// twemproxy, haproxy, envoy-ring-hash or maglev (as --compat).
    #[arg(long, default_value = "nginx", requires = "to")]
    to_compat: Scheme,
    /// twemproxy key hash of the new ring (as --key-hash).
    #[arg(long, requires = "to")]
    to_key_hash: Option<ketama::KeyHash>,
    /// Layout of the new ring: wide, packed or compact.
    #[arg(long, default_value = "wide", requires = "to")]
    to_layout: Layout,
    /// Point multiple of the new ring (at least 1).
    #[arg(long, default_value_t = DEFAULT_POINT_MULTIPLE, requires = "to", value_parser = clap::value_parser!(u32).range(1..))]
    to_point_multiple: u32,
    /// Share of keys routed by the new ring, in basis points (0 to 10000).
    #[arg(long, requires = "to", value_parser = clap::value_parser!(u32).range(0..=10_000))]
    rollout: Option<u32>,
    /// A scope's own rollout, NAME=BP; repeatable.
    #[arg(long, requires = "to")]
    scope_rollout: Vec<String>,
    /// The scope (data center) this routing runs in.
    #[arg(long, requires = "to")]
    scope: Option<String>,
    #[command(flatten)]
    key: KeyArgs,
}

/// Bytes read from stdin at a time; answers for every complete line of a
/// chunk are flushed before the next read, which may block.
const CHUNK: usize = 64 * 1024;

/// The longest input line (key, and labels with `--require-from-input`)
/// accepted: longer is an error naming the line. A URL is far shorter
/// (nginx reads request heads in 8 KiB buffers by default).
pub const MAX_LINE: usize = 1 << 20;

/// Memory for dedicated rings of sparse label combinations read from the
/// input, per ring.
const REQUIREMENT_CACHE: usize = 128 << 20;

/// What routes a key: the routing table and what each line asks of it.
struct Router {
    table: RouteTable,
    /// `--require`.
    fixed: Option<Need>,
    from_input: bool,
    replicas: usize,
    scope: Option<String>,
    /// With a key (`--key-config` and the key options), lines are
    /// requests, each routed by what the key takes of it.
    key: Option<LineKey>,
}

/// How a request line is routed: its key (and, with --to-key-config, the
/// new side's), how lines say requests, and the keys' buffers.
struct LineKey {
    old: ketama::key::RequestKey,
    new: Option<ketama::key::RequestKey>,
    format: RequestFormat,
    bufs: (ketama::key::KeyBufs, ketama::key::KeyBufs),
}

fn parse_labels(s: &str) -> Vec<&str> {
    s.split(',').filter(|l| !l.is_empty()).collect()
}

impl Router {
    fn new(args: &RouteArgs) -> anyhow::Result<Self> {
        let ring = Arc::new(load_ring(&args.servers, args.ring.settings()?)?);
        let mut table = match &args.to {
            None => RouteTable::new(ring),
            Some(path) => {
                let to = RingArgs {
                    compat: args.to_compat,
                    key_hash: args.to_key_hash,
                    layout: args.to_layout,
                    point_multiple: args.to_point_multiple,
                };
                let new = Arc::new(load_ring(path, to.settings()?)?);
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
                    rollout = rollout
                        .with_scope(name, bp)
                        .with_context(|| format!("--scope-rollout {s:?}"))?;
                }
                RouteTable::migrating(Migration::new(ring, new, rollout))
            }
        }
        .with_requirement_cap(REQUIREMENT_CACHE);
        let fixed = match &args.require {
            None => None,
            Some(r) => Some(table.need(&parse_labels(r)).map_err(|e| match e {
                ketama::Error::OnRing { source, .. } => {
                    anyhow::anyhow!("--require {r:?} on the --to ring: {source}")
                }
                e => anyhow::anyhow!("--require {r:?}: {e}"),
            })?),
        };
        let mut rings = vec![(args.ring.compat, "--compat")];
        if args.to.is_some() {
            rings.push((args.to_compat, "--to-compat"));
        }
        let new = match args.to {
            Some(_) => args.key.to_key((args.to_compat, "--to-compat"))?,
            None if args.key.to_key_config.is_some() => bail!(
                "--to-key-config is a migration's new key: give --to (the same servers file for a change of key alone) and --rollout"
            ),
            None => None,
        };
        let key = args.key.key(&rings)?.map(|old| LineKey {
            old,
            new,
            format: args.key.request_format,
            bufs: Default::default(),
        });
        Ok(Router {
            key,
            table,
            fixed,
            from_input: args.require_from_input,
            replicas: args.replicas.unwrap_or(1).min(usize::MAX as u64) as usize,
            scope: args.scope.clone(),
        })
    }

    /// Whether keys can be answered as a batch: one answer per key, the
    /// same requirement for all.
    fn batched(&self) -> bool {
        !self.from_input && self.replicas == 1 && self.key.is_none()
    }

    fn write_answer(
        &self,
        version: Version,
        nodes: &mut dyn Iterator<Item = usize>,
        out: &mut impl Write,
    ) -> io::Result<()> {
        let ring = self.table.ring(version);
        let mut any = false;
        for n in nodes {
            if any {
                out.write_all(b" ")?;
            }
            out.write_all(ring.nodes()[n].server().as_bytes())?;
            any = true;
        }
        if !any {
            out.write_all(b"-")?;
        }
        if self.table.migration().is_some() {
            out.write_all(b"\t")?;
            out.write_all(version.name().as_bytes())?;
        }
        out.write_all(b"\n")
    }

    /// Answers one input line (without its newline).
    fn answer(&mut self, line: &[u8], line_no: u64, out: &mut impl Write) -> anyhow::Result<()> {
        let (key, need) = if self.from_input {
            match line.iter().rposition(|&b| b == b'\t') {
                Some(t) => {
                    let labels = std::str::from_utf8(&line[t + 1..]).with_context(|| {
                        format!("stdin line {line_no}: the labels are not UTF-8")
                    })?;
                    let need = self
                        .table
                        .need(&parse_labels(labels))
                        .with_context(|| format!("stdin line {line_no}"))?;
                    (&line[..t], Some(need))
                }
                None => (line, None),
            }
        } else {
            (line, self.fixed)
        };
        let scope = self.scope.as_deref();
        let mut route = match &mut self.key {
            None => self.table.route(key, need, scope)?,
            Some(k) => {
                let req =
                    crate::requests::parse(key, k.format, line_no as usize).context("stdin")?;
                let mut cookie = None;
                let (a, b) = &mut k.bufs;
                let table = &self.table;
                let route = match &k.new {
                    None => table.route_request(&k.old, &req, a, &mut cookie, need, scope)?,
                    Some(new) => k.old.take(&req, a, &mut cookie, |o| {
                        new.take(&req, b, &mut None, |n| {
                            table.route_rekeyed(o, n, need, scope)
                        })
                    })?,
                };
                match route {
                    Some(route) => route,
                    // The key took nothing: the router sends the request
                    // round robin.
                    None => {
                        out.write_all(b"*\n")?;
                        return Ok(());
                    }
                }
            }
        };
        let version = route.version();
        let table = &self.table;
        // The route is this table's own: `next` cannot refuse it.
        let mut nodes =
            std::iter::from_fn(|| table.next(&mut route).ok().flatten()).take(self.replicas);
        self.write_answer(version, &mut nodes, out)?;
        Ok(())
    }
}

pub fn run(args: RouteArgs) -> anyhow::Result<()> {
    let mut router = Router::new(&args)?;
    let stdin = io::stdin();
    let stdout = io::stdout();
    let mut input = stdin.lock();
    let mut out = io::BufWriter::with_capacity(CHUNK, stdout.lock());
    let mut pending: Vec<u8> = Vec::with_capacity(2 * CHUNK);
    let mut chunk = vec![0u8; CHUNK];
    let mut batch = Batch::default();
    let mut line_no = 0u64;
    // Bytes of `pending` already searched for a newline: a long line is
    // scanned once, not once per chunk.
    let mut scanned = 0usize;
    loop {
        let n = match input.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("cannot read keys from stdin"),
        };
        if n == 0 {
            if !pending.is_empty() {
                check_length(pending.len(), line_no + batch.lines.len() as u64 + 1)?;
                batch.lines.push((0, pending.len()));
            }
            batch.answer(&mut router, &pending, &mut line_no, &mut out)?;
            out.flush()?;
            return Ok(());
        }
        pending.extend_from_slice(&chunk[..n]);
        let mut start = 0;
        while let Some(len) = pending[scanned..].iter().position(|&b| b == b'\n') {
            let end = scanned + len;
            let key_end = if end > start && pending[end - 1] == b'\r' {
                end - 1
            } else {
                end
            };
            check_length(key_end - start, line_no + batch.lines.len() as u64 + 1)?;
            batch.lines.push((start, key_end));
            start = end + 1;
            scanned = start;
        }
        scanned = pending.len();
        // An unfinished line is refused as soon as it passes the limit,
        // before it is read to the end.
        check_length(scanned - start, line_no + batch.lines.len() as u64 + 1)?;
        batch.answer(&mut router, &pending, &mut line_no, &mut out)?;
        pending.drain(..start);
        scanned -= start;
        out.flush()?;
    }
}

fn check_length(len: usize, line: u64) -> anyhow::Result<()> {
    if len > MAX_LINE {
        bail!("stdin line {line} is longer than {MAX_LINE} bytes (1 MiB), the most a key may be: shorten it");
    }
    Ok(())
}

/// The lines of one chunk of input (as byte ranges of the pending buffer).
#[derive(Default)]
struct Batch {
    lines: Vec<(usize, usize)>,
    answers: Vec<(Version, Option<usize>)>,
}

impl Batch {
    fn answer(
        &mut self,
        router: &mut Router,
        buf: &[u8],
        line_no: &mut u64,
        out: &mut impl Write,
    ) -> anyhow::Result<()> {
        if router.batched() {
            let keys: Vec<&[u8]> = self.lines.iter().map(|&(s, e)| &buf[s..e]).collect();
            router.table.first_nodes(
                &keys,
                router.fixed,
                router.scope.as_deref(),
                &mut self.answers,
            )?;
            for &(v, n) in &self.answers {
                router.write_answer(v, &mut n.into_iter(), out)?;
            }
            *line_no += self.lines.len() as u64;
        } else {
            for &(s, e) in &self.lines {
                *line_no += 1;
                router.answer(&buf[s..e], *line_no, out)?;
            }
        }
        self.lines.clear();
        Ok(())
    }
}
