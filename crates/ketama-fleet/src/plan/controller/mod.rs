//! The controller: drives a fleet through a plan, one etcd transaction
//! per step, and stops where the plan says. It measures (the baseline,
//! the guards' figures: `measure.rs`), reads commands (`commands.rs`) and
//! hands each as an event to the plan's transition
//! ([`transition::apply`]); the state it holds is always the one etcd
//! holds, replaced only once its transaction succeeded.
//!
//! It holds `PREFIX/rollout-plan/lock` under a lease, so two controllers
//! never drive one fleet and one started after another died (its lease
//! expired) takes over from the stored state: it waits out the dead
//! one's lease (at most the TTL it was granted, 30 s at most) rather than
//! fail. Every write of the rollout
//! is one transaction with the state, on two conditions: the lock still
//! holds this controller's id, and `PREFIX/rollout` is still at the
//! revision read before (so a step is never applied twice, never skipped,
//! and a hand-written rollout is never overwritten). A rollout that is not
//! what the plan wrote pauses the plan, saying so. After an etcd error the
//! controller reads the state again before it goes on: a transaction
//! whose answer was lost may have been applied.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

mod commands;
mod measure;

use super::notify::Notifier;
use super::prometheus::Prometheus;
use super::transition::{self, Applied, Event, Write};
use super::{End, Phase, PlanSpec, PlanState, RolloutDoc};
use crate::etcd::{Client, Compare, EtcdError};
use crate::{registrations, Keys, Registration};

pub use super::transition::Command;

/// How a controller's run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every stage reached its last step.
    Completed,
    /// The guards failed: the plan's scopes are back at their start.
    RolledBack,
    /// The guards failed: one step down, the plan left paused.
    SteppedBack,
    /// `ketama fleet plan abort`.
    Aborted,
}

/// Why a controller could not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The plan's text or the fleet refused it.
    #[error(transparent)]
    Plan(#[from] super::PlanError),
    /// etcd failed at start.
    #[error(transparent)]
    Etcd(#[from] EtcdError),
    /// Another plan is running or paused.
    #[error("a plan is already {status} (since stage {stage}): see `ketama fleet plan status`; abort it first, or run `ketama fleet plan run` without a file to take it over")]
    Active {
        /// Its status.
        status: &'static str,
        /// Its stage, 1-based.
        stage: usize,
    },
    /// Nothing to take over.
    #[error("no active plan is stored: start one with `ketama fleet plan run PLAN.toml`")]
    NoPlan,
    /// Another controller holds the lock and keeps its lease alive.
    #[error("controller {owner:?} runs the plan: it still held {key} after its lease's TTL (a live controller renews it); stop it first, or steer it with `ketama fleet plan pause|resume|abort`")]
    Locked {
        /// Its id.
        owner: String,
        /// The lock's key.
        key: String,
    },
    /// Prometheus did not answer at start.
    #[error("{0}")]
    Prometheus(String),
    /// The lock was lost (its lease expired, or someone deleted it).
    #[error("this controller lost the plan's lock: another may run it now; see `ketama fleet plan status`")]
    LostLock,
}

/// The shortest lease a controller holds the plan's lock under.
pub const LEASE_MIN_MS: u64 = 10_000;

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A running controller.
pub struct Controller<'a> {
    client: &'a Client,
    keys: &'a Keys,
    id: String,
    lease: i64,
    ttl: Duration,
    renewed: Instant,
    spec: PlanSpec,
    state: PlanState,
    /// Registrations at the last check (or when the baseline began).
    before: Option<(Instant, Vec<Registration>)>,
    last_check: Option<Instant>,
    /// Where the figures come from instead of the registrations.
    prometheus: Option<Prometheus>,
    notifier: Option<Notifier>,
    log: &'a mut dyn FnMut(&str),
}

fn doc_of(value: Option<&[u8]>) -> RolloutDoc {
    value
        .and_then(|v| serde_json::from_slice(v).ok())
        .unwrap_or_default()
}

