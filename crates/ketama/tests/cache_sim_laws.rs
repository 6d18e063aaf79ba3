//! Laws of the migration cache simulation (`analysis::cache_sim`), as
//! property tests over random rings, traces, schedules and cache sizes.
//! The expectations come from the rings alone (the library's lookups and
//! the rollout bucket), never from the simulator's own output.

use std::collections::HashSet;

use ketama::analysis::cache_sim::{
    fewest_steps, simulate, CacheSize, ScheduleError, SimReport, SimSettings, Simulation, LADDER_BP,
};
use ketama::migration::rollout_bucket;
use ketama::{Node, Ring, RingBuilder};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Case {
    weights: Vec<u32>,
    new_points: u32,
    extra_server: bool,
    trace: Vec<u16>,
    warmup: usize,
    steps: Vec<u32>,
    per_step: u64,
    window: u64,
    cache: u64,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(1u32..4, 2..6),
        prop::sample::select(vec![160u32, 40, 10]),
        any::<bool>(),
        1u16..400,
        prop::collection::vec(any::<u32>(), 50..1500),
        0.0f64..0.6,
        prop::collection::btree_set(1u32..10_000, 0..4),
        1u64..400,
        1u64..300,
        1u64..250,
    )
        .prop_map(
            |(
                weights,
                new_points,
                extra_server,
                objects,
                raw,
                warm,
                bps,
                per_step,
                window,
                cache,
            )| {
                // Skewed towards low ids, so some keys are hot.
                let trace: Vec<u16> = raw
                    .iter()
                    .map(|r| {
                        let u = (*r as f64) / (u32::MAX as f64);
                        ((u * u * u) * objects as f64) as u16
                    })
                    .collect();
                let warmup = (warm * trace.len() as f64) as usize;
                let mut steps: Vec<u32> = bps.into_iter().collect();
                steps.push(10_000);
                Case {
                    weights,
                    new_points,
                    extra_server,
                    trace,
                    warmup,
                    steps,
                    per_step,
                    window,
                    cache,
                }
            },
        )
}

fn rings(c: &Case) -> (Ring, Ring) {
    let nodes: Vec<Node> = c
        .weights
        .iter()
        .enumerate()
        .map(|(i, w)| Node::new(format!("10.3.0.{i}:80"), *w))
        .collect();
    let old = Ring::new(nodes.clone()).unwrap();
    let mut to = nodes;
    if c.extra_server {
        to.push(Node::new("10.3.1.1:80", 1));
    }
    let new = RingBuilder::new()
        .point_multiple(c.new_points)
        .build(to)
        .unwrap();
    (old, new)
}

fn keys(c: &Case) -> Vec<Vec<u8>> {
    c.trace
        .iter()
        .map(|i| format!("/o/{i}").into_bytes())
        .collect()
}

fn settings(c: &Case, fill: bool) -> SimSettings {
    SimSettings {
        warmup: c.warmup as u64,
        steps_bp: c.steps.clone(),
        requests_per_step: c.per_step,
        window: c.window,
        cache: CacheSize::Each(c.cache),
        object_size: None,
        fill_from_previous: fill,
    }
}

fn run(old: &Ring, new: &Ring, keys: &[Vec<u8>], s: &SimSettings) -> SimReport {
    let r = simulate(old, new, keys.iter().map(Vec::as_slice), s);
    r.check().unwrap();
    r
}

fn step_of(c: &Case, n: usize) -> usize {
    (((n - c.warmup) as u64 / c.per_step) as usize).min(c.steps.len() - 1)
}

fn total_fetches(r: &SimReport) -> u64 {
    r.steps.iter().map(|s| s.origin_fetches).sum()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// A schedule ending at 10,000 bp leaves every key on the new ring:
    /// the last step serves nothing from the old one, and every step
    /// serves by the new ring exactly the keys whose bucket is below it.
    #[test]
    fn a_schedule_ending_at_10000_leaves_every_key_on_its_new_owner(c in case()) {
        let (old, new) = rings(&c);
        let keys = keys(&c);
        let r = run(&old, &new, &keys, &settings(&c, false));
        let last = r.steps.last().unwrap();
        prop_assert_eq!(last.hits[0] + last.misses[0], 0);
        let mut on_new = vec![0u64; c.steps.len()];
        for (n, k) in keys.iter().enumerate().skip(c.warmup) {
            let step = step_of(&c, n);
            if (rollout_bucket(k) as u32) < c.steps[step] {
                on_new[step] += 1;
            }
        }
        for (s, want) in r.steps.iter().zip(on_new) {
            prop_assert_eq!(s.hits[1] + s.misses[1], want);
        }
    }

    /// Without fill, the origin fetches after the warm-up are at least the
    /// distinct moved objects asked after they moved: each one's first
    /// request at its new owner cannot be a hit there.
    #[test]
    fn moved_objects_cost_at_least_one_fetch_each(c in case()) {
        let (old, new) = rings(&c);
        let keys = keys(&c);
        let r = run(&old, &new, &keys, &settings(&c, false));
        let mut moved = HashSet::new();
        for (n, k) in keys.iter().enumerate().skip(c.warmup) {
            let on_new = (rollout_bucket(k) as u32) < c.steps[step_of(&c, n)];
            let (o, w) = (old.node(k).unwrap().server(), new.node(k).unwrap().server());
            if on_new && o != w {
                moved.insert(k.clone());
            }
        }
        prop_assert!(total_fetches(&r) >= moved.len() as u64,
            "{} fetches < {} moved objects", total_fetches(&r), moved.len());
    }

    /// Fill only turns origin fetches into peer fills: every hit and miss,
    /// per step, ring and server, is the same (the caches evolved the same).
    #[test]
    fn fill_never_adds_fetches_and_leaves_the_caches_as_they_were(c in case()) {
        let (old, new) = rings(&c);
        let keys = keys(&c);
        let plain = run(&old, &new, &keys, &settings(&c, false));
        let fill = run(&old, &new, &keys, &settings(&c, true));
        prop_assert_eq!(&plain.servers, &fill.servers);
        for (a, b) in plain.steps.iter().zip(&fill.steps) {
            prop_assert_eq!((a.hits, a.misses, a.requests), (b.hits, b.misses, b.requests));
            prop_assert!(b.origin_fetches <= a.origin_fetches);
            prop_assert_eq!(b.origin_fetches + b.peer_fills, a.origin_fetches);
            prop_assert_eq!(a.peer_fills, 0);
        }
    }

    /// The same ring twice costs what no migration costs: the schedule's
    /// fetches equal those of staying on the old ring, and nothing fills.
    #[test]
    fn the_same_ring_twice_costs_nothing_beyond_the_steady_misses(c in case()) {
        let (old, _) = rings(&c);
        let keys = keys(&c);
        let moving = run(&old, &old, &keys, &settings(&c, true));
        let staying = run(&old, &old, &keys, &SimSettings { steps_bp: vec![0], ..settings(&c, false) });
        prop_assert_eq!(total_fetches(&moving), total_fetches(&staying));
        prop_assert_eq!(moving.steps.iter().map(|s| s.peer_fills).sum::<u64>(), 0);
        prop_assert_eq!(&moving.servers, &staying.servers);
    }
}

