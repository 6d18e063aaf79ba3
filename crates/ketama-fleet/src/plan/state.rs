//! A plan's progress ([`PlanState`]) as one [`Phase`] carrying only what
//! that phase needs, and as it is stored at `PREFIX/rollout-plan/state`
//! (the flat JSON `plan status --json` and the routers read: `status`,
//! `stage`, `step`, `gate`, `failures`, ...). Only
//! [`next`](super::transition::next) makes a new state; everyone else
//! reads it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{guards, rollout_at, PlanSpec, RolloutDoc};

/// Where a plan is, as stored and printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Measuring the baseline, or stepping.
    Running,
    /// Waiting for `resume`, `approve` or `abort`.
    Paused,
    /// Every stage at its last step.
    Completed,
    /// The guards failed and the plan's scopes went back to their start.
    RolledBack,
    /// Stopped by `abort`.
    Aborted,
}

impl Status {
    /// Whether the plan still has a controller's attention.
    pub fn active(self) -> bool {
        matches!(self, Status::Running | Status::Paused)
    }

    /// Its name, as `plan status` prints it.
    pub fn name(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Paused => "paused",
            Status::Completed => "completed",
            Status::RolledBack => "rolled_back",
            Status::Aborted => "aborted",
        }
    }
}

/// Checks in a row that did not pass, while a phase judges.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Streak {
    /// Failed checks in a row.
    pub failures: u32,
    /// Inconclusive checks in a row (`max_inconclusive` of them count as
    /// one failed check).
    pub inconclusive: u32,
}

/// How a plan ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// Every stage at its last step.
    Completed,
    /// The guards failed: the plan's scopes are back at their start.
    RolledBack,
    /// `ketama fleet plan abort`.
    Aborted,
}

/// Where a plan is, with what only that place needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Measuring the baseline before the first step; `refused` says why
    /// the last window could not be compared with.
    Baseline {
        /// Refused windows count as inconclusive checks.
        streak: Streak,
        /// Why the last window was refused.
        refused: Option<String>,
    },
    /// A step applied and held while the guards are checked.
    Holding {
        /// The step's index in the stage.
        step: usize,
        /// Checks in a row that did not pass.
        streak: Streak,
        /// When `promote` ended the hold: a check made since that passes
        /// advances.
        promoted_ms: Option<u64>,
    },
    /// Waiting at stage `gate`'s gate for `approve`, where the stage
    /// before left the plan (at its last step; the first stage's gate:
    /// at stage 0 before any step).
    Gated {
        /// The stage whose first step `approve` applies.
        gate: usize,
        /// The step applied in the plan's stage.
        step: Option<usize>,
        /// What to do, for the operator.
        why: String,
    },
    /// Waiting for `resume` or `abort`.
    Paused {
        /// The step applied (`None`: before the stage's first).
        step: Option<usize>,
        /// Why.
        why: String,
        /// The guards failed and the plan stepped one step back: the
        /// controller's run ends there.
        stepped_back: bool,
    },
    /// Over.
    Ended {
        /// How.
        end: End,
        /// The step it ended at.
        step: Option<usize>,
        /// Why, when not by completing.
        why: Option<String>,
    },
}

/// One check of the guards, as recorded in the state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// When, milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// The stage and step it judged (0-based).
    pub stage: usize,
    /// The step's index in the stage.
    pub step: usize,
    /// The figures it judged by.
    pub figures: guards::Figures,
    /// Passed, failed or inconclusive.
    pub verdict: CheckVerdict,
    /// Why it failed or was inconclusive.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}

/// A recorded check's verdict (stored as `pass`, `fail`, `inconclusive`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckVerdict {
    /// Every guard held.
    Pass,
    /// A guard failed.
    Fail,
    /// Too little to judge by.
    Inconclusive,
}

impl CheckVerdict {
    /// `pass`, `fail` or `inconclusive`.
    pub fn name(self) -> &'static str {
        match self {
            CheckVerdict::Pass => "pass",
            CheckVerdict::Fail => "fail",
            CheckVerdict::Inconclusive => "inconclusive",
        }
    }
}

impl std::fmt::Display for CheckVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Checks kept in the state.
pub const KEPT_CHECKS: usize = 200;

