//! A `MEM_RECLAIM` workqueue's rescuer (`rescuer_thread` in the kernel): a
//! thread started with the queue, before it is needed, that sleeps until a
//! starving pool sends mayday ([`WqInner::send_mayday`], from the watchdog's
//! tick) and then runs batches of that pwq's items itself.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::Duration;

use crate::engine::pool::{self};
use crate::engine::threads;
use crate::error::Error;
use crate::sched;
use crate::sync::Mutex;
use crate::trace;

use super::WqInner;

/// A `MEM_RECLAIM` workqueue's rescuer: a thread that exists before it is needed.
pub(super) struct Rescuer {
    /// WQ mayday: pwqs that asked for help, as (pool id, slot), oldest first.
    pub(super) mayday: Mutex<VecDeque<(u32, u32)>>,
    /// O: the rescuer thread, to unpark it.
    pub(super) thread: OnceLock<Thread>,
    /// WQ join: its join handle, taken by destroy.
    pub(super) join: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// A: set by destroy, which then unparks the rescuer. `Relaxed`: an
    /// unpark synchronizes with the park it ends, so the rescuer sees it.
    pub(super) stop: AtomicBool,
    /// A: the rescuer's thread id, 0 until it runs. `Relaxed`: a value read
    /// on its own.
    pub(super) tid: std::sync::atomic::AtomicI32,
}

impl WqInner {
    /// Starts the rescuer thread of a `MEM_RECLAIM` queue.
    pub(super) fn start_rescuer(self: &Arc<Self>) -> Result<(), Error> {
        let Some(r) = &self.rescuer else {
            return Ok(());
        };
        let weak = Arc::downgrade(self);
        let info = crate::hooks::WorkerInfo::rescuer(&self.name);
        let name = info.name.clone();
        let h = threads::start(name, move || {
            let name = info.name.clone();
            crate::hooks::with_hooks(info, || {
                super::super::service::run(&name, || rescuer_thread(weak.clone()))
            })
        })
        .map_err(|e| {
            threads::spawn_error(format!("the rescuer of workqueue {:?}", self.name), &e)
        })?;
        let _ = r.thread.set(h.thread().clone());
        *r.join.lock() = Some(h);
        // The rescuer publishes its thread id first thing; wait for it so
        // `rescuer_tid()` and dumps name it as soon as `build()` returns.
        let t0 = std::time::Instant::now();
        while r.tid.load(Ordering::Relaxed) == 0 && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_micros(50));
        }
        Ok(())
    }
}

/// The rescuer: sleeps until a pool sends mayday, then runs batches of the
/// starving pwq's items on this thread; exits when the workqueue is destroyed.
fn rescuer_thread(wq: std::sync::Weak<WqInner>) {
    super::super::pool::mark_rescuer();
    if let Some(w) = wq.upgrade()
        && let Some(r) = &w.rescuer
    {
        r.tid.store(sched::gettid(), Ordering::Relaxed);
    }
    loop {
        let next = {
            let Some(w) = wq.upgrade() else { return };
            let r = w
                .rescuer
                .as_ref()
                .expect("rescuer thread of a rescuer queue");
            if r.stop.load(Ordering::Relaxed) {
                return;
            }
            super::super::service::injected(
                super::super::service::AT_RESCUER_LOOP,
                "a rescuer's loop panics",
            );
            let job = r.mayday.lock().pop_front();
            job.map(|j| (w, j))
        };
        let Some((w, (pool_id, slot))) = next else {
            std::thread::park();
            continue;
        };
        trace::rescue(pool_id, &w.name);
        if let Some(pool) = pool::get_pool(pool_id)
            && pool.rescue(slot, &w)
        {
            // Still starving with items of this pwq left: back on the list.
            w.send_mayday(pool_id, slot);
        }
    }
}