/// A case for the search: a warm-up of several windows, then steps long
/// enough that the schedules differ.
fn search_case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(1u32..3, 3..6),
        prop::sample::select(vec![40u32, 10]),
        300u16..1500,
        prop::collection::vec(any::<u32>(), 4000),
        40u64..250,
    )
        .prop_map(|(weights, new_points, objects, raw, cache)| Case {
            weights,
            new_points,
            extra_server: false,
            trace: raw
                .iter()
                .map(|r| {
                    let u = (*r as f64) / (u32::MAX as f64);
                    ((u * u) * objects as f64) as u16
                })
                .collect(),
            warmup: 1500,
            steps: vec![10_000],
            per_step: 250,
            window: 125,
            cache,
        })
}

/// The search's answer by brute force: every schedule of the ladder
/// simulated whole, the fewest steps under the cap, then the lowest peak.
fn brute_force(
    old: &Ring,
    new: &Ring,
    keys: &[Vec<u8>],
    s: &SimSettings,
    factor: f64,
) -> Option<(Vec<u32>, u64)> {
    let steady = run(old, new, keys, s).steady_window.filter(|&x| x > 0)?;
    let mut all: Vec<(usize, u64, Vec<u32>)> = (0u32..64)
        .map(|mask| {
            let mut steps: Vec<u32> = (0..6)
                .filter(|i| mask & (1 << i) != 0)
                .map(|i| LADDER_BP[i])
                .collect();
            steps.push(10_000);
            let r = run(
                old,
                new,
                keys,
                &SimSettings {
                    steps_bp: steps.clone(),
                    ..s.clone()
                },
            );
            (
                steps.len(),
                r.peak_window().map_or(0, |w| w.origin_fetches),
                steps,
            )
        })
        .filter(|(_, peak, _)| *peak as f64 <= factor * steady as f64)
        .collect();
    all.sort();
    all.into_iter().next().map(|(_, peak, steps)| (steps, peak))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// The search (one shared warm-up, schedules abandoned at the first
    /// window over the cap, two threads) answers what simulating every
    /// schedule whole answers.
    #[test]
    fn the_fewest_steps_search_equals_brute_force(c in search_case(), factor in 1.1f64..3.0) {
        let (old, new) = rings(&c);
        let keys = keys(&c);
        let s = settings(&c, false);
        let want = brute_force(&old, &new, &keys, &s, factor);
        let mut warm = Simulation::new(&old, &new, s.clone());
        for k in keys.iter().take(c.warmup) {
            warm.serve(k);
        }
        let got = fewest_steps(&warm, || keys.iter().skip(c.warmup).map(Vec::as_slice), factor, 2);
        match (got, want) {
            (Ok(g), Some((steps, peak))) => prop_assert_eq!((g.steps_bp, g.peak), (steps, peak)),
            (Err(ScheduleError::NoSteadyState), None) => {}
            (Err(ScheduleError::NoneUnderCap { .. }), None) => {}
            (g, w) => prop_assert!(false, "search {:?}, brute force {:?}", g, w),
        }
    }
}

#[test]
fn a_schedule_cannot_change_after_the_warm_up() {
    let nodes: Vec<Node> = (0..3)
        .map(|i| Node::new(format!("10.3.0.{i}:80"), 1))
        .collect();
    let ring = Ring::new(nodes).unwrap();
    let s = SimSettings {
        warmup: 2,
        steps_bp: vec![10_000],
        requests_per_step: 10,
        window: 1,
        cache: CacheSize::Each(10),
        object_size: None,
        fill_from_previous: false,
    };
    let mut sim = Simulation::new(&ring, &ring, s);
    for k in ["/a", "/b", "/c"] {
        sim.serve(k.as_bytes());
    }
    let err = sim.clone().with_schedule(vec![5000, 10_000]).err().unwrap();
    assert_eq!((err.served, err.warmup), (3, 2));
    assert!(err.to_string().contains("only during the warm-up"), "{err}");
    let search = fewest_steps(&sim, std::iter::empty::<&[u8]>, 2.0, 1);
    assert!(
        matches!(search, Err(ScheduleError::Started(_))),
        "{search:?}"
    );
}
