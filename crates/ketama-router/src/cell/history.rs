//! The last config changes the cell applied or refused, for the admin
//! page: what an operator asks first after a reload ("did it apply?").

use std::collections::VecDeque;
use std::time::SystemTime;

/// How many changes are kept.
pub const KEPT: usize = 20;

/// One reload or etcd config change, as it ended.
#[derive(Clone, Debug)]
pub struct Applied {
    /// When it ended.
    pub at: SystemTime,
    /// What triggered it (`reload`, `etcd config`).
    pub trigger: &'static str,
    /// `None` when it applied, else why it was refused.
    pub error: Option<String>,
    /// Keys that changed but need a restart.
    pub restart_needed: Vec<&'static str>,
}

/// The last [`KEPT`] changes, newest last.
#[derive(Debug, Default)]
pub struct History(VecDeque<Applied>);

impl History {
    /// Records a change, forgetting the oldest past [`KEPT`].
    pub fn push(&mut self, a: Applied) {
        if self.0.len() == KEPT {
            self.0.pop_front();
        }
        self.0.push_back(a);
    }

    /// The changes kept, newest first.
    pub fn newest_first(&self) -> Vec<Applied> {
        self.0.iter().rev().cloned().collect()
    }
}
