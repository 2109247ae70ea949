//! Approval gates: every tool call, including a call of a sub-agent, asks the gate first.
//!
//! A child inherits its parent's gate and may only add gates to the chain (invariant 7): a
//! call is allowed when every gate in the chain allows it, so a child can be stricter than its
//! parent, never looser.

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

/// What a gate is asked about.
#[derive(Debug, Clone, Copy)]
pub struct ApprovalRequest<'a> {
    /// Run id of the run making the call.
    pub run_id: &'a str,
    /// Spec of the run making the call.
    pub spec: &'a str,
    /// Depth of the run making the call (the host is 0).
    pub depth: u32,
    /// The tool called.
    pub tool: &'a str,
    /// Its (already validated) arguments.
    pub arguments: &'a Value,
}

/// A gate's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Go ahead.
    Allow,
    /// Refuse, with a reason the model will read.
    Deny(String),
}

/// Decides whether a tool call may run. Asynchronous so that a gate can ask a person.
#[async_trait]
pub trait ApprovalGate: Send + Sync {
    /// Allow or deny one call.
    async fn approve(&self, request: ApprovalRequest<'_>) -> Decision;
}

/// Denies a fixed set of tools, everywhere below the context that adds it.
#[derive(Debug, Clone, Default)]
pub struct DenyTools {
    names: HashSet<String>,
}

impl DenyTools {
    /// Denies each tool in `names`.
    pub fn new<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Self {
        DenyTools {
            names: names.into_iter().map(Into::into).collect(),
        }
    }
}

#[async_trait]
impl ApprovalGate for DenyTools {
    async fn approve(&self, request: ApprovalRequest<'_>) -> Decision {
        if self.names.contains(request.tool) {
            Decision::Deny(format!("tool `{}` is not allowed here", request.tool))
        } else {
            Decision::Allow
        }
    }
}

/// A gate from a synchronous function.
pub struct FnGate<F>(pub F);

#[async_trait]
impl<F> ApprovalGate for FnGate<F>
where
    F: Fn(ApprovalRequest<'_>) -> Decision + Send + Sync,
{
    async fn approve(&self, request: ApprovalRequest<'_>) -> Decision {
        (self.0)(request)
    }
}

/// The chain of gates a context holds. Empty allows everything.
#[derive(Clone, Default)]
pub struct Gate {
    chain: Arc<[Arc<dyn ApprovalGate>]>,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("gates", &self.chain.len())
            .finish()
    }
}

impl Gate {
    /// A gate that allows every call.
    pub fn allow_all() -> Self {
        Self::default()
    }

    /// A chain of one gate.
    pub fn new(gate: impl ApprovalGate + 'static) -> Self {
        Gate {
            chain: Arc::from(vec![Arc::new(gate) as Arc<dyn ApprovalGate>]),
        }
    }

    /// This chain plus `extra`: what a child uses to be stricter than its parent. There is no
    /// way to remove a gate from a chain.
    pub fn stricter(&self, extra: Arc<dyn ApprovalGate>) -> Self {
        let mut v: Vec<Arc<dyn ApprovalGate>> = self.chain.to_vec();
        v.push(extra);
        Gate {
            chain: Arc::from(v),
        }
    }

    /// Number of gates in the chain.
    pub fn len(&self) -> usize {
        self.chain.len()
    }

    /// Whether the chain is empty (allows everything).
    pub fn is_empty(&self) -> bool {
        self.chain.is_empty()
    }

    /// Asks every gate; the first denial wins.
    pub async fn approve(&self, request: ApprovalRequest<'_>) -> Decision {
        for g in self.chain.iter() {
            if let Decision::Deny(reason) = g.approve(request).await {
                return Decision::Deny(reason);
            }
        }
        Decision::Allow
    }
}
