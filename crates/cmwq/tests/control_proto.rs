//! The control endpoint in-process: a server on a private temporary
//! directory, spoken to through `Client` and through raw bytes.
//!
//! What must hold: the snapshot a client receives is the process's own; knobs
//! change the workqueue and bad values are refused with the reason; a peer
//! whose uid is not the owner's is refused before any request is read;
//! malformed, oversized and random requests get error replies or a closed
//! connection and never stop the server; connections beyond the limit are
//! told to come back.

mod common;

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use cmwq::control::{self, Client, MAX_CONNECTIONS, MAX_REQUEST, Server};
use cmwq::topology::Scope;
use cmwq::{Work, Workqueue};
use proptest::prelude::*;

fn server(dir: &Path) -> Server {
    // serve_at creates the directory private (a temp dir may be 0755).
    control::serve_at(&dir.join("ctl/t.sock"), None).expect("serve")
}

/// The sysfs hex form of a one-CPU mask: 32-bit words, most significant first.
fn hex_mask(cpu: usize) -> String {
    let mut words = vec![0u32; cpu / 32 + 1];
    words[cpu / 32] |= 1 << (cpu % 32);
    words
        .iter()
        .rev()
        .map(|w| format!("{w:08x}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn ping_ok(path: &Path) -> bool {
    Client::connect_path(path)
        .and_then(|mut c| c.ping())
        .is_ok_and(|p| p == std::process::id())
}

#[test]
fn client_snapshot_is_the_process_view() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path());
    let wq = Workqueue::builder("ctl_snap_unbound")
        .unbound()
        .affinity_scope(Scope::Cpu)
        .mem_reclaim()
        .build()
        .unwrap();
    let w = Work::new(|| {});
    wq.queue(&w);
    wq.flush();
    let mut c = Client::connect_path(srv.path()).unwrap();
    let remote = c.snapshot().unwrap();
    let local = cmwq::snapshot();
    assert_eq!(remote.pid, std::process::id());
    assert_eq!(remote.topology, local.topology);
    let r = remote
        .workqueues
        .iter()
        .find(|w| w.name == "ctl_snap_unbound")
        .expect("the workqueue is in the remote snapshot");
    let l = local
        .workqueues
        .iter()
        .find(|w| w.name == "ctl_snap_unbound")
        .unwrap();
    assert_eq!(
        (&r.cpu_pool, r.dfl_pool, &r.attrs),
        (&l.cpu_pool, l.dfl_pool, &l.attrs)
    );
    assert_eq!(r.kind, "unbound");
    assert!(r.mem_reclaim);
    let tid = r.rescuer.as_ref().expect("a rescuer").tid;
    assert_eq!(Some(tid), wq.rescuer_tid());
    assert!(r.stats.completed >= 1);
    // Every pool a workqueue maps to is listed among the pools.
    for p in r.cpu_pool.iter().flatten().chain(r.dfl_pool.iter()) {
        assert!(remote.pools.iter().any(|q| q.id == *p), "pool {p} missing");
    }
    // The file is the owner's alone.
    let mode = std::fs::metadata(srv.path()).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let dmode = std::fs::metadata(dir.path().join("ctl"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(dmode & 0o077, 0);
}

#[test]
fn knobs_change_the_workqueue_and_bad_values_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path());
    let ub = Workqueue::builder("ctl_knobs_u")
        .unbound()
        .affinity_scope(Scope::Cpu)
        .build()
        .unwrap();
    let bd = Workqueue::builder("ctl_knobs_b").build().unwrap();
    let mut c = Client::connect_path(srv.path()).unwrap();

    let a = c.set("ctl_knobs_u", "affinity_scope", "system").unwrap();
    assert_eq!(a.affinity_scope, Scope::System);
    assert_eq!(ub.attrs().affinity_scope, Scope::System);
    let a = c.set("ctl_knobs_u", "affinity_strict", "1").unwrap();
    assert!(a.affinity_strict && ub.attrs().affinity_strict);
    let a = c.set("ctl_knobs_u", "max_active", "7").unwrap();
    assert_eq!((a.max_active, ub.max_active()), (7, 7));
    let a = c.set("ctl_knobs_u", "nice", "5").unwrap();
    assert_eq!(ub.attrs().nice, 5);
    assert_eq!(a.nice, 5);
    let online = cmwq::snapshot().topology.online;
    let first = online[0];
    let a = c.set("ctl_knobs_u", "cpumask", &hex_mask(first)).unwrap();
    assert_eq!(a.cpumask, vec![first]);
    let a = c
        .set(
            "ctl_knobs_u",
            "cpus",
            &format!("{}", online[online.len() - 1]),
        )
        .unwrap();
    assert_eq!(a.cpumask, vec![online[online.len() - 1]]);
    assert_eq!(
        c.set("ctl_knobs_b", "max_active", "3").unwrap().max_active,
        3
    );
    assert_eq!(bd.max_active(), 3);

    let before = ub.attrs();
    for (wq, knob, value, reason) in [
        ("ctl_knobs_b", "affinity_scope", "cpu", "is bound"),
        (
            "ctl_knobs_u",
            "affinity_scope",
            "galaxy",
            "expected cpu, smt",
        ),
        ("ctl_knobs_u", "affinity_strict", "2", "expected 0 or 1"),
        ("ctl_knobs_u", "nice", "99", "out of range"),
        ("ctl_knobs_u", "nice", "x", "expected an integer"),
        ("ctl_knobs_u", "max_active", "0", "max_active"),
        ("ctl_knobs_u", "cpumask", "0", "selects no CPU"),
        ("ctl_knobs_u", "cpumask", "zz", "bad hex"),
        ("ctl_knobs_u", "cpus", "5-3", "5-3"),
        ("ctl_knobs_u", "colour", "blue", "unknown knob"),
        ("no_such_wq_here", "nice", "0", "no workqueue named"),
    ] {
        let e = c.set(wq, knob, value).unwrap_err().to_string();
        assert!(
            e.contains(reason),
            "{wq} {knob}={value}: {e:?} lacks {reason:?}"
        );
    }
    assert_eq!(ub.attrs(), before, "a refused write changed nothing");
    // The connection still works after all the refusals.
    assert_eq!(c.ping().unwrap(), std::process::id());
}