impl<'a> Controller<'a> {
    /// Takes the lock and stores `plan` (its text and file name) as the
    /// active plan, or with `None` takes over the stored active plan.
    /// `id` names this controller in the lock and the state; the guards
    /// read `prometheus` when given, else the routers' reports; `log` gets
    /// one line per event.
    pub fn start(
        client: &'a Client,
        keys: &'a Keys,
        plan: Option<(&str, &str)>,
        id: String,
        prometheus: Option<Prometheus>,
        log: &'a mut dyn FnMut(&str),
    ) -> Result<Controller<'a>, RunError> {
        let parsed = match plan {
            Some((text, file)) => Some((PlanSpec::parse(text, file)?, text, file)),
            None => None,
        };
        let (stored_spec, stored_state) = read_plan(client, keys)?;
        if let (Some((_, _, _)), Some(s)) = (&parsed, &stored_state) {
            if s.status().active() {
                return Err(RunError::Active {
                    status: s.status().name(),
                    stage: s.stage() + 1,
                });
            }
        }
        let interval = parsed
            .as_ref()
            .map(|(s, _, _)| s.guards.interval_ms)
            .or(stored_spec.as_ref().map(|s| s.guards.interval_ms))
            .unwrap_or(1000);
        // At least 10 s: a controller stalled for a few seconds (a loaded
        // machine) keeps its plan; one that died is waited out that long.
        let ttl = Duration::from_millis((interval * 3).clamp(LEASE_MIN_MS, 30_000));
        let lease = client.grant(ttl.as_secs().max(1) as i64)?;
        if let Err(e) = take_lock(client, keys, &id, lease, log) {
            let _ = client.revoke(lease);
            return Err(e);
        }
        let result = Self::take(
            client,
            keys,
            parsed,
            stored_spec,
            stored_state,
            &id,
            prometheus.as_ref(),
        );
        let (spec, state) = match result {
            Ok(x) => x,
            Err(e) => {
                let _ = client.revoke(lease);
                return Err(e);
            }
        };
        let notifier = spec.notify.as_ref().map(|n| Notifier::start(&n.webhook));
        let mut c = Controller {
            client,
            keys,
            id,
            lease,
            ttl,
            renewed: Instant::now(),
            spec,
            state,
            before: None,
            last_check: None,
            notifier,
            prometheus,
            log,
        };
        if plan.is_none() {
            let id = c.id.clone();
            if let Err(e) = c.apply(Event::TakenOver { id }, 0) {
                let _ = client.revoke(lease);
                return Err(e);
            }
        }
        let (stage, step) = (c.state.stage() + 1, c.state.step().map_or(0, |s| s + 1));
        let what = format!(
            "controller {} runs the plan: {} at stage {stage}, step {step}",
            c.id,
            c.state.status().name()
        );
        c.event("started", what);
        Ok(c)
    }

    fn take(
        client: &Client,
        keys: &Keys,
        parsed: Option<(PlanSpec, &str, &str)>,
        stored_spec: Option<PlanSpec>,
        stored_state: Option<PlanState>,
        id: &str,
        prometheus: Option<&Prometheus>,
    ) -> Result<(PlanSpec, PlanState), RunError> {
        let lock = keys.plan_lock();
        match parsed {
            Some((spec, text, file)) => {
                let regs = registrations(client, keys)?;
                let fleet: Vec<(Option<String>, Option<u64>)> = regs
                    .iter()
                    .map(|r| (r.scope.clone(), r.report.as_ref().map(|x| x.interval_ms)))
                    .collect();
                spec.check_fleet(text, file, &fleet, prometheus.is_none())?;
                let mut scrape = None;
                if let Some(p) = prometheus {
                    let with = p.scopes().map_err(RunError::Prometheus)?;
                    let every = p.scrape_interval().map_err(RunError::Prometheus)?;
                    scrape = every.map(|d| d.as_millis() as u64);
                    spec.check_prometheus(text, file, p.url(), &with, scrape)?;
                }
                super::metrics::check_fleet(
                    &spec.guards.metrics,
                    text,
                    file,
                    prometheus.is_some(),
                    scrape,
                )?;
                let (rollout, _) = client.get(&keys.rollout())?;
                let start = doc_of(rollout.as_ref().map(|kv| &kv.value[..]));
                let state = PlanState::begin(start, id, now_ms());
                let spec_json = serde_json::to_vec(&spec).unwrap_or_default();
                let state_json = serde_json::to_vec(&state).unwrap_or_default();
                let (sk, tk, ck) = (keys.plan_spec(), keys.plan_state(), keys.plan_command());
                let done = client.txn(
                    &[Compare::Value(&lock, id.as_bytes())],
                    &[(&sk, &spec_json, None), (&tk, &state_json, None)],
                    &[&ck],
                )?;
                done.ok_or(RunError::LostLock)?;
                Ok((spec, state))
            }
            None => {
                let (Some(spec), Some(state)) = (stored_spec, stored_state) else {
                    return Err(RunError::NoPlan);
                };
                if !state.status().active() {
                    return Err(RunError::NoPlan);
                }
                Ok((spec, state))
            }
        }
    }

    /// The lease expired while this controller was stalled: the lock is
    /// taken again under a new lease if nobody took it meanwhile (every
    /// write is conditioned on the lock's value, so none was lost or
    /// doubled), else the plan is another controller's.
    fn retake(&mut self) -> Result<(), RunError> {
        let lease = self.client.grant(self.ttl.as_secs().max(1) as i64)?;
        let lock = self.keys.plan_lock();
        let took = self.client.txn(
            &[Compare::ModRevision(&lock, 0)],
            &[(&lock, self.id.as_bytes(), Some(lease))],
            &[],
        )?;
        if took.is_none() {
            let _ = self.client.revoke(lease);
            return Err(RunError::LostLock);
        }
        self.lease = lease;
        self.say(format!(
            "this controller's lease expired while it was stalled; nobody took the plan: it holds {lock} again"
        ));
        Ok(())
    }

    fn say(&mut self, what: String) {
        (self.log)(&what);
    }

    /// Logs `message` and sends it to the plan's webhook as `kind`.
    fn event(&mut self, kind: &str, message: String) {
        (self.log)(&message);
        let Some(n) = &mut self.notifier else {
            return;
        };
        let s = &self.state;
        n.send(serde_json::json!({
            "event": kind,
            "status": s.status().name(),
            "stage": s.stage() + 1,
            "step": s.step().map_or(0, |k| k + 1),
            "message": message,
            "at_ms": now_ms(),
            "rollout": s.intended(&self.spec),
            "reason": s.reason(),
        }));
    }

    /// Runs `event` through the plan's transition and writes the new
    /// state (with the rollout it asks for) in one transaction, on the
    /// lock and on the rollout's revision `at`: the state is kept only
    /// once written. Then the log and the webhook hear what happened.
    fn apply(&mut self, event: Event, at: i64) -> Result<Applied, RunError> {
        let (client, keys, id) = (self.client, self.keys, self.id.as_str());
        let applied = transition::apply(
            &self.spec,
            &mut self.state,
            event,
            now_ms(),
            |state, rollout| commit(client, keys, id, state, rollout.map(|d| (d, at))),
        )?;
        let writes = match &applied {
            Applied::Unchanged => return Ok(applied),
            Applied::Lost(writes) => {
                for w in writes {
                    if let Write::Notify { message, .. } | Write::Log(message) = w {
                        self.say(format!("not written (the rollout changed after revision {at}; the next round reads it again): {message}"));
                    }
                }
                return Ok(applied);
            }
            Applied::Kept(writes) => writes,
        };
        for w in writes {
            match w {
                Write::Rollout(_) => {
                    // A new step's window: the checks measure from here
                    // (unread, the next check only starts the window).
                    let now = registrations(self.client, self.keys).ok();
                    self.before = now.map(|n| (Instant::now(), n));
                    self.last_check = None;
                }
                Write::Notify { kind, message } => self.event(kind, message.clone()),
                Write::Log(line) => self.say(line.clone()),
            }
        }
        Ok(applied)
    }

    /// How the run ends, once the state says it does.
    fn outcome(&self) -> Option<Outcome> {
        match self.state.phase() {
            Phase::Ended { end, .. } => Some(match end {
                End::Completed => Outcome::Completed,
                End::RolledBack => Outcome::RolledBack,
                End::Aborted => Outcome::Aborted,
            }),
            Phase::Paused {
                stepped_back: true, ..
            } => Some(Outcome::SteppedBack),
            _ => None,
        }
    }

    /// Runs the plan until it ends; etcd errors are retried (the state is
    /// read again after each).
    pub fn run(mut self) -> Result<Outcome, RunError> {
        let mut attempt = 0u32;
        loop {
            match self.round() {
                Ok(Some(outcome)) => {
                    let _ = self.client.revoke(self.lease);
                    return Ok(outcome);
                }
                Ok(None) => attempt = 0,
                Err(RunError::Etcd(e)) => {
                    attempt += 1;
                    self.say(format!("etcd: {e}; retrying"));
                    std::thread::sleep(Duration::from_millis((100u64 << attempt.min(5)).min(3000)));
                    // A transaction whose answer was lost may have been
                    // applied: what etcd holds is the state.
                    if let Ok((_, Some(s))) = read_plan(self.client, self.keys) {
                        if (s.stage(), s.step()) != (self.state.stage(), self.state.step()) {
                            self.before = None;
                        }
                        self.state = s;
                    }
                    continue;
                }
                Err(e) => {
                    let _ = self.client.revoke(self.lease);
                    return Err(e);
                }
            }
            std::thread::sleep(Duration::from_millis(
                self.spec.guards.interval_ms.clamp(20, 250),
            ));
        }
    }

    /// One round: the lease, commands, the rollout's integrity, then the
    /// baseline, a check or a step when due. `Some` when the run ends.
    fn round(&mut self) -> Result<Option<Outcome>, RunError> {
        if self.renewed.elapsed() >= self.ttl / 3 {
            if self.client.keep_alive(self.lease)? == 0 {
                self.retake()?;
            }
            self.renewed = Instant::now();
        }
        if let Some(n) = &mut self.notifier {
            for w in n.warnings() {
                (self.log)(&w);
            }
        }
        let (rollout, _) = self.client.get(&self.keys.rollout())?;
        let at = rollout.as_ref().map_or(0, |kv| kv.mod_revision);
        let current = doc_of(rollout.as_ref().map(|kv| &kv.value[..]));
        if let Some(acted) = self.command(at)? {
            // What the round read is out of date: the next reads again.
            return Ok(acted);
        }
        if !self.state.running() {
            return Ok(None);
        }
        if current != self.state.intended(&self.spec) {
            self.apply(Event::HandWritten { revision: at }, at)?;
            return Ok(self.outcome());
        }
        match self.state.phase() {
            Phase::Baseline { .. } => self.baseline(at)?,
            Phase::Holding { .. } => {
                let g = &self.spec.guards;
                let elapsed = now_ms().saturating_sub(self.state.since_ms());
                let due = self
                    .last_check
                    .is_none_or(|t| t.elapsed() >= Duration::from_millis(g.interval_ms));
                if elapsed >= g.warmup_ms && due {
                    self.check(at)?;
                }
                if self.state.running() {
                    self.apply(Event::Tick, at)?;
                }
            }
            _ => {}
        }
        Ok(self.outcome())
    }
}

