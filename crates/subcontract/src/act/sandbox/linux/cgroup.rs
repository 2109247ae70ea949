//! Per-command `pids` cgroups: the process limit, and the list of every process a command
//! started (`setsid` does not leave a cgroup), which is how all of them are killed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::process::{pidfd_open, pidfd_send_signal, Pid, PidfdFlags, Signal};

/// The directory holding every command's cgroup, beneath the process's own `pids` cgroup
/// (v1) or the `cgroup2` hierarchy with `pids` delegated to it (v2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Base {
    pub(super) dir: PathBuf,
    pub(super) v2: bool,
}

const PARENT: &str = "subcontract-sandbox";

impl Base {
    /// Finds a `pids` hierarchy and makes (or finds) this crate's directory in it.
    pub(super) fn find() -> Result<Self, String> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
        let own = std::fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
        let mut why = Vec::new();
        match v2(&mountinfo, &own) {
            Ok(base) => return Ok(base),
            Err(e) => why.push(format!("cgroup v2: {e}")),
        }
        match v1(&mountinfo, &own) {
            Ok(base) => return Ok(base),
            Err(e) => why.push(format!("cgroup v1: {e}")),
        }
        Err(format!(
            "no writable pids cgroup ({}); the sandbox needs root or a delegated cgroup",
            why.join("; ")
        ))
    }
}

/// (mount point, mount root, super options) of each mount of `fstype`.
fn mounts<'a>(mountinfo: &'a str, fstype: &str) -> Vec<(&'a str, &'a str, &'a str)> {
    mountinfo
        .lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let pre: Vec<&str> = pre.split(' ').collect();
            let mut post = post.split(' ');
            (post.next()? == fstype).then_some(())?;
            let _source = post.next()?;
            Some((*pre.get(4)?, *pre.get(3)?, post.next().unwrap_or("")))
        })
        .collect()
}

/// `own` (a path in the hierarchy) as a directory beneath `mount` whose root is `root`.
fn dir_of(mount: &str, root: &str, own: &str) -> Option<PathBuf> {
    let rel = own.strip_prefix(root.trim_end_matches('/'))?;
    Some(Path::new(mount).join(rel.trim_start_matches('/')))
}

fn v1(mountinfo: &str, own: &str) -> Result<Base, String> {
    let (mount, root, _) = mounts(mountinfo, "cgroup")
        .into_iter()
        .find(|(_, _, opts)| opts.split(',').any(|o| o == "pids"))
        .ok_or("no pids hierarchy is mounted")?;
    let own = own
        .lines()
        .filter_map(|l| {
            // `N:controllers:path`; the path may hold colons.
            let mut parts = l.splitn(3, ':');
            parts.next()?;
            Some((parts.next()?, parts.next()?))
        })
        .find(|(ctrl, _)| ctrl.split(',').any(|c| c == "pids"))
        .map_or("/", |(_, path)| path);
    let base = dir_of(mount, root, own).ok_or("this process's pids cgroup is not mounted")?;
    let dir = base.join(PARENT);
    mkdir(&dir)?;
    if !dir.join("pids.max").exists() {
        return Err(format!("{} has no pids.max", dir.display()));
    }
    Ok(Base { dir, v2: false })
}

fn v2(mountinfo: &str, own: &str) -> Result<Base, String> {
    let (mount, root, _) = mounts(mountinfo, "cgroup2")
        .into_iter()
        .next()
        .ok_or("not mounted")?;
    let own = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or("/");
    // Beneath the process's own cgroup when it may delegate (the root, or one without
    // processes of its own); else beneath the hierarchy's root.
    let mut tried = Vec::new();
    for base in [dir_of(mount, root, own), Some(PathBuf::from(mount))]
        .into_iter()
        .flatten()
    {
        match v2_under(&base) {
            Ok(dir) => return Ok(Base { dir, v2: true }),
            Err(e) => tried.push(e),
        }
    }
    Err(tried.join("; "))
}

fn v2_under(base: &Path) -> Result<PathBuf, String> {
    let controllers = std::fs::read_to_string(base.join("cgroup.controllers"))
        .map_err(|e| format!("{}: {e}", base.display()))?;
    if !controllers.split_whitespace().any(|c| c == "pids") {
        return Err(format!(
            "{}: the pids controller is not available",
            base.display()
        ));
    }
    let dir = base.join(PARENT);
    mkdir(&dir)?;
    enable_pids(base)?;
    enable_pids(&dir)?;
    Ok(dir)
}

fn enable_pids(dir: &Path) -> Result<(), String> {
    let control = dir.join("cgroup.subtree_control");
    let now = std::fs::read_to_string(&control).unwrap_or_default();
    if now.split_whitespace().any(|c| c == "pids") {
        return Ok(());
    }
    std::fs::write(&control, "+pids").map_err(|e| format!("{}: {e}", control.display()))
}

fn mkdir(dir: &Path) -> Result<(), String> {
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(format!("cannot create {}: {e}", dir.display())),
    }
}

