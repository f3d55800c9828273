//! Reading a sysfs tree is bounded: in memory (linear in the CPUs, whatever
//! the files say), in what one file may hold, and in time for files that
//! are not files (a FIFO must not block, `/dev/zero` must not be read).
//!
//! Memory is measured, not timed: this test binary's allocator counts the
//! bytes each thread has live and the peak it reached, and each test reads
//! its tree on a fresh thread so other tests running in parallel do not
//! count.

#[path = "fixtures/sysfs_gen.rs"]
mod sysfs_gen;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::fs;
use std::path::{Path, PathBuf};

use cmwq::topology::{SYSFS_FILE_MAX_BYTES, Scope, Topology, TopologyError};

/// The system allocator, counting live bytes per thread.
struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn count(delta: isize) {
    // try_with: a thread being torn down may still free memory.
    let _ = LIVE.try_with(|l| {
        let now = l.get() + delta;
        l.set(now);
        let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
    });
}

// SAFETY: every call is forwarded unchanged to the system allocator; the
// counting touches only const-initialised thread-locals, which never
// allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        // SAFETY: `ptr` was allocated by `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as isize);
        // SAFETY: the caller's contract for `alloc_zeroed` is passed on.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        count(new as isize - layout.size() as isize);
        // SAFETY: the caller's contract for `realloc` is passed on.
        unsafe { System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Runs `f` on a fresh thread and returns its result and the peak bytes
/// that thread had live.  Joining is the test that `f` returns at all.
fn measured<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> (T, usize) {
    std::thread::spawn(move || {
        let base = LIVE.with(Cell::get);
        PEAK.with(|p| p.set(base));
        let out = f();
        let peak = PEAK.with(Cell::get) - base;
        (out, peak.max(0) as usize)
    })
    .join()
    .expect("the reader thread panicked")
}

const MIB: usize = 1 << 20;

/// A root with only `devices/system/cpu/online` = `online`.
fn online_only(name: &str, online: &str) -> PathBuf {
    let root = sysfs_gen::tmp_root(name);
    let cpu = root.join("devices/system/cpu");
    fs::create_dir_all(&cpu).unwrap();
    fs::write(cpu.join("online"), online).unwrap();
    root
}

#[test]
fn sixteen_thousand_cpus_and_no_other_file() {
    // Every fallback at once: no per-CPU directory, no possible, no caches,
    // no nodes.  Copying the package once per CPU (the old fallback) would
    // keep 16384 x 16384 ids, 2 GiB, for the packages and 2 GiB more for
    // the LLCs.
    let root = online_only("online-16k", "0-16383\n");
    let (t, peak) = measured(move || Topology::from_sysfs(&root).unwrap());
    eprintln!("peak {peak} bytes");
    assert_eq!(t.online().len(), 16384);
    assert_eq!(t.possible().len(), 16384);
    assert_eq!(t.nr_cpu_ids(), 16384);
    assert_eq!(
        (t.cores(), t.packages(), t.llcs(), t.nr_nodes()),
        (16384, 1, 1, 1)
    );
    let notes = t.notes().join("\n");
    for what in [
        "no cpuN directory",
        "own SMT core",
        "one package",
        "LLC = package",
        "one node 0",
    ] {
        assert!(notes.contains(what), "{what} not in {notes}");
    }
    // What is kept is a few words per CPU: far below 1 KiB per CPU.
    assert!(peak < 16 * MIB, "reading took {peak} bytes at its peak");

    let (shapes, peak) = measured(move || {
        Scope::ALL
            .iter()
            .copied()
            .map(|sc| {
                let pt = t.pods(sc, 8);
                (pt.pods.len(), pt.pods.iter().map(Vec::len).max().unwrap())
            })
            .collect::<Vec<_>>()
    });
    // cpu: 16384 pods of 1; smt: the same; cache: one LLC of 16384 cores;
    // cache_shard: round(16384 / 8) = 2048 shards of 8; numa, system: one.
    assert_eq!(
        shapes,
        [
            (16384, 1),
            (16384, 1),
            (1, 16384),
            (2048, 8),
            (1, 16384),
            (1, 16384)
        ]
    );
    assert!(peak < 64 * MIB, "pods took {peak} bytes at their peak");
}

#[test]
fn every_cpu_naming_every_cpu_is_linear_in_memory() {
    // 4096 online CPUs whose package and LLC files all name 0-4095: stored
    // per CPU that is 16 Mi ids (128 MiB) per relation.
    let n = 4096;
    let root = online_only("all-name-all", &format!("0-{}\n", n - 1));
    let cpu = root.join("devices/system/cpu");
    let all = format!("0-{}\n", n - 1);
    for c in 0..n {
        let t = cpu.join(format!("cpu{c}/topology"));
        fs::create_dir_all(&t).unwrap();
        fs::write(t.join("thread_siblings_list"), format!("{c}\n")).unwrap();
        fs::write(t.join("package_cpus_list"), &all).unwrap();
        let ix = cpu.join(format!("cpu{c}/cache/index3"));
        fs::create_dir_all(&ix).unwrap();
        fs::write(ix.join("level"), "3\n").unwrap();
        fs::write(ix.join("type"), "Unified\n").unwrap();
        fs::write(ix.join("shared_cpu_list"), &all).unwrap();
    }
    let (t, peak) = measured(move || Topology::from_sysfs(&root).unwrap());
    eprintln!("peak {peak} bytes");
    assert_eq!((t.cores(), t.packages(), t.llcs()), (n, 1, 1));
    assert!(t.notes().iter().all(|n| !n.contains("disagree")));
    assert_eq!(
        t.pods(Scope::Cache, 8).pods,
        vec![(0..n).collect::<Vec<_>>()]
    );
    assert!(peak < 16 * MIB, "reading took {peak} bytes at its peak");
}

/// Replaces `devices/system/cpu/online` of a small tree with what `make`
/// puts there, reads the tree on another thread, and returns the error.
fn read_err(name: &str, make: impl FnOnce(&Path)) -> (TopologyError, String, usize) {
    let root = sysfs_gen::small().write_tmp(name);
    let online = root.join("devices/system/cpu/online");
    fs::remove_file(&online).unwrap();
    make(&online);
    let (res, peak) = measured(move || Topology::from_sysfs(&root).map(|t| t.summary()));
    let err = res.expect_err("a file that is not a regular file must be refused");
    (err, online.display().to_string(), peak)
}

#[test]
fn dev_zero_is_refused_not_read() {
    let dev_zero = Path::new("/dev/zero");
    if !dev_zero.exists() {
        eprintln!("no /dev/zero here; skipped");
        return;
    }
    let (err, path, peak) = read_err("devzero", |p| {
        std::os::unix::fs::symlink(dev_zero, p).unwrap();
    });
    let msg = err.to_string();
    assert!(msg.contains(&path), "{msg}");
    assert!(msg.contains("character device"), "{msg}");
    assert!(msg.contains("not a regular file"), "{msg}");
    assert!(peak < 4 * MIB, "{peak} bytes read from /dev/zero?");
}

#[test]
fn fifo_is_refused_not_waited_on() {
    let (err, path, _) = read_err("fifo", |p| {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
        let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
        assert_eq!(rc, 0, "mkfifo: {}", std::io::Error::last_os_error());
    });
    let msg = err.to_string();
    assert!(msg.contains(&path), "{msg}");
    assert!(msg.contains("FIFO"), "{msg}");
}

#[test]
fn a_fifo_deep_in_the_tree_is_refused_too() {
    let root = sysfs_gen::small().write_tmp("fifo-deep");
    let f = root.join("devices/system/cpu/cpu2/cache/index3/shared_cpu_list");
    fs::remove_file(&f).unwrap();
    let c = std::ffi::CString::new(f.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let (res, _) = measured(move || Topology::from_sysfs(&root).map(|t| t.summary()));
    let msg = res.unwrap_err().to_string();
    assert!(msg.contains(&f.display().to_string()), "{msg}");
    assert!(msg.contains("FIFO"), "{msg}");
}

#[test]
fn files_longer_than_the_cap_are_refused() {
    // Exactly the cap is fine (blanks pad a valid list)...
    let mut text = b"0-3".to_vec();
    text.resize(SYSFS_FILE_MAX_BYTES, b' ');
    let root = sysfs_gen::small().write_tmp("cap-exact");
    fs::write(root.join("devices/system/cpu/online"), &text).unwrap();
    let t = Topology::from_sysfs(&root).unwrap();
    assert_eq!(t.online(), &[0, 1, 2, 3]);
    // ...one byte more is not, and is not read whole: 64 MiB of blanks.
    let root = sysfs_gen::small().write_tmp("cap-over");
    let path = root.join("devices/system/cpu/cpu1/topology/thread_siblings_list");
    let f = fs::File::create(&path).unwrap();
    f.set_len(64 * MIB as u64).unwrap();
    let (res, peak) = measured(move || Topology::from_sysfs(&root).map(|t| t.summary()));
    let msg = res.unwrap_err().to_string();
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(
        msg.contains(&format!("longer than {SYSFS_FILE_MAX_BYTES} bytes")),
        "{msg}"
    );
    assert!(peak < 4 * MIB, "{peak} bytes for one capped file");
}

mod random_trees {
    //! Random trees: random files present or missing, random contents
    //! (garbage bytes, cpu lists with ranges up to and past the id limit,
    //! hex masks, NUL padding), random and out-of-range `cpuN` / `nodeN`
    //! directories.  Reading must not panic, must stay within a fixed memory
    //! bound, and must give either a topology whose pods partition its
    //! online CPUs or an error naming a file of the tree.

    use super::*;
    use cmwq::topology::CPU_ID_LIMIT;
    use proptest::prelude::*;

    /// Files a `cpuN` directory may hold.
    const CPU_FILES: &[&str] = &[
        "online",
        "topology/thread_siblings_list",
        "topology/core_cpus_list",
        "topology/thread_siblings",
        "topology/core_cpus",
        "topology/package_cpus_list",
        "topology/core_siblings_list",
        "topology/package_cpus",
        "topology/core_siblings",
        "topology/physical_package_id",
        "cache/index0/level",
        "cache/index0/type",
        "cache/index0/shared_cpu_list",
        "cache/index3/level",
        "cache/index3/type",
        "cache/index3/shared_cpu_list",
        "cache/index3/shared_cpu_map",
    ];

    /// Files a `nodeN` directory may hold.
    const NODE_FILES: &[&str] = &["cpulist", "cpumap"];

    /// A cpu id, mostly small, sometimes at or past the limit.
    fn id() -> impl Strategy<Value = usize> {
        prop_oneof![
            6 => 0usize..24,
            1 => (CPU_ID_LIMIT - 4)..(CPU_ID_LIMIT + 4),
            1 => 0usize..(2 * CPU_ID_LIMIT),
        ]
    }

    /// A cpu id that is valid, mostly small.
    fn valid_id() -> impl Strategy<Value = usize> {
        prop_oneof![6 => 0usize..24, 1 => 0usize..CPU_ID_LIMIT]
    }

    /// A cpu list of ids from `ids`, ranges included.
    fn list<S: Strategy<Value = usize>>(ids: fn() -> S) -> impl Strategy<Value = String> {
        proptest::collection::vec((ids(), ids()), 1..4).prop_map(|v| {
            v.iter()
                .map(|(a, b)| format!("{}-{}", a.min(b), a.max(b)))
                .collect::<Vec<_>>()
                .join(",")
        })
    }

    /// A hex mask of `digits`-wide words, padded with up to `zeros` words
    /// of zeros above (more than the limit has, at the top).
    fn mask(digits: &'static str, zeros: usize) -> impl Strategy<Value = String> {
        (proptest::collection::vec(digits, 1..5), 0..zeros).prop_map(|(w, z)| {
            let mut words = vec!["00000000".to_string(); z];
            words.extend(w);
            words.join(",")
        })
    }

    /// What a file holds when it is valid.
    #[derive(Debug, Clone, Copy)]
    enum Kind {
        List,
        Mask,
        /// A `cpuN/online`: 0 or 1.
        Bit,
        Int,
        CacheType,
    }

    fn kind(name: &str) -> Kind {
        let base = name.rsplit('/').next().unwrap();
        match base {
            "online" => Kind::Bit,
            "level" | "physical_package_id" => Kind::Int,
            "type" => Kind::CacheType,
            b if b.ends_with("list") => Kind::List,
            _ => Kind::Mask,
        }
    }

    /// A file's contents: one candidate per kind plus garbage; which is
    /// written depends on the file, and on `valid` (3 times in 4).
    #[derive(Debug, Clone)]
    struct Contents {
        list: String,
        mask: String,
        bit: String,
        int: String,
        cache_type: String,
        garbage: String,
        valid: bool,
        nuls: usize,
        newline: bool,
    }

    impl Contents {
        fn bytes(&self, kind: Kind) -> Vec<u8> {
            let text = match (self.valid, kind) {
                (false, _) => &self.garbage,
                (true, Kind::List) => &self.list,
                (true, Kind::Mask) => &self.mask,
                (true, Kind::Bit) => &self.bit,
                (true, Kind::Int) => &self.int,
                (true, Kind::CacheType) => &self.cache_type,
            };
            let mut b = text.clone().into_bytes();
            if self.newline {
                b.push(b'\n');
            }
            b.extend(std::iter::repeat_n(0u8, self.nuls));
            b
        }
    }

    fn contents() -> impl Strategy<Value = Contents> {
        let garbage = prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..40)
                .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
            "[0-9,\\- \n]{0,24}",
            list(id),
            mask("[0-9a-f]{1,9}", 2100),
            "(Victim|-1|2|0x3|3-1|,|)",
        ];
        (
            (
                list(valid_id),
                mask("[0-9a-f]{1,8}", 4),
                "(0|1)",
                "(0|1|2|3|7)",
            ),
            ("(Data|Unified|Instruction)", garbage),
            prop_oneof![3 => Just(true), 1 => Just(false)],
            prop_oneof![4 => Just(0usize), 1 => 1usize..4],
            any::<bool>(),
        )
            .prop_map(
                |((list, mask, bit, int), (cache_type, garbage), valid, nuls, newline)| Contents {
                    list,
                    mask,
                    bit,
                    int,
                    cache_type,
                    garbage,
                    valid,
                    nuls,
                    newline,
                },
            )
    }

    #[derive(Debug, Clone)]
    struct Tree {
        online: Option<Contents>,
        possible: Option<Contents>,
        cpu_dirs: Vec<usize>,
        cpu_files: Vec<(usize, usize, Contents)>,
        node_files: Vec<(usize, usize, Contents)>,
    }

    fn tree() -> impl Strategy<Value = Tree> {
        (
            proptest::option::of(contents()),
            proptest::option::of(contents()),
            proptest::collection::vec(id(), 0..6),
            proptest::collection::vec((id(), 0..CPU_FILES.len(), contents()), 0..16),
            proptest::collection::vec((0usize..6, 0..NODE_FILES.len(), contents()), 0..5),
        )
            .prop_map(|(online, possible, cpu_dirs, cpu_files, node_files)| Tree {
                online,
                possible,
                cpu_dirs,
                cpu_files,
                node_files,
            })
    }

    impl Tree {
        fn write(&self, root: &Path) {
            let cpu = root.join("devices/system/cpu");
            fs::create_dir_all(&cpu).unwrap();
            let put = |p: PathBuf, c: &Contents, k: Kind| {
                fs::create_dir_all(p.parent().unwrap()).unwrap();
                fs::write(p, c.bytes(k)).unwrap();
            };
            if let Some(c) = &self.online {
                put(cpu.join("online"), c, Kind::List);
            }
            if let Some(c) = &self.possible {
                put(cpu.join("possible"), c, Kind::List);
            }
            for c in &self.cpu_dirs {
                fs::create_dir_all(cpu.join(format!("cpu{c}"))).unwrap();
            }
            for (c, f, b) in &self.cpu_files {
                let name = CPU_FILES[*f];
                put(cpu.join(format!("cpu{c}/{name}")), b, kind(name));
            }
            let node = root.join("devices/system/node");
            for (n, f, b) in &self.node_files {
                let name = NODE_FILES[*f];
                put(node.join(format!("node{n}/{name}")), b, kind(name));
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, .. ProptestConfig::default() })]

        #[test]
        fn random_trees_read_within_bounds(tree in tree()) {
            let root = sysfs_gen::tmp_root("random-tree");
            tree.write(&root);
            let r = root.clone();
            let (res, peak) = measured(move || {
                Topology::from_sysfs(&r).map(|t| {
                    // Pods of every scope, computed on the same thread.
                    let pods: Vec<_> = Scope::ALL
                        .iter()
                        .copied()
                        .flat_map(|sc| [t.pods(sc, 0), t.pods(sc, 8)])
                        .collect();
                    (t, pods)
                })
            });
            // Everything is indexed by CPU id below the limit: a handful
            // of per-CPU tables of at most CPU_ID_LIMIT entries.
            prop_assert!(peak < 96 * MIB, "peak {} bytes", peak);
            match res {
                Ok((t, pods)) => {
                    prop_assert!(!t.online().is_empty());
                    prop_assert!(t.online().iter().all(|&c| c < CPU_ID_LIMIT));
                    prop_assert!(t.nr_cpu_ids() <= CPU_ID_LIMIT);
                    for pt in pods {
                        let mut all: Vec<usize> = pt.pods.concat();
                        all.sort_unstable();
                        prop_assert_eq!(all.as_slice(), t.online());
                    }
                    prop_assert!(!t.summary().is_empty());
                }
                Err(e) => {
                    let msg = e.to_string();
                    prop_assert!(msg.contains(&root.display().to_string()), "{}", msg);
                }
            }
            let _ = fs::remove_dir_all(&root);
        }
    }
}
