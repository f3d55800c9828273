//! The path to a control socket: every directory above the socket's own must
//! be one nobody but root or us can rearrange, or the private directory at
//! its end protects nothing (someone who can rename an ancestor can put their
//! own directory in its place). Each refusal names the component and what is
//! wrong with it, and makes nothing under it.
//!
//! The cases with another owner need `chown`, so they run only as root (and
//! say so when skipped).

mod common;

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use cmwq::control;

fn mkdir(p: &Path, mode: u32) -> PathBuf {
    std::fs::create_dir(p).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    p.to_path_buf()
}

/// serve_at's error for a socket in `dir/ctl`, checking nothing was made.
fn refused(dir: &Path) -> String {
    let e = control::serve_at(&dir.join("ctl/x.sock"), None)
        .expect_err("served under an unsafe ancestor")
        .to_string();
    assert!(
        std::fs::symlink_metadata(dir.join("ctl")).is_err(),
        "{} was made: {e}",
        dir.join("ctl").display()
    );
    e
}

fn root() -> bool {
    let r = common::euid() == 0;
    if !r {
        eprintln!("not root: skipped the cases that need another owner (chown)");
    }
    r
}

#[test]
fn an_ancestor_others_can_write_is_refused_unless_sticky() {
    let base = tempfile::tempdir().unwrap();
    let open = mkdir(&base.path().join("open"), 0o777);
    let e = refused(&open);
    assert!(
        e.contains(&format!("component {} (mode 777)", open.display())),
        "{e}"
    );
    assert!(e.contains("writable by others and not sticky"), "{e}");
    // Deeper down too: the whole path is checked, not only the parent.
    let deep = mkdir(&open.join("deep"), 0o755);
    let e = refused(&deep);
    assert!(e.contains(&format!("component {} ", open.display())), "{e}");

    // A sticky directory (like /tmp) is fine: others cannot rename our entries.
    let sticky = mkdir(&base.path().join("sticky"), 0o1777);
    let s = control::serve_at(&sticky.join("ctl/x.sock"), None).expect("sticky is safe");
    drop(s);

    // Group-writable by a group that is not ours: its members could.
    if root() {
        let grp = mkdir(&base.path().join("grp"), 0o775);
        std::os::unix::fs::chown(&grp, None, Some(65534)).unwrap();
        let e = refused(&grp);
        assert!(e.contains("writable by group 65534"), "{e}");
    }
}

#[test]
fn an_ancestor_or_symlink_owned_by_another_user_is_refused() {
    if !root() {
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let theirs = mkdir(&base.path().join("theirs"), 0o755);
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    let e = refused(&theirs);
    assert!(
        e.contains(&format!(
            "component {} is owned by uid 65534",
            theirs.display()
        )),
        "{e}"
    );

    // A symlink on the way owned by someone else, even to a safe directory.
    let private = mkdir(&base.path().join("private"), 0o700);
    let link = base.path().join("link");
    symlink(&private, &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).unwrap();
    let e = refused(&link);
    assert!(
        e.contains(&format!(
            "component {} is a symlink owned by uid 65534",
            link.display()
        )),
        "{e}"
    );
    assert!(std::fs::read_dir(&private).unwrap().next().is_none());

    // Our own symlink to a safe directory is fine...
    let ours = base.path().join("ours");
    symlink(&private, &ours).unwrap();
    let s = control::serve_at(&ours.join("ctl/x.sock"), None).expect("our symlink is safe");
    drop(s);
    // ...but not one leading into a directory someone else owns.
    let into = base.path().join("into");
    symlink(&theirs, &into).unwrap();
    let e = refused(&into);
    assert!(e.contains("owned by uid 65534"), "{e}");
}
