//! The child-side setup of `subcontract::act::sandbox`: what a command must have from its very
//! first instruction, so no window exists in which it runs without it.
//!
//! A resource limit or a cgroup set from the parent after the spawn races the child (it may
//! fork or write before the limit lands), and a process's rlimits and (in cgroup v2) its cgroup
//! are per process, so the parent cannot set them on a spawning thread alone. The only
//! race-free place is the child between `fork` and `exec`, which `std` reaches only through
//! the `unsafe` [`CommandExt::pre_exec`](std::os::unix::process::CommandExt::pre_exec). This
//! crate holds that one hook, with the invariants it keeps written beside it; the library
//! itself keeps `unsafe_code = "forbid"`.
//!
//! On targets other than Linux the crate is empty but for [`SUPPORTED`] (`false`).
#![cfg_attr(not(target_os = "linux"), forbid(unsafe_code))]
#![deny(unsafe_op_in_unsafe_fn)]

#[cfg(target_os = "linux")]
use std::os::fd::OwnedFd;
#[cfg(target_os = "linux")]
use std::process::Command;

/// What the child sets on itself before it runs the program.
#[cfg(target_os = "linux")]
#[derive(Debug, Default)]
pub struct ChildSetup {
    /// The `cgroup.procs` file of the cgroup the child joins (it writes `0`, "myself"), so it
    /// and everything it forks are counted and limited there from the start. Opened
    /// (write-only, close-on-exec) by the parent before any sandboxing: a child already
    /// restricted by Landlock could not open it, but may write to a file opened before.
    pub cgroup_procs: Option<OwnedFd>,
    /// `RLIMIT_FSIZE`, soft and hard: the largest file the command may write, in bytes.
    pub max_file_bytes: Option<u64>,
    /// `RLIMIT_CORE` = 0: a crashing command writes no core file.
    pub no_core_dumps: bool,
}

/// Whether this target has the hook (Linux only).
pub const SUPPORTED: bool = cfg!(target_os = "linux");

/// Arranges for the child spawned from `cmd` to apply `setup` to itself before `exec`: the
/// spawn fails (with the OS error) when any step fails, so a command never runs without it.
#[cfg(target_os = "linux")]
pub fn confine(cmd: &mut Command, setup: ChildSetup) {
    use std::os::unix::process::CommandExt;
    let ChildSetup {
        cgroup_procs,
        max_file_bytes,
        no_core_dumps,
    } = setup;
    // SAFETY: `pre_exec` runs the closure in the forked child, where only async-signal-safe
    // work is sound (another thread of the parent may have held the allocator's lock at the
    // fork). The closure keeps to that: it allocates nothing (the cgroup file was opened
    // before the fork; `io::Error::last_os_error` stores only the errno), takes no lock, and
    // calls only `write` and `setrlimit`, which POSIX lists as async-signal-safe (`setrlimit`
    // is a plain system call on Linux). It touches no state
    // of the parent's (the child's memory is a copy) and returns an error instead of
    // panicking.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(fd) = &cgroup_procs {
                join_cgroup(fd)?;
            }
            if let Some(bytes) = max_file_bytes {
                set_limit(libc::RLIMIT_FSIZE, bytes)?;
            }
            if no_core_dumps {
                set_limit(libc::RLIMIT_CORE, 0)?;
            }
            Ok(())
        });
    }
}

/// Moves the calling process into the cgroup whose `cgroup.procs` is open as `procs`. Runs
/// in the forked child: one `write`, no allocation. The descriptor is close-on-exec, so the
/// program never sees it.
#[cfg(target_os = "linux")]
fn join_cgroup(procs: &OwnedFd) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // "0" names the writer itself, in both cgroup versions.
    let byte = b"0";
    // SAFETY: the descriptor is open (the closure owns it) and the buffer is a live 1-byte
    // static.
    let written = unsafe { libc::write(procs.as_raw_fd(), byte.as_ptr().cast(), 1) };
    if written != 1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The type `setrlimit` takes its resource as (glibc names it; musl uses a plain int).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
type Resource = libc::__rlimit_resource_t;
#[cfg(all(target_os = "linux", not(target_env = "gnu")))]
type Resource = libc::c_int;

/// Sets soft and hard `resource` limits to `value`. Runs in the forked child.
#[cfg(target_os = "linux")]
fn set_limit(resource: Resource, value: u64) -> std::io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: value as libc::rlim_t,
        rlim_max: value as libc::rlim_t,
    };
    // SAFETY: `lim` is a valid, initialised `rlimit` on the stack for the whole call.
    if unsafe { libc::setrlimit(resource, &lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
