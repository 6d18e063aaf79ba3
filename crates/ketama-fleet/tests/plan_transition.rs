//! The plan's transition (`plan::transition::{next, apply}`) under random
//! sequences of events, lost races, lost answers, controllers killed and
//! taken over, and operators' commands, against a model of etcd's
//! transaction (the lock's value and the rollout's revision, as the
//! controller conditions them): memory and the store never disagree, every
//! stored state passes `PlanState::check`, and once the world is calm the
//! plan always ends or waits for an operator.

use ketama_fleet::plan::guards::{Figures, Verdict};
use ketama_fleet::plan::transition::{apply, next, Applied, Command, Event, Write};
use ketama_fleet::plan::{Phase, PlanSpec, PlanState, RolloutDoc, Status};
use proptest::prelude::*;

fn spec(on_failure: &str, gate: bool) -> PlanSpec {
    let text = format!(
        "[[stage]]\nscopes = [\"val1\"]\nsteps_bp = [100, 5000, 10000]\nhold = \"1s\"\n\n[[stage]]\nscopes = [\"*\"]\nsteps_bp = [5000, 10000]\nhold = \"2s\"\napprove = {gate}\n\n[guards]\ninterval = \"300ms\"\nwarmup = \"300ms\"\nmax_error_ratio = 0.01\nfailures_to_rollback = 2\nmax_inconclusive = 3\non_failure = \"{on_failure}\"\n"
    );
    PlanSpec::parse(&text, "plan.toml").unwrap()
}

/// etcd as the controller's transactions see it.
struct Store {
    state: PlanState,
    rollout: RolloutDoc,
    revision: i64,
    /// The controller holding the lock (its generation).
    lock: Option<u32>,
}

/// What the next transaction meets.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fate {
    Clean,
    /// Someone writes the rollout between the round's read and the
    /// transaction.
    Race,
    /// Applied, but the answer is lost (the controller sees an error).
    AnswerLost,
}

fn hand_doc(n: i64) -> RolloutDoc {
    RolloutDoc {
        global_bp: (n as u32 * 37) % 10_001,
        scopes: [("val1".to_string(), 2500)].into(),
    }
}

impl Store {
    /// The controller `generation`'s transaction: the state (and the
    /// rollout) on the lock and, with a rollout, on its revision `at`.
    fn commit(
        &mut self,
        generation: u32,
        at: i64,
        fate: Fate,
        state: &PlanState,
        rollout: Option<&RolloutDoc>,
    ) -> Result<bool, String> {
        if self.lock != Some(generation) {
            return Err("lost the lock".into());
        }
        if fate == Fate::Race {
            self.revision += 1;
            self.rollout = hand_doc(self.revision);
        }
        if rollout.is_some() && self.revision != at {
            return Ok(false);
        }
        self.state = state.clone();
        if let Some(d) = rollout {
            self.revision += 1;
            self.rollout = d.clone();
        }
        match fate {
            Fate::AnswerLost => Err("answer lost".into()),
            _ => Ok(true),
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Check(u8),
    Tick(u64),
    Baseline(bool),
    Command(Command),
    HandWrite,
    Fate(Fate),
    Kill,
}

fn command() -> impl Strategy<Value = Command> {
    prop_oneof![
        Just(Command::Pause),
        Just(Command::Resume),
        Just(Command::Approve),
        Just(Command::Promote),
        any::<bool>().prop_map(|rollback| Command::Abort { rollback }),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..3).prop_map(Op::Check),
        4 => (0u64..2500).prop_map(Op::Tick),
        2 => any::<bool>().prop_map(Op::Baseline),
        2 => command().prop_map(Op::Command),
        1 => Just(Op::HandWrite),
        2 => prop_oneof![Just(Fate::Race), Just(Fate::AnswerLost)].prop_map(Op::Fate),
        1 => Just(Op::Kill),
    ]
}

fn verdict(v: u8) -> Verdict {
    match v {
        0 => Verdict::Pass,
        1 => Verdict::Fail(vec!["error ratio 0.2 above max_error_ratio 0.01".into()]),
        _ => Verdict::Inconclusive(vec!["too few requests".into()]),
    }
}

/// A controller in the model: its generation and what it holds in memory.
struct World {
    spec: PlanSpec,
    store: Store,
    controller: Option<(u32, PlanState)>,
    generations: u32,
    now_ms: u64,
    fate: Fate,
}

impl World {
    fn new(spec: PlanSpec) -> World {
        let start = RolloutDoc::default();
        let state = PlanState::begin(start.clone(), "c1", 1_000);
        World {
            spec,
            store: Store {
                state: state.clone(),
                rollout: start,
                revision: 1,
                lock: Some(1),
            },
            controller: Some((1, state)),
            generations: 1,
            now_ms: 1_000,
            fate: Fate::Clean,
        }
    }

