//! A rollout plan that steps itself: its text ([`spec`]), the rollouts
//! each step writes ([`RolloutDoc`]), the guards' verdict on the routers'
//! reports ([`guards`]), and the controller that drives a fleet through
//! etcd ([`controller`]), telling a webhook what it does ([`notify`]).
//!
//! Keys under `PREFIX/rollout-plan/` (they sort after `PREFIX/rollout`'s
//! watch range, so no router wakes for them): `spec` (the plan as JSON),
//! `state` ([`PlanState`]), `lock` (the running controller's id, under
//! its lease) and `command` (what `pause`, `resume` and `abort` ask).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub mod controller;
mod figures;
pub mod guards;
pub mod metrics;
pub mod notify;
pub mod prometheus;
pub mod spec;
mod state;
pub mod transition;
mod values;

pub use spec::{CompareWith, Guards, Notify, OnFailure, PlanError, PlanSpec, Stage};
pub use state::{Check, CheckVerdict, End, Phase, PlanState, Status, Streak, KEPT_CHECKS};

/// The rollout document (`PREFIX/rollout`, the router's `PUT /rollout`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutDoc {
    /// The share of keys on the new ring where no scope says otherwise.
    pub global_bp: u32,
    /// Per scope.
    #[serde(default)]
    pub scopes: BTreeMap<String, u32>,
}

/// The rollout a plan has written once `stage` is at `step` (`None`: the
/// stage not started), from the rollout at plan start: every earlier
/// stage at its last step.
pub fn rollout_at(
    spec: &PlanSpec,
    start: &RolloutDoc,
    stage: usize,
    step: Option<usize>,
) -> RolloutDoc {
    let mut doc = start.clone();
    let named: Vec<&str> = spec
        .stages
        .iter()
        .flat_map(|s| s.scopes.iter().map(String::as_str))
        .filter(|s| *s != "*")
        .collect();
    for (i, s) in spec.stages.iter().enumerate().take(stage + 1) {
        let bp = if i < stage {
            *s.steps_bp.last().unwrap_or(&0)
        } else {
            match step {
                Some(k) => s.steps_bp[k.min(s.steps_bp.len() - 1)],
                None => continue,
            }
        };
        if s.is_rest() {
            doc.global_bp = bp;
            for (name, v) in doc.scopes.iter_mut() {
                if !named.contains(&name.as_str()) {
                    *v = bp;
                }
            }
        } else {
            for sc in &s.scopes {
                doc.scopes.insert(sc.clone(), bp);
            }
        }
    }
    doc
}

/// The scopes a stage judges: its own, or for `*` every scope no other
/// stage names (`""` standing for routers without a scope).
pub fn stage_scopes(spec: &PlanSpec, stage: usize, known: &[String]) -> Vec<String> {
    let s = &spec.stages[stage];
    if !s.is_rest() {
        return s.scopes.clone();
    }
    let named: Vec<&String> = spec.stages.iter().flat_map(|s| &s.scopes).collect();
    known
        .iter()
        .filter(|k| !named.contains(k))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> PlanSpec {
        PlanSpec::parse(
            "[[stage]]\nscopes = [\"val1\"]\nsteps_bp = [100, 10000]\nhold = \"10m\"\n[[stage]]\nscopes = [\"*\"]\nsteps_bp = [5000, 10000]\nhold = \"1h\"\n[guards]\nmax_error_ratio = 0.01\n",
            "p.toml",
        )
        .unwrap()
    }

    #[test]
    fn each_step_writes_the_shares_of_every_stage_so_far() {
        let start = RolloutDoc {
            global_bp: 0,
            scopes: [("other".to_string(), 0), ("val1".to_string(), 0)].into(),
        };
        let s = spec();
        assert_eq!(rollout_at(&s, &start, 0, None), start);
        let a = rollout_at(&s, &start, 0, Some(0));
        assert_eq!(
            (a.global_bp, a.scopes["val1"], a.scopes["other"]),
            (0, 100, 0)
        );
        let b = rollout_at(&s, &start, 1, Some(0));
        assert_eq!(
            (b.global_bp, b.scopes["val1"], b.scopes["other"]),
            (5000, 10000, 5000)
        );
        let c = rollout_at(&s, &start, 1, Some(1));
        assert_eq!(
            (c.global_bp, c.scopes["val1"], c.scopes["other"]),
            (10000, 10000, 10000)
        );
        let known = vec!["val1".to_string(), "ams".to_string(), String::new()];
        assert_eq!(
            stage_scopes(&s, 1, &known),
            vec!["ams".to_string(), String::new()]
        );
    }
}