/// A plan's progress, stored at `PREFIX/rollout-plan/state`. Read it
/// through its methods; [`next`](super::transition::next) makes the next.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(into = "Stored", try_from = "Stored")]
pub struct PlanState {
    pub(crate) phase: Phase,
    /// The stage (0-based) being stepped, gated or ended in.
    pub(crate) stage: usize,
    /// When the current step (or the baseline) began, ms since the epoch.
    pub(crate) since_ms: u64,
    pub(crate) started_ms: u64,
    /// The rollout when the plan began (rollback returns to it).
    pub(crate) start: RolloutDoc,
    /// Per scope (`""`: routers without one), the hits and origin
    /// contacts over the baseline window.
    pub(crate) baseline: Option<BTreeMap<String, (u64, u64)>>,
    /// Newest last, at most [`KEPT_CHECKS`].
    pub(crate) checks: Vec<Check>,
    pub(crate) owner: Option<String>,
    /// The rollout the plan wrote last (`None` in states stored before
    /// it was recorded: see [`PlanState::intended`]).
    pub(crate) written: Option<RolloutDoc>,
}

impl PlanState {
    /// A plan begun now by controller `owner`, from the fleet's rollout
    /// `start`: measuring its baseline.
    pub fn begin(start: RolloutDoc, owner: &str, now_ms: u64) -> PlanState {
        PlanState {
            phase: Phase::Baseline {
                streak: Streak::default(),
                refused: None,
            },
            stage: 0,
            since_ms: now_ms,
            started_ms: now_ms,
            written: Some(start.clone()),
            start,
            baseline: None,
            checks: Vec::new(),
            owner: Some(owner.to_string()),
        }
    }

    /// Its phase.
    pub fn phase(&self) -> &Phase {
        &self.phase
    }

    /// Its status, as stored.
    pub fn status(&self) -> Status {
        match &self.phase {
            Phase::Baseline { .. } | Phase::Holding { .. } => Status::Running,
            Phase::Gated { .. } | Phase::Paused { .. } => Status::Paused,
            Phase::Ended { end, .. } => match end {
                End::Completed => Status::Completed,
                End::RolledBack => Status::RolledBack,
                End::Aborted => Status::Aborted,
            },
        }
    }

    /// Whether a controller steps it (not paused, not ended).
    pub fn running(&self) -> bool {
        self.status() == Status::Running
    }

    /// The stage (0-based).
    pub fn stage(&self) -> usize {
        self.stage
    }

    /// The step applied in the stage; `None` before its first.
    pub fn step(&self) -> Option<usize> {
        match &self.phase {
            Phase::Baseline { .. } => None,
            Phase::Holding { step, .. } => Some(*step),
            Phase::Gated { step, .. } | Phase::Paused { step, .. } | Phase::Ended { step, .. } => {
                *step
            }
        }
    }

    /// The stage whose gate the plan waits at.
    pub fn gate(&self) -> Option<usize> {
        match self.phase {
            Phase::Gated { gate, .. } => Some(gate),
            _ => None,
        }
    }

    /// Why it paused or ended (or why the last baseline was refused).
    pub fn reason(&self) -> Option<&str> {
        match &self.phase {
            Phase::Baseline { refused, .. } => refused.as_deref(),
            Phase::Holding { .. } => None,
            Phase::Gated { why, .. } | Phase::Paused { why, .. } => Some(why),
            Phase::Ended { why, .. } => why.as_deref(),
        }
    }

    /// Checks in a row that did not pass.
    pub fn streak(&self) -> Streak {
        match &self.phase {
            Phase::Baseline { streak, .. } | Phase::Holding { streak, .. } => *streak,
            _ => Streak::default(),
        }
    }

    /// When `promote` ended the current step's hold.
    pub fn promoted_ms(&self) -> Option<u64> {
        match &self.phase {
            Phase::Holding { promoted_ms, .. } => *promoted_ms,
            _ => None,
        }
    }

    /// When the current step (or the baseline) began.
    pub fn since_ms(&self) -> u64 {
        self.since_ms
    }

    /// When the plan began.
    pub fn started_ms(&self) -> u64 {
        self.started_ms
    }

    /// The rollout when the plan began.
    pub fn start(&self) -> &RolloutDoc {
        &self.start
    }

    /// The baseline's hits and origin contacts per scope, once measured.
    pub fn baseline(&self) -> Option<&BTreeMap<String, (u64, u64)>> {
        self.baseline.as_ref()
    }

    /// The last checks, newest last.
    pub fn checks(&self) -> &[Check] {
        &self.checks
    }

    /// The controller running it, when one does.
    pub fn owner(&self) -> Option<&str> {
        self.owner.as_deref()
    }

    /// The rollout the plan wrote last: what the fleet should be at (for
    /// states stored before it was recorded, the one its stage and step
    /// imply).
    pub fn intended(&self, spec: &PlanSpec) -> RolloutDoc {
        self.written
            .clone()
            .unwrap_or_else(|| rollout_at(spec, &self.start, self.stage, self.step()))
    }