/// `cpumask` takes the mask as sysfs writes it and as `cmwq dump` prints it
/// (`cpumask_str`), and a refusal repeats the mask as the user wrote it.
#[test]
fn cpumask_takes_the_sysfs_form_and_the_form_dump_prints() {
    use cmwq::topology::{Topology, cpumask_str};
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path());
    // 72 CPUs (folded onto the real ones): masks of three words.
    let t = Topology::from_synthetic("pack:1 l3:1 core:72 pu:1").unwrap();
    let wq = Workqueue::builder("ctl_hexforms")
        .unbound()
        .topology(std::sync::Arc::new(t))
        .build()
        .unwrap();
    let mut c = Client::connect_path(srv.path()).unwrap();
    for (value, cpus) in [
        ("00000001,00000000", vec![32]),
        ("0x0 00000001", vec![32]),
        ("0x1 0x0 00000080", vec![0, 71]),
        ("80,00000000,00000001", vec![0, 71]),
        ("30", vec![4, 5]),
    ] {
        let a = c.set("ctl_hexforms", "cpumask", value).unwrap();
        assert_eq!(a.cpumask, cpus, "{value}");
        assert_eq!(wq.attrs().cpumask, cpus, "{value}");
    }
    // What dump prints for a mask is accepted back as the same mask.
    let cpus = vec![3, 31, 32, 64, 70];
    let printed = cpumask_str(&cpus);
    assert_eq!(
        c.set("ctl_hexforms", "cpumask", &printed).unwrap().cpumask,
        cpus
    );
    assert_eq!(control::echo_cpumask(&printed, &cpus), printed);
    // No CPU of the workqueue's: refused, echoing the hex the user gave.
    let e = c
        .set("ctl_hexforms", "cpumask", "1,0,0,0,0")
        .unwrap_err()
        .to_string();
    assert!(e.contains("cpumask 1,0,0,0,0 has no CPU"), "{e}");
    assert!(!e.contains("cpumask 128"), "echoed as a cpu list: {e}");
    assert_eq!(wq.attrs().cpumask, cpus);
}

#[test]
fn a_peer_of_another_uid_is_refused_before_any_request() {
    let dir = tempfile::tempdir().unwrap();
    // Pretend the process belongs to another user: our own connection is then
    // the foreign peer, and SO_PEERCRED must catch it.
    let other = common::euid().wrapping_add(1);
    let srv = control::serve_at(&dir.path().join("ctl/o.sock"), Some(other)).unwrap();
    let mut c = Client::connect_path(srv.path()).unwrap();
    let e = c.snapshot().unwrap_err().to_string();
    assert!(e.contains("permission denied"), "{e}");
    assert!(e.contains(&format!("owner uid {other}")), "{e}");
    // The refusal comes unasked, and then the connection is closed.
    let s = UnixStream::connect(srv.path()).unwrap();
    let mut r = std::io::BufReader::new(s);
    let mut first = String::new();
    std::io::BufRead::read_line(&mut r, &mut first).unwrap();
    assert!(first.contains("permission denied"), "{first:?}");
    let mut rest = Vec::new();
    let _ = r.read_to_end(&mut rest);
    assert!(rest.is_empty(), "nothing after the refusal: {rest:?}");
}

