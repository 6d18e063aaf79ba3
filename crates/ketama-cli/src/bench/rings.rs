//! ketama's layouts against pingora-ketama v1 and v2: build CPU, wall time
//! and peak heap, lookups, bytes per point.

use std::hint::black_box;
use std::time::Instant;

use anyhow::{bail, Context};
use cpu_time::ProcessTime;
use ketama::{Layout, Node, Ring, RingBuilder, Scheme, DEFAULT_POINT_MULTIPLE};

use super::{alloc, make_keys, median, per, BenchArgs};

/// What is measured: one of ketama's layouts or a pingora-ketama version.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Subject {
    Ketama(Layout),
    #[cfg(feature = "pingora")]
    PingoraV1,
    #[cfg(feature = "pingora")]
    PingoraV2,
}

impl Subject {
    fn name(self) -> String {
        match self {
            Subject::Ketama(l) => format!("ketama {l}"),
            #[cfg(feature = "pingora")]
            Subject::PingoraV1 => "pingora-ketama v1".into(),
            #[cfg(feature = "pingora")]
            Subject::PingoraV2 => "pingora-ketama v2".into(),
        }
    }
}

/// A built ring under measurement.
trait Lookup {
    /// Looks a key up; returns a number that depends on the answer.
    fn one(&self, key: &[u8]) -> usize;
    /// Hashes keys into `hashes` and looks them up as a batch into `out`,
    /// if the subject can.
    fn batch(
        &self,
        _keys: &mut dyn Iterator<Item = &[u8]>,
        _hashes: &mut Vec<u32>,
        _out: &mut Vec<Option<usize>>,
    ) -> bool {
        false
    }
}

impl Lookup for Ring {
    #[inline]
    fn one(&self, key: &[u8]) -> usize {
        self.node_index(key).unwrap_or(0)
    }
    fn batch(
        &self,
        keys: &mut dyn Iterator<Item = &[u8]>,
        hashes: &mut Vec<u32>,
        out: &mut Vec<Option<usize>>,
    ) -> bool {
        // Envoy's rings look keys up by their 64-bit hash, one at a time.
        if self.compat().is_envoy() {
            return false;
        }
        hashes.clear();
        hashes.extend(keys.map(|k| self.hash_key(k)));
        self.node_indices_for_hashes(hashes, out);
        true
    }
}

#[cfg(feature = "pingora")]
impl Lookup for pingora_ketama::Continuum {
    #[inline]
    fn one(&self, key: &[u8]) -> usize {
        match self.node(key) {
            Some(std::net::SocketAddr::V4(a)) => u32::from(*a.ip()) as usize,
            Some(a) => a.port() as usize,
            None => 0,
        }
    }
}

/// One round's measurements of one subject.
#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    build_cpu: f64,
    build_wall: f64,
    build_peak: f64,
    points_bytes: f64,
    node_bytes: f64,
    ns_throughput: f64,
    ns_latency: f64,
    ns_batch: Option<f64>,
}

struct Setup {
    names: Vec<String>,
    weight: u32,
    multiple: u32,
    compat: Scheme,
}

impl Setup {
    fn nodes(&self) -> Vec<Node> {
        self.names
            .iter()
            .map(|n| Node::new(n.clone(), self.weight))
            .collect()
    }

    /// Builds `s`, measuring time and memory; returns the ring and the
    /// bytes its node table holds.
    fn build(&self, s: Subject) -> anyhow::Result<(Box<dyn Lookup>, Sample)> {
        let mut sample = Sample::default();
        let base = alloc::live();
        alloc::reset_peak();
        let (cpu, wall) = (ProcessTime::now(), Instant::now());
        let built: Box<dyn Lookup> = match s {
            Subject::Ketama(layout) => Box::new(
                RingBuilder::new()
                    .compat(self.compat)
                    .layout(layout)
                    .point_multiple(self.multiple)
                    .build(self.nodes())?,
            ),
            #[cfg(feature = "pingora")]
            Subject::PingoraV1 | Subject::PingoraV2 => {
                use pingora_ketama::{Bucket, Continuum, Version};
                let buckets: Vec<Bucket> = self
                    .names
                    .iter()
                    .map(|n| {
                        Bucket::new(
                            n.parse().expect("bench names are socket addresses"),
                            self.weight,
                        )
                    })
                    .collect();
                let version = if s == Subject::PingoraV1 {
                    Version::V1
                } else {
                    Version::V2 {
                        point_multiple: self.multiple,
                    }
                };
                Box::new(Continuum::new_with_version(&buckets, version))
            }
        };
        sample.build_cpu = cpu.elapsed().as_secs_f64() * 1e3;
        sample.build_wall = wall.elapsed().as_secs_f64() * 1e3;
        sample.build_peak = (alloc::peak() - base) as f64;
        let retained = alloc::live() - base;
        // The node table, measured the same way: a copy of what each keeps.
        let before = alloc::live();
        let node_bytes = match s {
            Subject::Ketama(_) => {
                let t = black_box(self.nodes().into_boxed_slice());
                let b = alloc::live() - before;
                drop(t);
                b
            }
            #[cfg(feature = "pingora")]
            _ => {
                let t: Box<[std::net::SocketAddr]> =
                    black_box(self.names.iter().map(|n| n.parse().unwrap()).collect());
                let b = alloc::live() - before;
                drop(t);
                b
            }
        };
        sample.node_bytes = node_bytes as f64;
        sample.points_bytes = retained.saturating_sub(node_bytes) as f64;
        Ok((built, sample))
    }
}