/// Writes `state` (with `rollout`, when given) in one transaction, on the
/// lock holding `id` and on the rollout's revision `at`. `Ok(false)`: the
/// rollout changed meanwhile (nothing written).
fn commit(
    client: &Client,
    keys: &Keys,
    id: &str,
    state: &PlanState,
    rollout: Option<(&RolloutDoc, i64)>,
) -> Result<bool, RunError> {
    let (lock, sk, rk) = (keys.plan_lock(), keys.plan_state(), keys.rollout());
    let body = serde_json::to_vec(state).unwrap_or_default();
    let doc = rollout.map(|(d, _)| serde_json::to_vec(d).unwrap_or_default());
    let mut compares = vec![Compare::Value(&lock, id.as_bytes())];
    let mut puts: Vec<(&str, &[u8], Option<i64>)> = vec![(&sk, &body, None)];
    if let (Some((_, at)), Some(doc)) = (rollout, &doc) {
        compares.push(Compare::ModRevision(&rk, at));
        puts.push((&rk, doc, None));
    }
    if client.txn(&compares, &puts, &[])?.is_some() {
        return Ok(true);
    }
    let holder = client.get(&lock)?.0;
    if holder.is_none_or(|kv| kv.value != id.as_bytes()) {
        return Err(RunError::LostLock);
    }
    Ok(false)
}