#[test]
fn malformed_and_oversized_requests_do_not_harm_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path());
    let mut c = Client::connect_path(srv.path()).unwrap();
    for junk in [
        &b"hello"[..],
        b"{\"op\":",
        b"\xff\xfe\xfd",
        b"{\"op\":\"set\",\"workqueue\":1}",
        b"{\"op\":\"shutdown\"}",
    ] {
        let reply = c.raw(junk).unwrap();
        assert!(reply.contains("\"ok\":false"), "{reply}");
        assert!(reply.contains("malformed request"), "{reply}");
    }
    assert_eq!(
        c.ping().unwrap(),
        std::process::id(),
        "same connection still served"
    );

    // A line longer than the limit: refused, connection closed.
    let mut s = UnixStream::connect(srv.path()).unwrap();
    let big = vec![b'x'; MAX_REQUEST + 10];
    let _ = s.write_all(&big);
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    assert!(reply.contains("request too large"), "{reply:?}");
    assert!(ping_ok(srv.path()));

    // A request that ends without a newline is still answered.
    let mut s = UnixStream::connect(srv.path()).unwrap();
    s.write_all(b"{\"op\":\"ping\"}").unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    assert!(reply.contains("\"ok\":true"), "{reply:?}");
}

#[test]
fn connections_beyond_the_limit_are_told_busy_and_served_later() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path());
    // Hold the limit's worth of connections, each proven served.
    let held: Vec<Client> = (0..MAX_CONNECTIONS)
        .map(|_| {
            let mut c = Client::connect_path(srv.path()).unwrap();
            c.ping().unwrap();
            c
        })
        .collect();
    let mut extra = UnixStream::connect(srv.path()).unwrap();
    let mut reply = String::new();
    let _ = extra.read_to_string(&mut reply);
    assert!(reply.contains("busy"), "{reply:?}");
    drop(held);
    // The server threads notice the closed connections; then there is room.
    let mut ok = false;
    for _ in 0..500 {
        if ping_ok(srv.path()) {
            ok = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(ok, "the server never took a connection again");
}

#[test]
fn a_directory_others_can_enter_or_a_symlink_is_refused() {
    let base = tempfile::tempdir().unwrap();
    let open = base.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
    let e = control::serve_at(&open.join("x.sock"), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("lets others in"), "{e}");
    let link = base.path().join("link");
    let private = base.path().join("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::symlink(&private, &link).unwrap();
    let e = control::serve_at(&link.join("x.sock"), None);
    // The socket's parent is the symlink itself: refused as not a directory.
    assert!(e.unwrap_err().to_string().contains("not a directory"));
    // A missing directory is created private; only the last component: a
    // missing parent is named, not made (a typo must not grow a tree).
    let deep = base.path().join("x/y");
    let e = control::serve_at(&deep.join("x.sock"), None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!(
            "its parent {} does not exist",
            base.path().join("x").display()
        )),
        "{e}"
    );
    assert!(
        !base.path().join("x").exists(),
        "the missing parent was made"
    );
    // A file where the directory should be is not a directory, not "File exists".
    let file = base.path().join("file");
    std::fs::write(&file, b"").unwrap();
    let e = control::serve_at(&file.join("x.sock"), None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("not a directory") && !e.contains("exists (os error"),
        "{e}"
    );
    let fresh = base.path().join("a");
    let s = control::serve_at(&fresh.join("x.sock"), None).unwrap();
    let mode = std::fs::metadata(&fresh).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    let p: PathBuf = s.path().to_path_buf();
    drop(s);
    assert!(!p.exists(), "the socket is removed when the server stops");
}

#[test]
fn connecting_to_a_stale_socket_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let p = {
        let s = server(dir.path());
        s.path().to_path_buf()
    };
    // Recreate a dead socket file: bind and drop a listener without a server.
    drop(std::os::unix::net::UnixListener::bind(&p).unwrap());
    let e = Client::connect_path(&p).unwrap_err().to_string();
    assert!(e.contains("stale socket"), "{e}");
}

#[test]
fn a_socket_whose_process_runs_but_does_not_listen_is_not_called_exited() {
    let dir = tempfile::tempdir().unwrap();
    // Named by a process that runs (this one) but with nobody listening.
    let p = dir.path().join(format!("{}.sock", std::process::id()));
    drop(std::os::unix::net::UnixListener::bind(&p).unwrap());
    let e = Client::connect_path(&p).unwrap_err().to_string();
    assert!(e.contains("not serving") && e.contains("runs"), "{e}");
    assert!(!e.contains("exited"), "{e}");
}