/// Kills every process in, and removes, each cgroup beneath `base` whose name `ended` says
/// belongs to a process that died: what a host killed with `kill -9` mid-command left running.
/// Returns how many were removed; one whose processes do not leave within a second is left
/// for the next start, with a warning.
pub(super) fn remove_stale(base: &Base, ended: impl Fn(&str) -> bool) -> usize {
    let Ok(entries) = std::fs::read_dir(&base.dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_str().is_some_and(&ended) || !entry.path().is_dir() {
            continue;
        }
        let cg = Cgroup {
            dir: entry.path(),
            v2: base.v2,
            // Never removed in the background: this runs once, on the caller's thread.
            removed: true,
        };
        let gone = (0..100).any(|_| {
            cg.kill_all();
            let ok = std::fs::remove_dir(&cg.dir).is_ok();
            if !ok {
                std::thread::sleep(Duration::from_millis(10));
            }
            ok
        });
        if gone {
            removed += 1;
            tracing::info!(cgroup = %cg.dir.display(), "killed a dead host's command and removed its cgroup");
        } else {
            tracing::warn!(cgroup = %cg.dir.display(), "a dead host's command cgroup could not be removed yet");
        }
    }
    removed
}

/// One command's cgroup. Dropping it kills every process in it and removes it (in the
/// background when processes take a moment to die).
#[derive(Debug)]
pub(super) struct Cgroup {
    dir: PathBuf,
    v2: bool,
    removed: bool,
}

impl Cgroup {
    /// A new cgroup beneath `base` holding at most `max_processes` tasks.
    pub(super) fn create(base: &Base, max_processes: u32) -> std::io::Result<Self> {
        // Named after this process (id and start time), so that the next start can tell a
        // dead process's cgroup from a live one's (`remove_stale`).
        let dir = loop {
            let dir = base.dir.join(crate::act::lease::owned_name(""));
            match std::fs::create_dir(&dir) {
                Ok(()) => break dir,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        };
        let cg = Self {
            dir,
            v2: base.v2,
            removed: false,
        };
        std::fs::write(cg.dir.join("pids.max"), max_processes.max(1).to_string())?;
        Ok(cg)
    }

    /// The `cgroup.procs` file the child writes itself into, opened write-only (and
    /// close-on-exec, as every file `std` opens).
    pub(super) fn procs_file(&self) -> std::io::Result<std::os::fd::OwnedFd> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(self.dir.join("cgroup.procs"))?;
        Ok(file.into())
    }

    /// The processes alive in the cgroup.
    fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// Sends SIGKILL to every process in the cgroup; returns how many were alive.
    pub(super) fn kill_all(&self) -> usize {
        if self.v2 && std::fs::write(self.dir.join("cgroup.kill"), "1").is_ok() {
            return self.pids().len();
        }
        let listed = self.pids();
        if listed.is_empty() {
            return 0;
        }
        // A pid read from the list may have been reaped and reused by an unrelated process
        // before it is signalled: open pidfds first (they pin the process), then signal only
        // those still listed in the cgroup afterwards.
        let fds: Vec<_> = listed
            .iter()
            .filter_map(|&p| {
                let pid = Pid::from_raw(p)?;
                pidfd_open(pid, PidfdFlags::empty()).ok().map(|fd| (p, fd))
            })
            .collect();
        let still = self.pids();
        for (p, fd) in &fds {
            if still.contains(p) {
                let _ = pidfd_send_signal(fd, Signal::KILL);
            }
        }
        listed.len()
    }

    /// Kills until no process is left (a process forking while the list is read is caught
    /// by the next round), for at most `patience`.
    pub(super) async fn kill_until_empty(&self, patience: Duration) {
        let until = Instant::now() + patience;
        while self.kill_all() > 0 && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Kills until the cgroup is empty, then removes it (within `patience`).
    pub(super) async fn finish(mut self, patience: Duration) {
        let until = Instant::now() + patience;
        loop {
            self.kill_all();
            if std::fs::remove_dir(&self.dir).is_ok() {
                self.removed = true;
                return;
            }
            if Instant::now() >= until {
                tracing::warn!(cgroup = %self.dir.display(), "command cgroup not yet empty; removing it in the background");
                return; // Drop takes over.
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        // Kill now, synchronously: the future may have been dropped because the run ended.
        self.kill_all();
        if std::fs::remove_dir(&self.dir).is_ok() {
            return;
        }
        let dir = std::mem::take(&mut self.dir);
        let v2 = self.v2;
        // Dying processes leave the cgroup within moments; remove it off this thread.
        let _ = std::thread::Builder::new()
            .name("subcontract-cgroup-reap".to_owned())
            .spawn(move || {
                let cg = Cgroup {
                    dir,
                    v2,
                    removed: true,
                };
                for _ in 0..1000 {
                    cg.kill_all();
                    if std::fs::remove_dir(&cg.dir).is_ok() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                tracing::warn!(cgroup = %cg.dir.display(), "command cgroup could not be removed");
            });
    }
}
