//! `ketama fleet plan status`: what the plan is doing, told from etcd as
//! it is now, not only as the plan last wrote it: whether a controller
//! holds the plan (its lease), the fleet's rollout beside the one the plan
//! wrote (a difference named), the time left in the hold, failures and
//! inconclusive checks against their limits. `--json` and the table say
//! the same, stages and steps 1-based in both (step 0: before the stage's
//! first step).

use std::collections::BTreeMap;

use ketama_fleet::etcd::Client;
use ketama_fleet::plan::controller::now_ms;
use ketama_fleet::plan::{PlanSpec, PlanState, RolloutDoc, Status};
use ketama_fleet::Keys;
use serde::Serialize;

/// The controller holding the plan's lock.
#[derive(Serialize)]
pub struct Holder {
    /// Its id (`host-pid`).
    pub id: String,
    /// Seconds left on its lease (it renews them while it lives).
    pub lease_ttl_s: i64,
}

/// One stage's line.
#[derive(Serialize)]
pub struct StageLine {
    /// 1-based.
    pub stage: usize,
    /// Its scopes (`*`: the rest).
    pub scopes: Vec<String>,
    /// Steps applied (0: not started).
    pub step: usize,
    /// Steps in all.
    pub steps: usize,
    /// Its share in the rollout the plan wrote last.
    pub plan_bp: u32,
    /// Its share in the fleet's rollout now.
    pub fleet_bp: u32,
    /// Its last check: verdict and reasons.
    pub last_check: Option<String>,
}

/// Everything `status` says.
#[derive(Serialize)]
pub struct Report {
    /// `running`, `paused` (also after stepping back), `completed`,
    /// `rolled_back`, `aborted`.
    pub status: &'static str,
    /// Why it paused or ended.
    pub reason: Option<String>,
    /// The controller holding the lock now (`None`: none does).
    pub controller: Option<Holder>,
    /// A running or paused plan that no controller holds.
    pub orphaned: bool,
    /// The current stage, 1-based.
    pub stage: usize,
    /// The step applied in it, 1-based (0: before its first step).
    pub step: usize,
    /// The stage whose gate the plan waits at (1-based).
    pub gate: Option<usize>,
    /// Milliseconds left in the current step's hold (running plans).
    pub hold_left_ms: Option<u64>,
    /// Failed checks in a row, and how many trigger `on_failure`.
    pub failures: u32,
    /// `guards.failures_to_rollback`.
    pub failures_to_rollback: u32,
    /// Inconclusive checks in a row, and how many count as a failure.
    pub inconclusive: u32,
    /// `guards.max_inconclusive`.
    pub max_inconclusive: u32,
    /// The rollout the plan wrote last.
    pub plan_rollout: RolloutDoc,
    /// The fleet's rollout now.
    pub fleet_rollout: RolloutDoc,
    /// How the two differ, when they do.
    pub mismatch: Option<String>,
    /// One line per stage.
    pub stages: Vec<StageLine>,
    /// The checks kept, oldest first, stages and steps 1-based.
    pub checks: Vec<serde_json::Value>,
}

fn share(doc: &RolloutDoc, scopes: &[String]) -> u32 {
    match scopes.first() {
        Some(s) if s != "*" => doc.scopes.get(s).copied().unwrap_or(doc.global_bp),
        _ => doc.global_bp,
    }
}

/// Where `fleet` differs from `plan` (`None`: nowhere).
fn mismatch(plan: &RolloutDoc, fleet: &RolloutDoc) -> Option<String> {
    let mut diffs = Vec::new();
    if plan.global_bp != fleet.global_bp {
        diffs.push(format!(
            "global {} bp (the plan wrote {})",
            fleet.global_bp, plan.global_bp
        ));
    }
    let names: BTreeMap<&String, ()> = plan
        .scopes
        .keys()
        .chain(fleet.scopes.keys())
        .map(|k| (k, ()))
        .collect();
    for name in names.keys() {
        let (p, f) = (
            plan.scopes.get(*name).copied().unwrap_or(plan.global_bp),
            fleet.scopes.get(*name).copied().unwrap_or(fleet.global_bp),
        );
        if p != f {
            diffs.push(format!("{name} {f} bp (the plan wrote {p})"));
        }
    }
    (!diffs.is_empty()).then(|| {
        format!(
            "the fleet's rollout is not what the plan wrote: {}; written by hand or reset since",
            diffs.join(", ")
        )
    })
}

