//! Signals from the first instruction: `main` installs these handlers
//! before anything slow (config, ring build, listeners), so that a signal
//! arriving during start-up does what it says instead of the default
//! action (for SIGHUP: terminate, exit 129).
//!
//! - SIGHUP before the router is ready is remembered and applied as one
//!   reload once it is (logged); after, the reload service takes it.
//! - SIGTERM and SIGINT before it is ready end the process at once (exit
//!   143 and 130; there is nothing to drain); after, Pingora's graceful
//!   shutdown takes them.
//! - SIGUSR1 (reopen the access log) never ends the process: before the
//!   router is ready there is nothing to reopen (the log is opened as it
//!   starts); after, the access log's reopener takes it.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};

/// What arrived before the router was ready.
#[derive(Debug, Clone)]
pub struct Early {
    hup: Arc<AtomicBool>,
    starting: Arc<AtomicBool>,
}

impl Early {
    /// Installs the handlers. Call first thing in `main`.
    pub fn install() -> std::io::Result<Self> {
        let early = Early {
            hup: Arc::new(AtomicBool::new(false)),
            starting: Arc::new(AtomicBool::new(true)),
        };
        signal_hook::flag::register(SIGHUP, early.hup.clone())?;
        signal_hook::flag::register(SIGUSR1, Arc::new(AtomicBool::new(false)))?;
        signal_hook::flag::register_conditional_shutdown(SIGTERM, 143, early.starting.clone())?;
        signal_hook::flag::register_conditional_shutdown(SIGINT, 130, early.starting.clone())?;
        Ok(early)
    }

    /// Handlers for a process that does not start a router (tests, tools):
    /// nothing pending, nothing installed.
    pub fn none() -> Self {
        Early {
            hup: Arc::new(AtomicBool::new(false)),
            starting: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The router serves: SIGTERM/SIGINT are Pingora's from now on.
    pub fn ready(&self) {
        self.starting.store(false, SeqCst);
    }

    /// Takes a SIGHUP that arrived since the last call (at most one
    /// reload however many arrived).
    pub fn take_hup(&self) -> bool {
        self.hup.swap(false, SeqCst)
    }
}
