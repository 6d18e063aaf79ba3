//! A plan's events to a webhook (`[notify] webhook = URL`): one JSON POST
//! per state change and per failed check, in order, from a thread of its
//! own, so a slow or dead receiver never holds the plan up.
//!
//! Each event is retried with doubling backoff (100 ms up to 5 s, at most
//! [`ATTEMPTS`] tries) until the receiver answers 2xx; an event that still
//! fails is dropped with one line in the controller's log, and the next
//! one is sent. At most [`QUEUED`] events wait; more are dropped (and
//! counted) rather than grow the controller without bound.
//!
//! The body: `{"event", "status", "stage", "step", "message", "reason",
//! "at_ms", "rollout"}`: `event` one of `started`, `step`, `check_fail`,
//! `check_inconclusive`, `baseline_refused`, `paused`, `resumed`, `gate`,
//! `approved`, `promoted`, `completed`, `rolled_back`, `stepped_back`,
//! `aborted`; `stage` and `step` 1-based as `plan status` prints them
//! (`step` 0 before the stage's first step); `at_ms` milliseconds since
//! the Unix epoch; `rollout` the document the plan wrote last.

use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::time::Duration;

/// Tries per event.
pub const ATTEMPTS: u32 = 8;
/// Events waiting at most.
pub const QUEUED: usize = 1024;

/// How long dropping a [`Notifier`] waits for the queue to drain.
pub const DRAIN: Duration = Duration::from_secs(3);

/// The sending side; dropping it waits up to [`DRAIN`] for what is queued
/// to be sent (so a plan's last event reaches a live receiver before the
/// controller exits), then leaves the thread behind.
pub struct Notifier {
    tx: Option<SyncSender<serde_json::Value>>,
    done: Option<Receiver<()>>,
    warnings: Receiver<String>,
    dropped: u64,
}

impl Notifier {
    /// Starts the sending thread for `url`.
    pub fn start(url: &str) -> Notifier {
        let (tx, rx) = mpsc::sync_channel(QUEUED);
        let (warn, warnings) = mpsc::channel();
        let (done_tx, done) = mpsc::channel();
        let url = url.to_string();
        let started = std::thread::Builder::new()
            .name("plan-notify".into())
            .spawn(move || {
                send_all(&url, rx, |w| {
                    let _ = warn.send(w);
                });
                let _ = done_tx.send(());
            })
            .is_ok();
        Notifier {
            tx: Some(tx),
            done: started.then_some(done),
            warnings,
            dropped: 0,
        }
    }

    /// Queues one event; never blocks.
    pub fn send(&mut self, event: serde_json::Value) {
        if let Some(tx) = &self.tx {
            if let Err(TrySendError::Full(_)) = tx.try_send(event) {
                self.dropped += 1;
            }
        }
    }

    /// What went wrong since the last call: events given up on, and
    /// events dropped because the queue was full.
    pub fn warnings(&mut self) -> Vec<String> {
        let mut out: Vec<String> = self.warnings.try_iter().collect();
        if self.dropped > 0 {
            out.push(format!(
                "notify: {} events dropped: {QUEUED} were waiting for the webhook",
                self.dropped
            ));
            self.dropped = 0;
        }
        out
    }
}

impl Drop for Notifier {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(done) = self.done.take() {
            let _ = done.recv_timeout(DRAIN);
        }
    }
}

fn send_all(url: &str, rx: Receiver<serde_json::Value>, warn: impl Fn(String)) {
    let agent = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(5))
        .build();
    for event in rx {
        let body = event.to_string();
        let mut wait = Duration::from_millis(100);
        let mut last = String::new();
        let mut sent = false;
        for _ in 0..ATTEMPTS {
            match agent
                .post(url)
                .set("content-type", "application/json")
                .send_string(&body)
            {
                Ok(_) => {
                    sent = true;
                    break;
                }
                Err(e) => last = e.to_string(),
            }
            std::thread::sleep(wait);
            wait = (wait * 2).min(Duration::from_secs(5));
        }
        if !sent {
            warn(format!(
                "notify: {url} took no {} event after {ATTEMPTS} tries ({last}); dropped",
                event["event"].as_str().unwrap_or("?")
            ));
        }
    }
}
