//! The rebuild a reload costs stock Pingora: a `LoadBalancer<KetamaHashing>`
//! over the backends of a file (`ADDR WEIGHT` lines), then one backend's
//! weight changed and `LoadBalancer::update()` timed (discovery, comparison
//! and the new selector's build), five times; prints the median and every
//! run in milliseconds, and the build part Pingora reports.
//!
//! `cargo run --release -p ketama-router --example stock_rebuild -- FILE`

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use async_trait::async_trait;
use pingora::lb::discovery::ServiceDiscovery;
use pingora::lb::selection::consistent::KetamaHashing;
use pingora::lb::{Backend, Backends, LoadBalancer};

#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// A discovery whose answer the harness swaps, as a config reload would.
struct Swappable(Arc<ArcSwap<BTreeSet<Backend>>>);

#[async_trait]
impl ServiceDiscovery for Swappable {
    async fn discover(&self) -> pingora::Result<(BTreeSet<Backend>, HashMap<u64, bool>)> {
        Ok((BTreeSet::clone(&self.0.load()), HashMap::new()))
    }
}

fn main() {
    let path = std::env::args().nth(1).expect("a backends file");
    let lines: Vec<(String, usize)> = std::fs::read_to_string(&path)
        .expect("readable backends file")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut p = l.split_whitespace();
            let a = p.next().expect("an address").to_string();
            (a, p.next().map_or(1, |w| w.parse().expect("a weight")))
        })
        .collect();
    let set = |bump: usize| -> BTreeSet<Backend> {
        lines
            .iter()
            .enumerate()
            .map(|(i, (a, w))| {
                let w = if i == 0 { w + bump } else { *w };
                Backend::new_with_weight(a, w).expect("a socket address")
            })
            .collect()
    };
    let shared = Arc::new(ArcSwap::from_pointee(set(0)));
    let lb: LoadBalancer<KetamaHashing> =
        LoadBalancer::from_backends(Backends::new(Box::new(Swappable(shared.clone()))));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    rt.block_on(lb.update()).expect("first update");
    let mut totals = Vec::new();
    let mut builds = Vec::new();
    for run in 1..=5 {
        shared.store(Arc::new(set(run)));
        let t = Instant::now();
        rt.block_on(lb.update()).expect("update");
        totals.push(t.elapsed().as_secs_f64() * 1e3);
        let timing = lb.last_update_timing().expect("timed");
        builds.push(timing.build_duration.as_secs_f64() * 1e3);
    }
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "update_ms {:.1} build_ms {:.1} runs {:?}",
        median(&totals),
        median(&builds),
        totals
            .iter()
            .map(|t| (t * 10.0).round() / 10.0)
            .collect::<Vec<_>>()
    );
}
