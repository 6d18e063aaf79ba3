//! Idle keep-alive connections without a task, as nginx keeps them: a
//! connection idle for [`super::conn::KEEP_WARM`] is parked with its
//! thread's keeper as its socket and a few words, and gets a task again
//! when its client sends the next request's first byte.
//!
//! A task per idle connection would cost its future (the connection's
//! loop, a timer and the wait, about 1 KiB with the task's header); a
//! parked connection costs one slot here (about 120 bytes), its wake-up
//! (32 bytes) and the reactor's record of its socket (128 bytes, as any
//! socket has).
//!
//! One keeper per worker thread, made at the thread's first park, with a
//! task that: polls the read readiness of the connections whose wake-up
//! fired (each registered its own waker with its socket) and hands the
//! ready ones back to the engine; closes the connections whose keep-alive
//! deadline passed (one pass over the slots, at most every [`SWEEP_GAP`],
//! timed to the earliest deadline); and at a graceful stop closes them
//! all and parks no more.

use std::cell::RefCell;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use futures_util::task::AtomicWaker;

use crate::drain::Drain;
use crate::engine::io::ClientIo;
use crate::engine::Engine;
use crate::metrics::OpenConnection;

/// A client connection between requests: what it keeps while parked.
pub struct Idle {
    /// The connection.
    pub io: ClientIo,
    /// The connection's ends.
    pub peer: Option<crate::engine::request::Ends>,
    /// Idle since (its last response).
    pub since: Instant,
    /// The engine that serves it.
    pub engine: Arc<Engine>,
    /// Its service's graceful stop.
    pub drain: Arc<Drain>,
    /// It counts as open until dropped.
    pub open: OpenConnection,
}

/// What [`park`] did with a connection.
pub enum Parked {
    /// Parked: the keeper has it now.
    Kept,
    /// Its next request's first byte is already here: serve it.
    Readable(Idle),
    /// This thread's keeper parks another service's connections, or the
    /// router is stopping: the caller keeps it.
    Refused(Idle),
}

/// Deadline passes are at least this far apart, so that many deadlines
/// close together cost one pass: keep-alive deadlines are met within it.
pub const SWEEP_GAP: Duration = Duration::from_millis(50);

thread_local! {
    static KEEPER: RefCell<Option<Arc<Keeper>>> = const { RefCell::new(None) };
}

/// One thread's parked connections.
struct Keeper {
    state: Mutex<State>,
    /// The keeper's task.
    task: AtomicWaker,
    /// The service whose connections it parks.
    drain: Arc<Drain>,
    /// Serves a connection whose request began.
    resume: fn(Idle),
}

#[derive(Default)]
struct State {
    slots: Vec<Option<Entry>>,
    free: Vec<u32>,
    /// Slots whose wake-up fired since the keeper last looked.
    woken: Vec<u32>,
    /// The earliest deadline of a connection parked since the last pass
    /// (the pass finds the rest).
    earliest: Option<Instant>,
    /// The router is stopping: everything was closed, nothing parks.
    closed: bool,
}

struct Entry {
    idle: Idle,
    deadline: Instant,
    waker: Waker,
}

/// A parked connection's wake-up: its socket's readiness fired.
struct Wakeup {
    keeper: Weak<Keeper>,
    slot: u32,
}

impl Wake for Wakeup {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(k) = self.keeper.upgrade() {
            k.lock().woken.push(self.slot);
            k.task.wake();
        }
    }
}