/// Takes the plan's lock under `lease`. Held by another controller: waits
/// while its lease runs out (a dead controller's expires within the TTL
/// it was granted; a live one renews it, and then this fails).
fn take_lock(
    client: &Client,
    keys: &Keys,
    id: &str,
    lease: i64,
    log: &mut dyn FnMut(&str),
) -> Result<(), RunError> {
    let lock = keys.plan_lock();
    let mut deadline: Option<Instant> = None;
    loop {
        let took = client.txn(
            &[Compare::ModRevision(&lock, 0)],
            &[(&lock, id.as_bytes(), Some(lease))],
            &[],
        )?;
        if took.is_some() {
            return Ok(());
        }
        let Some(kv) = client.get(&lock)?.0 else {
            continue; // let go meanwhile
        };
        let owner = String::from_utf8_lossy(&kv.value).into_owned();
        let left = match kv.lease {
            0 => None,
            l => client.lease_ttl(l)?,
        };
        let Some((left, granted)) = left else {
            continue; // its lease just expired: the key goes with it
        };
        let until = *deadline.get_or_insert_with(|| {
            let wait = Duration::from_secs(granted.max(left).max(1) as u64 + 2);
            log(&format!(
                "controller {owner} holds {lock}; waiting up to {} s for its lease to expire ({left} s left of {granted} s; a live controller renews it)",
                wait.as_secs()
            ));
            Instant::now() + wait
        });
        if Instant::now() >= until {
            return Err(RunError::Locked { owner, key: lock });
        }
        std::thread::sleep(Duration::from_millis(200));
        // This controller's own lease must outlive the wait.
        if client.keep_alive(lease)? == 0 {
            return Err(RunError::LostLock);
        }
    }
}

/// The stored plan and its state, if any.
pub fn read_plan(
    client: &Client,
    keys: &Keys,
) -> Result<(Option<PlanSpec>, Option<PlanState>), EtcdError> {
    let spec = client
        .get(&keys.plan_spec())?
        .0
        .and_then(|kv| serde_json::from_slice(&kv.value).ok());
    let state = client
        .get(&keys.plan_state())?
        .0
        .and_then(|kv| serde_json::from_slice(&kv.value).ok());
    Ok((spec, state))
}
