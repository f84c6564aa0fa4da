//! A small disk for the disk-full tests: a tmpfs of a given size mounted on
//! a temp directory (the `postgres` user's, when root), for a tablespace
//! whose tables fill it. Mounting needs root, which is how CI runs; any
//! other user gets a panic saying so (a test never skips silently). It is
//! unmounted and removed when dropped; ones left by a killed test run are
//! unmounted by the next mount.

use std::path::{Path, PathBuf};
use std::process::Command;

use chute_engine::local::RunAs;

const PREFIX: &str = "chute-disk-";

/// A mounted tmpfs.
#[derive(Debug)]
pub struct SmallDisk {
    dir: PathBuf,
}

fn mount(args: &[&str]) {
    let out = Command::new("mount").args(args).output().unwrap_or_else(|e| panic!("test fixture: cannot run mount: {e}"));
    assert!(
        out.status.success(),
        "test fixture: mount {args:?} failed (the disk-full tests mount a tmpfs, which needs root: run them as root, as CI does): {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl SmallDisk {
    /// A tmpfs of `mb` MiB, empty, owned by the user the servers run as.
    pub fn mount(mb: u64) -> SmallDisk {
        let dir = crate::fresh_owned_dir(PREFIX, |left| {
            let _ = Command::new("umount").arg("-l").arg(left).output();
        });
        mount(&["-t", "tmpfs", "-o", &format!("size={mb}m,mode=0700"), "tmpfs", &dir.to_string_lossy()]);
        if let Some(r) = RunAs::for_current_user().unwrap_or_else(|e| panic!("test fixture: {e}")) {
            r.chown(&dir).expect("cannot hand the small disk to the postgres user");
        }
        SmallDisk { dir }
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Makes it `mb` MiB, keeping what it holds: space freed.
    pub fn grow(&self, mb: u64) {
        mount(&["-o", &format!("remount,size={mb}m"), &self.dir.to_string_lossy()]);
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
