//! The confinement of a command's spawning thread (inherited by the command): no
//! capabilities, and a Landlock ruleset; plus what Landlock the kernel offers.

use std::path::PathBuf;

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};

/// Every ABI the `landlock` crate knows, newest first.
const ABIS: [ABI; 10] = [
    ABI::V10,
    ABI::V9,
    ABI::V8,
    ABI::V7,
    ABI::V6,
    ABI::V5,
    ABI::V4,
    ABI::V3,
    ABI::V2,
    ABI::V1,
];

/// What Landlock offers: the newest ABI whose file-system rights and whose network rights the
/// kernel takes as hard requirements, and whether scoping works.
#[derive(Debug, Clone, Copy)]
pub(super) struct Abi {
    pub(super) fs: Option<ABI>,
    pub(super) net: Option<ABI>,
    pub(super) scope: bool,
}

impl Abi {
    /// Tries rulesets that *require* each ABI's rights (nothing is downgraded quietly): the
    /// newest that the kernel creates is what it has.
    pub(super) fn detect() -> Self {
        let strict = || Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
        let fs = ABIS.into_iter().find(|&abi| {
            strict()
                .handle_access(AccessFs::from_all(abi))
                .and_then(|r| r.create())
                .is_ok()
        });
        let net = ABIS.into_iter().filter(|&abi| abi >= ABI::V4).find(|&abi| {
            strict()
                .handle_access(AccessNet::from_all(abi))
                .and_then(|r| r.create())
                .is_ok()
        });
        let scope = strict()
            .scope(Scope::from_all(ABI::V6))
            .and_then(|r| r.create())
            .is_ok();
        Self { fs, net, scope }
    }
}

/// The rules of one command.
pub(super) struct Rules {
    pub(super) abi: Abi,
    /// Directories the command may write beneath.
    pub(super) writable: Vec<PathBuf>,
    /// Whether TCP (and what else the ABI covers of the network) stays open.
    pub(super) network: bool,
}

impl Rules {
    /// Restricts the calling thread (and what it spawns from now on): read and execute
    /// everywhere, write only beneath `writable` and to `/dev/null`, the network closed
    /// unless allowed, abstract sockets and signals scoped. Every right is a hard
    /// requirement: when the kernel cannot enforce one, this fails instead of weakening.
    pub(super) fn restrict_current_thread(&self) -> Result<(), String> {
        drop_capabilities()?;
        let Some(fs) = self.abi.fs.filter(|&a| a >= ABI::V3) else {
            return Err("Landlock cannot confine writes on this kernel".to_owned());
        };
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(fs))
            .map_err(|e| format!("Landlock file-system rules: {e}"))?;
        if !self.network {
            let Some(net) = self.abi.net else {
                return Err("Landlock cannot close the network on this kernel".to_owned());
            };
            ruleset = ruleset
                .handle_access(AccessNet::from_all(net))
                .map_err(|e| format!("Landlock network rules: {e}"))?;
        }
        if self.abi.scope {
            ruleset = ruleset
                .scope(Scope::from_all(ABI::V6))
                .map_err(|e| format!("Landlock scopes: {e}"))?;
        }
        let fd = |p: &str| PathFd::new(p).map_err(|e| format!("Landlock rule for {p}: {e}"));
        let (root, null) = (fd("/")?, fd("/dev/null")?);
        let mut created = ruleset
            .create()
            .map_err(|e| format!("Landlock ruleset: {e}"))?
            .add_rule(PathBeneath::new(root, AccessFs::from_read(fs)))
            .and_then(|r| r.add_rule(PathBeneath::new(null, AccessFs::from_file(fs))))
            .map_err(|e| format!("Landlock rule: {e}"))?;
        for dir in &self.writable {
            let dir_fd = PathFd::new(dir)
                .map_err(|e| format!("Landlock rule for {}: {e}", dir.display()))?;
            created = created
                .add_rule(PathBeneath::new(dir_fd, AccessFs::from_all(fs)))
                .map_err(|e| format!("Landlock rule for {}: {e}", dir.display()))?;
        }
        let status = created
            .restrict_self()
            .map_err(|e| format!("Landlock restrict_self: {e}"))?;
        if status.ruleset != RulesetStatus::FullyEnforced || !status.no_new_privs {
            return Err(format!("Landlock was not fully enforced: {status:?}"));
        }
        Ok(())
    }
}

/// Empties the calling thread's capability sets and bounding set (and its ambient set), so
/// that a command it spawns has no capability even when it runs as root: root's capabilities
/// would let it step around Landlock (`CAP_SYS_PTRACE` reads and writes the host's memory
/// and environment) and the cgroup. Nothing the thread does afterwards needs one: the
/// cgroup file is already open, rlimits are only lowered.
fn drop_capabilities() -> Result<(), String> {
    use rustix::io::Errno;
    use rustix::thread::{
        capabilities, capability_is_in_bounding_set, clear_ambient_capability_set,
        remove_capability_from_bounding_set, set_capabilities, CapabilitySet, CapabilitySets,
    };
    let none = CapabilitySet::empty();
    let had = capabilities(None).map_err(|e| format!("reading capabilities: {e}"))?;
    match clear_ambient_capability_set() {
        Ok(()) | Err(Errno::INVAL) => {} // No ambient capabilities on this kernel.
        Err(e) => return Err(format!("clearing ambient capabilities: {e}")),
    }
    // The bounding set is what root regains at `exec`; dropping from it needs CAP_SETPCAP,
    // which a process with no capabilities has no use for (it gains none at `exec` under
    // no_new_privs).
    if !had.permitted.is_empty() {
        for bit in 0..64 {
            match remove_capability_from_bounding_set(CapabilitySet::from_bits_retain(1 << bit)) {
                Ok(()) | Err(Errno::INVAL) => {} // INVAL: past the kernel's last capability.
                Err(e) => return Err(format!("dropping capability {bit}: {e}")),
            }
        }
    }
    set_capabilities(
        None,
        CapabilitySets {
            effective: none,
            permitted: none,
            inheritable: none,
        },
    )
    .map_err(|e| format!("dropping capabilities: {e}"))?;
    let now = capabilities(None).map_err(|e| format!("reading capabilities: {e}"))?;
    let bounded = had.permitted.is_empty()
        || (0..64).all(|bit| {
            capability_is_in_bounding_set(CapabilitySet::from_bits_retain(1 << bit))
                .map_or(true, |kept| !kept)
        });
    if now.effective != none || now.permitted != none || now.inheritable != none || !bounded {
        return Err(format!("capabilities were not dropped: {now:?}"));
    }
    Ok(())
}