    /// One event through the controller's `apply`, on the revision the
    /// round read; an error makes it read the stored state again, as the
    /// controller's run loop does.
    fn feed(&mut self, event: Event) -> Result<Applied, String> {
        let Some((generation, memory)) = &mut self.controller else {
            return Ok(Applied::Unchanged);
        };
        let (generation, at, fate) = (*generation, self.store.revision, self.fate);
        self.fate = Fate::Clean;
        let store = &mut self.store;
        let r = apply(&self.spec, memory, event, self.now_ms, |s, r| {
            store.commit(generation, at, fate, s, r)
        });
        if r.is_err() {
            *memory = self.store.state.clone();
        }
        r
    }

    /// What a controller's round does first: a running plan whose rollout
    /// is not what it wrote pauses.
    fn look(&mut self) {
        let running = self.controller.as_ref().is_some_and(|(_, s)| s.running());
        let intended = self.store.state.intended(&self.spec);
        if running && self.store.rollout != intended {
            let _ = self.feed(Event::HandWritten {
                revision: self.store.revision,
            });
        }
    }

    /// A new controller takes over once the old one's lease is gone.
    fn take_over(&mut self) {
        if self.controller.is_some() || !self.store.state.status().active() {
            return;
        }
        self.generations += 1;
        let generation = self.generations;
        self.store.lock = Some(generation);
        self.controller = Some((generation, self.store.state.clone()));
        let id = format!("c{generation}");
        let _ = self.feed(Event::TakenOver { id });
    }

    fn step(&mut self, op: Op) {
        match op {
            Op::Check(v) => {
                self.look();
                let figures = Figures::default();
                let _ = self.feed(Event::Checked {
                    figures,
                    verdict: verdict(v),
                });
            }
            Op::Tick(ms) => {
                self.now_ms += ms;
                self.look();
                let _ = self.feed(Event::Tick);
            }
            Op::Baseline(ok) => {
                self.look();
                let _ = self.feed(if ok {
                    Event::BaselineMeasured {
                        baseline: Some(Default::default()),
                        note: "measured".into(),
                    }
                } else {
                    Event::BaselineRefused {
                        why: "too few requests".into(),
                    }
                });
            }
            Op::Command(c) if self.controller.is_some() => {
                let _ = self.feed(Event::Command(c));
            }
            Op::Command(c) => {
                // `ketama fleet plan pause|abort` with no controller: on
                // the condition that no lock is held.
                let mut state = self.store.state.clone();
                let store = &mut self.store;
                let _ = apply(
                    &self.spec,
                    &mut state,
                    Event::Unowned(c),
                    self.now_ms,
                    |s, r| {
                        if store.lock.is_some() {
                            return Ok::<_, String>(false);
                        }
                        store.state = s.clone();
                        if let Some(d) = r {
                            store.revision += 1;
                            store.rollout = d.clone();
                        }
                        Ok(true)
                    },
                );
                assert_eq!(state, self.store.state, "the CLI keeps what it wrote");
                self.take_over();
            }
            Op::HandWrite => {
                self.store.revision += 1;
                self.store.rollout = hand_doc(self.store.revision);
            }
            Op::Fate(f) => self.fate = f,
            Op::Kill => {
                self.controller = None;
                self.store.lock = None;
            }
        }
    }

    fn agree(&self) -> Result<(), TestCaseError> {
        if let Some((_, memory)) = &self.controller {
            prop_assert_eq!(memory, &self.store.state, "memory and etcd disagree");
        }
        let checked = self.store.state.check(&self.spec);
        prop_assert!(checked.is_ok(), "{:?}", checked);
        // The state survives its own storing.
        let json = serde_json::to_vec(&self.store.state).unwrap();
        let back: PlanState = serde_json::from_slice(&json).unwrap();
        prop_assert_eq!(&back, &self.store.state);
        Ok(())
    }

