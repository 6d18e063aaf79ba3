//! The access log: one line per request, written off the request path.
//!
//! A request formats its line (see [`line`]) and appends it to a bounded
//! buffer under a lock held only for the copy; a writer thread takes the
//! whole buffer every `flush_ms` (sooner once it is half full) and writes
//! it with the lock released. When the disk cannot keep up the buffer
//! fills and further lines are dropped and counted
//! (`ketama_access_log_dropped_total`): a request never waits for the
//! disk. Memory: at most two buffers of `buffer_bytes` (one filling, one
//! being written).
//!
//! The settings are the routing state's: its owner passes each new
//! state's `[access_log]` to [`AccessLog::configure`] when it swaps the
//! state in, so a reload can turn the log on or off or move it. SIGUSR1
//! asks for a reopen ([`AccessLog::reopen`], logrotate's convention: move
//! the file, signal, a new file appears). Lines still in the buffer when
//! the process is killed are lost (at most `flush_ms` of them).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ketama_config::AccessLogSection;

pub mod line;

/// The writer's side of the settings, and what the request path fills.
#[derive(Debug, Default)]
struct Pending {
    bytes: Vec<u8>,
    lines: u64,
    /// The writer was woken for a half-full buffer and has not taken it.
    woken: bool,
    /// `None`: logging is off.
    path: Option<String>,
    /// The file must be (re)opened before the next write.
    reopen: bool,
    cap: usize,
    flush: Duration,
}

#[derive(Debug, Default)]
struct Shared {
    pending: Mutex<Pending>,
    wake: Condvar,
    dropped: AtomicU64,
    written: AtomicU64,
}

/// The process's access log; see the module docs. Cheap to share.
#[derive(Debug, Clone)]
pub struct AccessLog {
    shared: Arc<Shared>,
}

impl AccessLog {
    /// Starts the writer thread (idle while logging is off).
    pub fn start() -> io::Result<AccessLog> {
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        std::thread::Builder::new()
            .name("access log".into())
            .spawn(move || writer(&s))?;
        Ok(AccessLog { shared })
    }

    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.shared
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Applies a routing state's `[access_log]` (`None`: off). A new path
    /// is opened by the writer before its next write; lines already in the
    /// buffer go to the new file.
    pub fn configure(&self, section: Option<&AccessLogSection>) {
        let mut p = self.lock();
        let path = section.map(|s| s.path.clone());
        if p.path != path {
            p.path = path;
            p.reopen = true;
        }
        if let Some(s) = section {
            p.cap = s.buffer_bytes;
            p.flush = Duration::from_millis(s.flush_ms);
        }
        drop(p);
        self.shared.wake.notify_one();
    }

    /// Closes and reopens the file (SIGUSR1).
    pub fn reopen(&self) {
        self.lock().reopen = true;
        self.shared.wake.notify_one();
    }

    /// Appends one line (with its `\n`), or drops and counts it when the
    /// buffer is full. Holds the lock only for the copy.
    pub fn push(&self, line: &[u8]) {
        let mut p = self.lock();
        if p.path.is_none() {
            return;
        }
        if p.bytes.len() + line.len() > p.cap {
            drop(p);
            self.shared.dropped.fetch_add(1, Relaxed);
            return;
        }
        p.bytes.extend_from_slice(line);
        p.lines += 1;
        let wake = !p.woken && p.bytes.len() >= p.cap / 2;
        p.woken |= wake;
        drop(p);
        if wake {
            self.shared.wake.notify_one();
        }
    }

    /// Lines dropped since start: the buffer was full, or the write failed.
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Relaxed)
    }

    /// Lines written since start.
    pub fn written(&self) -> u64 {
        self.shared.written.load(Relaxed)
    }
}

/// Reopens the access log on SIGUSR1.
pub struct Reopener {
    /// The log to reopen.
    pub log: AccessLog,
}

#[async_trait::async_trait]
impl crate::service::Background for Reopener {
    async fn start(&self, mut shutdown: crate::service::ShutdownWatch) {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut usr1) = signal(SignalKind::user_defined1()) else {
            tracing::error!("cannot listen for SIGUSR1: the access log reopens on reload only");
            return;
        };
        loop {
            tokio::select! {
                _ = usr1.recv() => {
                    tracing::info!("SIGUSR1: reopening the access log");
                    self.log.reopen();
                }
                _ = shutdown.changed() => return,
            }
        }
    }
}

/// Where lines go.
enum Out {
    Closed,
    Stdout,
    File(File),
}

impl Out {
    fn open(path: &str) -> io::Result<Out> {
        if path == "-" {
            return Ok(Out::Stdout);
        }
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map(Out::File)
    }

    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Out::Closed => Err(io::Error::other("no file is open")),
            Out::Stdout => {
                let mut out = io::stdout().lock();
                out.write_all(bytes)?;
                out.flush()
            }
            Out::File(f) => f.write_all(bytes),
        }
    }
}

/// The writer thread: takes the buffer every `flush_ms` or when woken,
/// writes it with the lock released.
fn writer(s: &Shared) {
    let mut out = Out::Closed;
    let mut spare = Vec::new();
    let mut warned: Option<Instant> = None;
    let mut failures = 0u64;
    loop {
        let mut p = s.pending.lock().unwrap_or_else(|e| e.into_inner());
        let wait = if p.path.is_some() {
            p.flush
        } else {
            Duration::from_secs(3600)
        };
        if !p.woken && !p.reopen {
            p = s
                .wake
                .wait_timeout(p, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        std::mem::swap(&mut p.bytes, &mut spare);
        let lines = std::mem::take(&mut p.lines);
        p.woken = false;
        let reopen = std::mem::take(&mut p.reopen).then(|| p.path.clone());
        drop(p);
        if let Some(path) = reopen {
            // The old file is closed first: after a move and SIGUSR1, the
            // next line is in a new file at the configured path.
            out = Out::Closed;
            if let Some(path) = path {
                match Out::open(&path) {
                    Ok(o) => out = o,
                    Err(e) => tracing::error!(
                        path,
                        "cannot open the access log ({e}): lines are dropped until a reload or SIGUSR1 opens it"
                    ),
                }
            }
        }
        if spare.is_empty() {
            continue;
        }
        match out.write(&spare) {
            Ok(()) => {
                s.written.fetch_add(lines, Relaxed);
            }
            Err(e) => {
                s.dropped.fetch_add(lines, Relaxed);
                failures += lines;
                // Once every 10 s at most, with the count since the last.
                if warned.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
                    tracing::warn!(
                        dropped = failures,
                        "cannot write the access log ({e}): lines dropped"
                    );
                    warned = Some(Instant::now());
                    failures = 0;
                }
            }
        }
        spare.clear();
        // A buffer that grew far past its cap once is not kept at that size.
        if spare.capacity() > 4 << 20 {
            spare = Vec::new();
        }
    }
}