#[test]
fn a_server_that_does_not_answer_is_given_up_after_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    // A listener nobody accepts on: the connection waits in its backlog, as
    // with a stopped process.
    let p = dir.path().join(format!("{}.sock", std::process::id()));
    let _l = std::os::unix::net::UnixListener::bind(&p).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let path = p.clone();
    std::thread::spawn(move || {
        let r = Client::connect_path_timeout(&path, std::time::Duration::from_millis(200))
            .and_then(|mut c| c.ping());
        let _ = tx.send(r);
    });
    // Generous: only a hang fails this.
    let r = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("the client waited past its timeout");
    let e = r.unwrap_err().to_string();
    assert!(e.contains("not answering"), "{e}");
    assert!(e.contains(&format!("pid {}", std::process::id())), "{e}");
    assert!(e.contains("200ms"), "{e}");
}

#[test]
fn a_huge_cpu_list_costs_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path());
    let _wq = Workqueue::builder("ctl_huge_list")
        .unbound()
        .build()
        .unwrap();
    // ~60 KB of full ranges: a parser that expands before deduplicating
    // would need gigabytes; this one needs 8 KiB.
    let list = vec!["0-65535"; 7000].join(",");
    let mut c = Client::connect_path(srv.path()).unwrap();
    let attrs = c.set("ctl_huge_list", "cpus", &list).unwrap();
    assert_eq!(attrs.cpumask, cmwq::snapshot().topology.online);
}

#[test]
fn a_live_socket_is_not_replaced_and_a_stale_one_is() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path());
    let e = control::serve_at(srv.path(), None).unwrap_err().to_string();
    assert!(e.contains("another server is listening"), "{e}");
    assert!(ping_ok(srv.path()), "the live server was left alone");
    let p = srv.path().to_path_buf();
    drop(srv);
    drop(std::os::unix::net::UnixListener::bind(&p).unwrap()); // a stale file
    let again = control::serve_at(&p, None).expect("a stale socket is replaced");
    assert!(ping_ok(again.path()));
}

#[test]
fn a_server_stops_even_when_its_socket_file_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server(dir.path());
    std::fs::remove_file(srv.path()).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(srv);
        let _ = tx.send(());
    });
    assert!(
        rx.recv_timeout(std::time::Duration::from_secs(60)).is_ok(),
        "dropping the server hung"
    );
}

/// A snapshot in progress must not take over destroying a workqueue: the
/// owner's last drop still drains it before returning.
#[test]
fn snapshots_do_not_steal_the_last_drop() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    let stop = Arc::new(AtomicBool::new(false));
    // Queues the snapper has seen so far: the drops go on until it has seen
    // some, so the two overlap however late the snapper thread first runs
    // (CI once saw it take none in 200 drops on a loaded machine).
    let seen = Arc::new(AtomicU64::new(0));
    let snapper = {
        let (stop, seen) = (stop.clone(), seen.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let n = cmwq::snapshot().workqueues.len() as u64;
                seen.fetch_add(n, Ordering::SeqCst);
            }
            seen.load(Ordering::SeqCst)
        })
    };
    let mut early = 0;
    let mut i = 0;
    while i < 200 || (seen.load(Ordering::SeqCst) == 0 && i < 20_000) {
        i += 1;
        let wq = Workqueue::builder(&format!("ctl_drop_{i}"))
            .unbound()
            .build()
            .unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        let w = Work::new(move || {
            std::thread::sleep(std::time::Duration::from_micros(200));
            r.fetch_add(1, Ordering::SeqCst);
        });
        wq.queue(&w);
        drop(wq);
        if ran.load(Ordering::SeqCst) != 1 {
            early += 1;
        }
    }
    stop.store(true, Ordering::SeqCst);
    assert!(snapper.join().unwrap() > 0);
    assert_eq!(early, 0, "drop returned before its queued work ran");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    /// Any bytes over a real connection: the server keeps serving.
    #[test]
    fn server_survives_random_bytes(
        chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..6),
        json_like in proptest::collection::vec("[{}\\[\\]\":,a-z0-9 ]{0,40}", 0..4),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let srv = server(dir.path());
        let mut s = UnixStream::connect(srv.path()).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(20))).unwrap();
        for c in &chunks {
            let _ = s.write_all(c);
        }
        for j in &json_like {
            let _ = s.write_all(j.as_bytes());
            let _ = s.write_all(b"\n");
        }
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        // Every reply line is a well-formed reply.
        for line in out.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let r: control::Response = serde_json::from_slice(line).expect("a reply");
            prop_assert_eq!(r.pid, std::process::id());
        }
        prop_assert!(ping_ok(srv.path()));
    }
}