/// Reads the lock, its lease and the rollout, and puts them beside the
/// stored plan.
pub fn report(c: &Client, keys: &Keys, spec: &PlanSpec, s: &PlanState) -> anyhow::Result<Report> {
    let controller = match c.get(&keys.plan_lock())?.0 {
        Some(kv) => c.lease_ttl(kv.lease)?.map(|(left, _)| Holder {
            id: String::from_utf8_lossy(&kv.value).into_owned(),
            lease_ttl_s: left,
        }),
        None => None,
    };
    let fleet_rollout: RolloutDoc = c
        .get(&keys.rollout())?
        .0
        .and_then(|kv| serde_json::from_slice(&kv.value).ok())
        .unwrap_or_default();
    let plan_rollout = s.intended(spec);
    let g = &spec.guards;
    let hold_left_ms = match (s.status(), s.step()) {
        (Status::Running, Some(_)) => {
            let held = now_ms().saturating_sub(s.since_ms());
            Some(spec.stages[s.stage()].hold_ms.saturating_sub(held))
        }
        _ => None,
    };
    let stages = spec
        .stages
        .iter()
        .enumerate()
        .map(|(i, st)| StageLine {
            stage: i + 1,
            scopes: st.scopes.clone(),
            step: match (i.cmp(&s.stage()), s.step()) {
                (std::cmp::Ordering::Less, _) => st.steps_bp.len(),
                (std::cmp::Ordering::Equal, Some(k)) => k + 1,
                _ => 0,
            },
            steps: st.steps_bp.len(),
            plan_bp: share(&plan_rollout, &st.scopes),
            fleet_bp: share(&fleet_rollout, &st.scopes),
            last_check: s.checks().iter().rev().find(|c| c.stage == i).map(|c| {
                let f = &c.figures;
                let r = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.3}"));
                format!(
                    "{} (requests {}, hit ratio {}, baseline {}, origin/s {:.1}){}",
                    c.verdict,
                    f.requests,
                    r(f.hit_ratio),
                    r(f.baseline_hit_ratio),
                    f.origin_rps,
                    if c.reasons.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", c.reasons.join("; "))
                    }
                )
            }),
        })
        .collect();
    let checks = s
        .checks()
        .iter()
        .map(|c| {
            serde_json::json!({
                "at_ms": c.at_ms,
                "stage": c.stage + 1,
                "step": c.step + 1,
                "verdict": c.verdict,
                "reasons": c.reasons,
                "figures": c.figures,
            })
        })
        .collect();
    Ok(Report {
        status: s.status().name(),
        reason: s.reason().map(str::to_string),
        orphaned: s.status().active() && controller.is_none(),
        controller,
        stage: s.stage() + 1,
        step: s.step().map_or(0, |k| k + 1),
        gate: s.gate().map(|g| g + 1),
        hold_left_ms,
        failures: s.streak().failures,
        failures_to_rollback: g.failures_to_rollback,
        inconclusive: s.streak().inconclusive,
        max_inconclusive: g.max_inconclusive,
        mismatch: mismatch(&plan_rollout, &fleet_rollout),
        plan_rollout,
        fleet_rollout,
        stages,
        checks,
    })
}

/// The report as the table `plan status` prints.
pub fn table(r: &Report) -> String {
    let mut out = format!(
        "plan {}{}\n",
        r.status,
        r.reason
            .as_ref()
            .map_or(String::new(), |x| format!(": {x}"))
    );
    out.push_str(&match (&r.controller, r.orphaned) {
        (Some(h), _) => format!(
            "controller {} alive (lease {} s left)\n",
            h.id, h.lease_ttl_s
        ),
        (None, true) => "controller none: no controller holds the plan (its lease expired); `ketama fleet plan run` without a file takes it over\n".into(),
        (None, false) => "controller none\n".into(),
    });
    out.push_str(&format!(
        "at stage {} of {}, step {}{}; failures {} of {} (failures_to_rollback), inconclusive {} of {} (max_inconclusive)\n",
        r.stage,
        r.stages.len(),
        r.step,
        r.hold_left_ms
            .map_or(String::new(), |ms| format!(", hold {:.1} s left", ms as f64 / 1000.0)),
        r.failures,
        r.failures_to_rollback,
        r.inconclusive,
        r.max_inconclusive
    ));
    if let Some(g) = r.gate {
        out.push_str(&format!(
            "gate: stage {g} waits for `ketama fleet plan approve`\n"
        ));
    }
    out.push_str(&match &r.mismatch {
        Some(m) => format!("rollout MISMATCH: {m}\n"),
        None => "rollout: the fleet is at what the plan wrote\n".into(),
    });
    out.push_str("stage  scopes            step   plan bp  fleet bp  last check\n");
    for st in &r.stages {
        out.push_str(&format!(
            "{:<6} {:<17} {:<6} {:>7}  {:>8}  {}\n",
            st.stage,
            st.scopes.join(","),
            format!("{}/{}", st.step, st.steps),
            st.plan_bp,
            st.fleet_bp,
            st.last_check.as_deref().unwrap_or("-")
        ));
    }
    out
}