    /// With no more races and every check passing, rounds until the plan
    /// ends or waits for an operator: true when it did.
    fn settles(&mut self) -> bool {
        self.fate = Fate::Clean;
        self.take_over();
        for _ in 0..100 {
            self.look();
            let Some((_, s)) = &self.controller else {
                return !self.store.state.running();
            };
            match s.phase() {
                Phase::Baseline { .. } => self.step(Op::Baseline(true)),
                Phase::Holding { .. } => {
                    self.step(Op::Check(0));
                    self.step(Op::Tick(2_000));
                }
                _ => return true,
            }
        }
        false
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn memory_and_etcd_never_disagree_and_the_plan_ends_or_waits(
        ops in proptest::collection::vec(op(), 0..80),
        on_failure in prop_oneof![Just("rollback"), Just("step_back"), Just("pause")],
        gate in any::<bool>(),
    ) {
        let mut w = World::new(spec(on_failure, gate));
        for op in ops {
            w.step(op);
            w.agree()?;
        }
        prop_assert!(w.settles(), "stuck: {:?}", w.store.state);
        w.agree()?;
        let s = &w.store.state;
        match s.status() {
            Status::Paused => prop_assert!(s.reason().is_some(), "paused without saying why"),
            Status::Running => prop_assert!(false, "still running: {:?}", s),
            _ => {}
        }
    }
}

/// The race the controller lost before every state had one owner: the
/// rollback's transaction loses to a hand-written rollout. The state in
/// memory stays the stored one (running), and the next round pauses the
/// plan, saying so, instead of waiting forever as rolled back in memory.
#[test]
fn a_rollback_that_loses_its_race_keeps_the_stored_state_and_then_pauses() {
    let mut w = World::new(spec("rollback", false));
    w.step(Op::Baseline(true));
    assert_eq!(w.store.state.step(), Some(0));
    w.step(Op::Check(1));
    w.step(Op::Fate(Fate::Race));
    w.step(Op::Check(1));
    let (_, memory) = w.controller.as_ref().unwrap();
    assert_eq!(memory.status(), Status::Running);
    assert_eq!(w.store.state.status(), Status::Running);
    w.step(Op::Tick(10));
    assert_eq!(w.store.state.status(), Status::Paused);
    assert!(w.store.state.reason().unwrap().contains("by hand"));
}

#[test]
fn commands_read_as_the_cli_has_always_written_them() {
    for (text, want) in [
        (r#"{"command":"pause","rollback":false}"#, Command::Pause),
        (r#"{"command":"resume"}"#, Command::Resume),
        (
            r#"{"command":"abort","rollback":true}"#,
            Command::Abort { rollback: true },
        ),
        (r#"{"command":"abort"}"#, Command::Abort { rollback: false }),
        (
            r#"{"command":"approve","rollback":false}"#,
            Command::Approve,
        ),
        (
            r#"{"command":"promote","rollback":false}"#,
            Command::Promote,
        ),
    ] {
        assert_eq!(
            serde_json::from_str::<Command>(text).unwrap(),
            want,
            "{text}"
        );
    }
    assert!(serde_json::from_str::<Command>(r#"{"command":"jump"}"#).is_err());
}

#[test]
fn a_state_stored_at_a_gate_reads_back_and_approve_opens_it() {
    let stored = r#"{"status":"paused","stage":0,"step":2,"since_ms":1,"started_ms":1,"start":{"global_bp":0},"baseline":null,"checks":[],"failures":0,"owner":null,"reason":"waiting at stage 2's gate","gate":1}"#;
    let s: PlanState = serde_json::from_str(stored).unwrap();
    assert_eq!((s.stage(), s.step(), s.gate()), (0, Some(2), Some(1)));
    let spec = spec("rollback", true);
    s.check(&spec).unwrap();
    let (after, writes) = next(&spec, &s, Event::Command(Command::Approve), 5);
    assert_eq!((after.stage(), after.step()), (1, Some(0)));
    assert!(matches!(&writes[0], Write::Rollout(d) if d.global_bp == 5000));
    // A running plan stored at a gate is refused, not guessed at.
    let bad = stored.replace("\"paused\"", "\"running\"");
    assert!(serde_json::from_str::<PlanState>(&bad).is_err());
}