impl Keeper {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Parks `client` with this thread's keeper until its next request's
/// first byte (then `resume` serves it, on a task of its own) or
/// `deadline` (then it is closed).
pub fn park(mut client: Idle, deadline: Instant, resume: fn(Idle)) -> Parked {
    let Some(keeper) = keeper_for(&client.drain, resume) else {
        return Parked::Refused(client);
    };
    let mut st = keeper.lock();
    if st.closed {
        return Parked::Refused(client);
    }
    let slot = match st.free.pop() {
        Some(s) => s,
        None => {
            st.slots.push(None);
            (st.slots.len() - 1) as u32
        }
    };
    let waker = Waker::from(Arc::new(Wakeup {
        keeper: Arc::downgrade(&keeper),
        slot,
    }));
    // The first look registers the wake-up with the socket.
    if client
        .io
        .poll_idle(&mut Context::from_waker(&waker))
        .is_ready()
    {
        st.free.push(slot);
        return Parked::Readable(client);
    }
    st.slots[slot as usize] = Some(Entry {
        idle: client,
        deadline,
        waker,
    });
    let sooner = st.earliest.is_none_or(|e| deadline < e);
    if sooner {
        st.earliest = Some(deadline);
    }
    drop(st);
    if sooner {
        keeper.task.wake();
    }
    Parked::Kept
}

/// This thread's keeper, made (and its task spawned) at the first park;
/// `None` when it parks another service's connections.
fn keeper_for(drain: &Arc<Drain>, resume: fn(Idle)) -> Option<Arc<Keeper>> {
    KEEPER.with(|k| {
        let mut k = k.borrow_mut();
        if let Some(keeper) = k.as_ref() {
            return Arc::ptr_eq(&keeper.drain, drain).then(|| keeper.clone());
        }
        let keeper = Arc::new(Keeper {
            state: Mutex::default(),
            task: AtomicWaker::new(),
            drain: drain.clone(),
            resume,
        });
        tokio::spawn(run(keeper.clone()));
        *k = Some(keeper.clone());
        Some(keeper)
    })
}

/// The keeper's task: hands back the connections whose request began,
/// closes those past their deadline, and all of them at a stop.
async fn run(keeper: Arc<Keeper>) {
    let closing = keeper.drain.stopped();
    tokio::pin!(closing);
    let timer = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(timer);
    let mut next_pass: Option<Instant> = None;
    let mut last_pass = Instant::now();
    std::future::poll_fn(|cx| {
        keeper.task.register(cx.waker());
        if closing.as_mut().poll(cx).is_ready() {
            let all = {
                let mut st = keeper.lock();
                st.closed = true;
                std::mem::take(&mut st.slots)
            };
            drop(all);
            return Poll::Ready(());
        }
        let now = Instant::now();
        let mut ready = Vec::new();
        let mut expired = Vec::new();
        {
            let mut st = keeper.lock();
            let woken = std::mem::take(&mut st.woken);
            for &slot in &woken {
                let i = slot as usize;
                let Some(e) = st.slots.get_mut(i).and_then(Option::as_mut) else {
                    continue;
                };
                if e.idle
                    .io
                    .poll_idle(&mut Context::from_waker(&e.waker))
                    .is_ready()
                {
                    ready.extend(st.slots[i].take());
                    st.free.push(slot);
                }
            }
            st.woken = woken;
            st.woken.clear();
            // A pass over the slots when the earliest deadline known came,
            // at most one per gap.
            let plan = [next_pass, st.earliest.take()]
                .into_iter()
                .flatten()
                .min()
                .map(|p| p.max(last_pass + SWEEP_GAP));
            if plan.is_some_and(|p| p <= now) {
                let mut earliest: Option<Instant> = None;
                let st = &mut *st;
                for (i, s) in st.slots.iter_mut().enumerate() {
                    let Some(e) = s else { continue };
                    if e.deadline <= now {
                        expired.extend(s.take());
                        st.free.push(i as u32);
                    } else if earliest.is_none_or(|x| e.deadline < x) {
                        earliest = Some(e.deadline);
                    }
                }
                last_pass = now;
                next_pass = earliest.map(|d| d.max(now + SWEEP_GAP));
            } else {
                next_pass = plan;
            }
        }
        for e in ready {
            (keeper.resume)(e.idle);
        }
        drop(expired);
        if let Some(p) = next_pass {
            let p = tokio::time::Instant::from_std(p);
            if timer.deadline() != p {
                timer.as_mut().reset(p);
            }
            if timer.as_mut().poll(cx).is_ready() {
                cx.waker().wake_by_ref();
            }
        }
        Poll::Pending
    })
    .await
}
