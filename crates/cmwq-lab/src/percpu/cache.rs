//! A per-CPU object cache in the shape of a slab allocator's per-CPU sheaf:
//! the fast path pops or pushes one object on the CPU's magazine; an empty
//! magazine is refilled with a batch from the shared depot, a full one gives
//! a batch back; a drain returns everything to the depot.

use std::sync::Mutex;

/// An object: 64 bytes, as `kmalloc(64)` in seed 003's benchmark.
pub type Obj = Box<[u64; 8]>;

/// Objects moved between a magazine and the depot at a time.
pub const BATCH: usize = 32;
/// A magazine holds at most this many objects; a free that fills it gives
/// [`BATCH`] back to the depot.
pub const CAPACITY: usize = 2 * BATCH;

/// The shared pool behind the per-CPU magazines (the slab's partial lists).
#[derive(Debug, Default)]
pub struct Depot {
    objs: Mutex<Vec<Obj>>,
}

impl Depot {
    /// A depot holding `n` fresh objects.
    pub fn with_objects(n: usize) -> Depot {
        Depot {
            objs: Mutex::new((0..n).map(|i| Box::new([i as u64; 8])).collect()),
        }
    }

    /// Objects in the depot now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when the depot holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Obj>> {
        self.objs.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One CPU's cache of free objects.
#[derive(Debug, Default)]
pub struct Magazine {
    objs: Vec<Obj>,
}

impl Magazine {
    /// An empty magazine with room for [`CAPACITY`] objects (no allocation later).
    pub fn new() -> Magazine {
        Magazine {
            objs: Vec::with_capacity(CAPACITY + 1),
        }
    }

    /// Objects cached now.
    pub fn len(&self) -> usize {
        self.objs.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.objs.is_empty()
    }

    /// Takes an object: from the magazine, else after refilling a batch from
    /// the depot, else a newly allocated one.
    #[inline]
    pub fn alloc(&mut self, depot: &Depot) -> Obj {
        if let Some(o) = self.objs.pop() {
            return o;
        }
        self.refill(depot)
    }

    #[cold]
    fn refill(&mut self, depot: &Depot) -> Obj {
        {
            let mut d = depot.lock();
            let k = d.len().saturating_sub(BATCH);
            self.objs.extend(d.drain(k..));
        }
        self.objs.pop().unwrap_or_else(|| Box::new([0; 8]))
    }

    /// Gives an object back: to the magazine, which returns a batch to the
    /// depot when full.
    #[inline]
    pub fn free(&mut self, o: Obj, depot: &Depot) {
        self.objs.push(o);
        if self.objs.len() > CAPACITY {
            self.flush_batch(depot);
        }
    }

    #[cold]
    fn flush_batch(&mut self, depot: &Depot) {
        let k = self.objs.len() - BATCH;
        depot.lock().extend(self.objs.drain(k..));
    }

    /// Returns every cached object to the depot; how many there were.
    pub fn drain(&mut self, depot: &Depot) -> usize {
        let n = self.objs.len();
        if n > 0 {
            depot.lock().append(&mut self.objs);
        }
        n
    }
}
