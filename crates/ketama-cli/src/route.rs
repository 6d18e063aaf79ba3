//! `ketama route`: keys on stdin, servers on stdout.

use std::io::{self, Read, Write};

use anyhow::{bail, Context};
use clap::Args;
use ketama::Ring;

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
}

/// Bytes read from stdin at a time; answers for every complete line of a
/// chunk are flushed before the next read, which may block.
const CHUNK: usize = 64 * 1024;

pub fn run(args: RouteArgs) -> anyhow::Result<()> {
    if args.replicas == Some(0) {
        bail!("--replicas 0 would print nothing: give at least 1");
    }
    let ring = load_ring(&args.servers, args.ring.builder())?;
    let stdin = io::stdin();
    let stdout = io::stdout();
    let mut input = stdin.lock();
    let mut out = io::BufWriter::with_capacity(CHUNK, stdout.lock());
    let mut pending: Vec<u8> = Vec::with_capacity(2 * CHUNK);
    let mut chunk = vec![0u8; CHUNK];
    let mut batch = Batch::default();
    loop {
        let n = match input.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("cannot read keys from stdin"),
        };
        if n == 0 {
            if !pending.is_empty() {
                batch.keys.push((0, pending.len()));
                batch.answer(&ring, &pending, args.replicas, &mut out)?;
            }
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
        batch.answer(&ring, &pending, args.replicas, &mut out)?;
        pending.drain(..start);
        out.flush()?;
    }
}

/// The keys of one chunk of input (as byte ranges of the pending buffer),
/// looked up together so that their memory accesses overlap.
#[derive(Default)]
struct Batch {
    keys: Vec<(usize, usize)>,
    hashes: Vec<u32>,
    nodes: Vec<Option<usize>>,
}

impl Batch {
    fn answer(
        &mut self,
        ring: &Ring,
        buf: &[u8],
        replicas: Option<usize>,
        out: &mut impl Write,
    ) -> io::Result<()> {
        match replicas {
            None => {
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
            }
            Some(r) => {
                for &(s, e) in &self.keys {
                    answer_replicas(ring, &buf[s..e], r, out)?;
                }
            }
        }
        self.keys.clear();
        Ok(())
    }
}

fn answer_replicas(ring: &Ring, key: &[u8], r: usize, out: &mut impl Write) -> io::Result<()> {
    let mut any = false;
    for n in ring.failover(key).take(r) {
        if any {
            out.write_all(b" ")?;
        }
        out.write_all(n.server().as_bytes())?;
        any = true;
    }
    if !any {
        out.write_all(b"-")?;
    }
    out.write_all(b"\n")
}
