//! A workqueue's handles and borrowed views: the `handles`/`borrows` Dekker
//! pair, as a leaf the loom models run (`tests/loom_models.rs`, model 8,
//! through `cmwq::__loom::WqHolders`).
//!
//! A view (`borrow_of`, for the control endpoint and snapshots) is not a
//! handle: the last handle's drop still destroys the queue itself, after
//! waiting for the views to be returned. The last handle's drop decrements
//! `handles` then reads `borrows`; a borrower increments `borrows` then
//! reads `handles`. Both `SeqCst`, so in their single total order one load
//! comes after the other side's store: either the owner sees the view and
//! waits for it, or the borrower sees no handle and backs off. Never both
//! miss, which would let a view use a queue being destroyed.

use crate::sync::model::atomic::{AtomicUsize, Ordering};
use crate::sync::model::dekker_point;

/// The two counters of the pair.
pub(crate) struct Holders {
    /// A: handles. `SeqCst`: pairs with `borrows`.
    handles: AtomicUsize,
    /// A: views lent out. `SeqCst`: pairs with `handles`.
    borrows: AtomicUsize,
}

impl Holders {
    /// One handle (the builder's), no view.
    pub(crate) fn new() -> Holders {
        Holders {
            handles: AtomicUsize::new(1),
            borrows: AtomicUsize::new(0),
        }
    }

    /// A handle was cloned.
    pub(crate) fn add_handle(&self) {
        self.handles.fetch_add(1, Ordering::SeqCst);
    }

    /// A handle was dropped; true if it was the last (the caller then waits
    /// for [`Holders::lent`] to turn false and destroys the queue).
    pub(crate) fn drop_handle(&self) -> bool {
        let last = self.handles.fetch_sub(1, Ordering::SeqCst) == 1;
        dekker_point();
        last
    }

    /// Lends a view unless the last handle is gone or `gone` says the queue
    /// is being destroyed; true if lent (return it with
    /// [`Holders::give_back`]).
    pub(crate) fn try_borrow(&self, gone: impl FnOnce() -> bool) -> bool {
        self.borrows.fetch_add(1, Ordering::SeqCst);
        dekker_point();
        if self.handles.load(Ordering::SeqCst) == 0 || gone() {
            self.borrows.fetch_sub(1, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// A view was returned.
    pub(crate) fn give_back(&self) {
        self.borrows.fetch_sub(1, Ordering::SeqCst);
    }

    /// Some view is lent out.
    pub(crate) fn lent(&self) -> bool {
        self.borrows.load(Ordering::SeqCst) > 0
    }

    /// Handles alive.
    #[cfg(loom)]
    pub(crate) fn handles(&self) -> usize {
        self.handles.load(Ordering::SeqCst)
    }

    /// A view lent without looking at `handles` (the models' broken
    /// borrower only).
    #[cfg(loom)]
    pub(crate) fn borrow_blindly(&self) {
        self.borrows.fetch_add(1, Ordering::SeqCst);
    }
}