    /// What `spec` says of this state that must hold, or what does not:
    /// the stage and step exist, a running plan's rollout is its step's,
    /// at most [`KEPT_CHECKS`] checks. For tests and fuzz targets.
    pub fn check(&self, spec: &PlanSpec) -> Result<(), String> {
        let Some(stage) = spec.stages.get(self.stage) else {
            return Err(format!("stage {} of {}", self.stage, spec.stages.len()));
        };
        if let Some(g) = self.gate() {
            // Where the stage before left the plan.
            let at = if g == 0 { (0, false) } else { (g - 1, true) };
            if g >= spec.stages.len() || (self.stage, self.step().is_some()) != at {
                return Err(format!(
                    "gate {g} at stage {} step {:?}",
                    self.stage,
                    self.step()
                ));
            }
        }
        if let Some(k) = self.step() {
            if k >= stage.steps_bp.len() {
                return Err(format!("step {k} of {}", stage.steps_bp.len()));
            }
        }
        if matches!(self.phase, Phase::Baseline { .. }) && self.stage != 0 {
            return Err(format!("a baseline at stage {}", self.stage));
        }
        let at_step = rollout_at(spec, &self.start, self.stage, self.step());
        if self.running() && self.intended(spec) != at_step {
            return Err(format!(
                "running at stage {} step {:?} with {:?} written, not {at_step:?}",
                self.stage,
                self.step(),
                self.written
            ));
        }
        if self.checks.len() > KEPT_CHECKS {
            return Err(format!("{} checks kept", self.checks.len()));
        }
        Ok(())
    }
}

/// The state as stored: flat, as before phases had their own types.
#[derive(Serialize, Deserialize)]
struct Stored {
    status: Status,
    stage: usize,
    step: Option<usize>,
    since_ms: u64,
    started_ms: u64,
    start: RolloutDoc,
    baseline: Option<BTreeMap<String, (u64, u64)>>,
    checks: Vec<Check>,
    failures: u32,
    owner: Option<String>,
    reason: Option<String>,
    #[serde(default)]
    inconclusive: u32,
    #[serde(default)]
    gate: Option<usize>,
    #[serde(default)]
    promoted_ms: Option<u64>,
    #[serde(default)]
    written: Option<RolloutDoc>,
    /// Paused after stepping back on failing guards.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    stepped_back: bool,
}

impl From<PlanState> for Stored {
    fn from(s: PlanState) -> Stored {
        let streak = s.streak();
        Stored {
            status: s.status(),
            step: s.step(),
            gate: s.gate(),
            promoted_ms: s.promoted_ms(),
            reason: s.reason().map(str::to_string),
            stepped_back: matches!(
                s.phase,
                Phase::Paused {
                    stepped_back: true,
                    ..
                }
            ),
            failures: streak.failures,
            inconclusive: streak.inconclusive,
            stage: s.stage,
            since_ms: s.since_ms,
            started_ms: s.started_ms,
            start: s.start,
            baseline: s.baseline,
            checks: s.checks,
            owner: s.owner,
            written: s.written,
        }
    }
}

impl TryFrom<Stored> for PlanState {
    type Error = String;

    fn try_from(s: Stored) -> Result<PlanState, String> {
        let streak = Streak {
            failures: s.failures,
            inconclusive: s.inconclusive,
        };
        let phase = match (s.status, s.step, s.gate) {
            (Status::Running, _, Some(g)) => {
                return Err(format!("a running plan stored waiting at stage {g}'s gate"))
            }
            (Status::Running, None, None) => Phase::Baseline {
                streak,
                refused: s.reason,
            },
            (Status::Running, Some(step), None) => Phase::Holding {
                step,
                streak,
                promoted_ms: s.promoted_ms,
            },
            (Status::Paused, step, Some(gate)) => Phase::Gated {
                gate,
                step,
                why: s.reason.unwrap_or_default(),
            },
            (Status::Paused, step, None) => Phase::Paused {
                step,
                why: s.reason.unwrap_or_default(),
                stepped_back: s.stepped_back,
            },
            (status, step, _) => Phase::Ended {
                end: match status {
                    Status::Completed => End::Completed,
                    Status::RolledBack => End::RolledBack,
                    _ => End::Aborted,
                },
                step,
                why: s.reason,
            },
        };
        Ok(PlanState {
            phase,
            stage: s.stage,
            since_ms: s.since_ms,
            started_ms: s.started_ms,
            start: s.start,
            baseline: s.baseline,
            checks: s.checks,
            owner: s.owner,
            written: s.written,
        })
    }
}