fn measure_lookups(r: &dyn Lookup, keys: &[u8], sample: &mut Sample) {
    let n = keys.len() / 30;
    let key = |i: usize| &keys[i * 30..i * 30 + 30];

    let t = Instant::now();
    let mut acc = 0usize;
    for i in 0..n {
        acc = acc.wrapping_add(r.one(key(i)));
    }
    black_box(acc);
    sample.ns_throughput = per(t.elapsed(), n);

    // Each key depends on the previous answer, so no two lookups overlap.
    // The key is rewritten in place (16 hex digits of a mix of the answer
    // and the step) rather than fetched from the key array, which would add
    // a cache miss of its own to every step.
    let t = Instant::now();
    let mut buf = *b"/cdn/obj/000000000000000000000";
    let mut x = 0u64;
    for i in 0..n {
        hex16(&mut buf[14..], x);
        let a = r.one(&buf);
        x = (x ^ a as u64 ^ i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    black_box(x);
    sample.ns_latency = per(t.elapsed(), n);

    let mut hashes = Vec::with_capacity(1024);
    let mut out = Vec::with_capacity(1024);
    let t = Instant::now();
    let mut acc = 0usize;
    let mut batched = true;
    for start in (0..n).step_by(1024) {
        let mut chunk = (start..n.min(start + 1024)).map(key);
        if !r.batch(&mut chunk, &mut hashes, &mut out) {
            batched = false;
            break;
        }
        acc = acc.wrapping_add(out.iter().map(|o| o.unwrap_or(0)).sum::<usize>());
    }
    black_box(acc);
    sample.ns_batch = batched.then(|| per(t.elapsed(), n));
}

/// Writes `x` as 16 lowercase hex digits.
#[inline(always)]
fn hex16(out: &mut [u8], x: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (k, o) in out[..16].iter_mut().enumerate() {
        *o = HEX[(x >> (60 - 4 * k) & 15) as usize];
    }
}

pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    if args.nodes == 0 || args.nodes > 1 << 16 {
        bail!(
            "--nodes {} is out of range: give 1 to 65536 (pingora-ketama's limit)",
            args.nodes
        );
    }
    if args.weight == 0 {
        bail!("--weight 0 gives no points (and pingora-ketama panics on it): give at least 1");
    }
    if args.keys == 0 || args.rounds == 0 {
        bail!("--keys and --rounds must be at least 1");
    }
    let setup = Setup {
        names: ketama::synthetic::numbered(args.nodes, 443),
        weight: args.weight,
        multiple: args.point_multiple,
        compat: args.compat,
    };
    // Points after collisions, the denominator of bytes per point.
    let points = RingBuilder::new()
        .compat(args.compat)
        .point_multiple(args.point_multiple)
        .build(setup.nodes())
        .context("cannot build the benchmark ring")?
        .point_count();

    let mut subjects: Vec<Subject> = Layout::ALL.iter().map(|&l| Subject::Ketama(l)).collect();
    #[cfg(feature = "pingora")]
    {
        if args.point_multiple == DEFAULT_POINT_MULTIPLE {
            subjects.push(Subject::PingoraV1); // v1 has no configurable multiple
        }
        subjects.push(Subject::PingoraV2);
    }
    // pingora v2 sorts on rayon's global pool, which allocates itself on
    // first use: start it before measuring so its memory is not counted as
    // the first v2 ring's.
    #[cfg(feature = "pingora")]
    drop(pingora_ketama::Continuum::new_with_version(
        &[pingora_ketama::Bucket::new(([127, 0, 0, 1], 1).into(), 1)],
        pingora_ketama::Version::V2 {
            point_multiple: 160,
        },
    ));
    let keys = make_keys(args.keys);
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); subjects.len()];
    for round in 0..args.rounds {
        // Rotate the order each round so that no subject always goes first.
        for k in 0..subjects.len() {
            let i = (k + round) % subjects.len();
            let (ring, mut s) = setup.build(subjects[i])?;
            measure_lookups(ring.as_ref(), &keys, &mut s);
            drop(ring);
            samples[i].push(s);
        }
        eprint!("\rround {}/{}", round + 1, args.rounds);
    }
    eprintln!();

    let rows: Vec<(String, Sample)> = subjects
        .iter()
        .zip(&samples)
        .map(|(s, v)| {
            let m = |f: fn(&Sample) -> f64| median(v.iter().map(f).collect());
            let batch = v.iter().filter_map(|s| s.ns_batch).collect::<Vec<_>>();
            (
                s.name(),
                Sample {
                    build_cpu: m(|s| s.build_cpu),
                    build_wall: m(|s| s.build_wall),
                    build_peak: m(|s| s.build_peak),
                    points_bytes: m(|s| s.points_bytes),
                    node_bytes: m(|s| s.node_bytes),
                    ns_throughput: m(|s| s.ns_throughput),
                    ns_latency: m(|s| s.ns_latency),
                    ns_batch: (!batch.is_empty()).then(|| median(batch)),
                },
            )
        })
        .collect();
    let v2 = rows
        .iter()
        .find(|(n, _)| n == "pingora-ketama v2")
        .map(|r| r.1);
    let title = format!(
        "{} nodes x weight {} x {} points = {} points ({} after collisions), {} lookups of 30-byte keys, median of {} interleaved rounds, ketama scheme {}",
        args.nodes,
        args.weight,
        args.point_multiple,
        args.nodes as u64 * args.weight as u64 * args.point_multiple as u64,
        points,
        args.keys,
        args.rounds,
        args.compat
    );
    if args.json {
        print_json(&title, points, &rows, v2);
    } else {
        print_table(&title, points, &rows, v2);
    }
    Ok(())
}

fn ratio(x: f64, base: Option<f64>) -> String {
    match base {
        Some(b) if b > 0.0 => format!("{:.2}", x / b),
        _ => "-".into(),
    }
}

fn print_table(title: &str, points: usize, rows: &[(String, Sample)], v2: Option<Sample>) {
    println!("{title}\n");
    println!("| ring | build CPU ms | build wall ms | build peak MB | ns/lookup | ns/lookup latency | ns/lookup batch | B/point | node table KB | CPU vs v2 | lookup vs v2 | latency vs v2 | B/point vs v2 |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (name, s) in rows {
        let bpp = s.points_bytes / points as f64;
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {:.2} | {:.0} | {} | {} | {} | {} |",
            s.build_cpu,
            s.build_wall,
            s.build_peak / 1e6,
            s.ns_throughput,
            s.ns_latency,
            s.ns_batch.map_or("-".into(), |b| format!("{b:.1}")),
            bpp,
            s.node_bytes / 1e3,
            ratio(s.build_cpu, v2.map(|v| v.build_cpu)),
            ratio(s.ns_throughput, v2.map(|v| v.ns_throughput)),
            ratio(s.ns_latency, v2.map(|v| v.ns_latency)),
            ratio(bpp, v2.map(|v| v.points_bytes / points as f64)),
        );
    }
}

fn print_json(title: &str, points: usize, rows: &[(String, Sample)], v2: Option<Sample>) {
    let rows: Vec<serde_json::Value> = rows
        .iter()
        .map(|(name, s)| {
            let bpp = s.points_bytes / points as f64;
            serde_json::json!({
                "ring": name,
                "build_cpu_ms": s.build_cpu,
                "build_wall_ms": s.build_wall,
                "build_peak_bytes": s.build_peak,
                "ns_per_lookup": s.ns_throughput,
                "ns_per_lookup_latency": s.ns_latency,
                "ns_per_lookup_batch": s.ns_batch,
                "bytes_per_point": bpp,
                "node_table_bytes": s.node_bytes,
                "build_cpu_vs_v2": v2.map(|v| s.build_cpu / v.build_cpu),
                "lookup_vs_v2": v2.map(|v| s.ns_throughput / v.ns_throughput),
                "latency_vs_v2": v2.map(|v| s.ns_latency / v.ns_latency),
                "bytes_per_point_vs_v2": v2.map(|v| bpp / (v.points_bytes / points as f64)),
            })
        })
        .collect();
    println!(
        "{}",
        serde_json::json!({ "setup": title, "points": points, "rows": rows })
    );
}
