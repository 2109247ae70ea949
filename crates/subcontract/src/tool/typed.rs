//! Typed tools (arguments and output as Rust types) and tools from closures, both erased to
//! the object-safe [`Tool`].

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use super::{Tool, ToolOutput};
use crate::ctx::Ctx;

/// A tool with typed arguments and output. Its input schema comes from `Args`'s
/// `JsonSchema` implementation, so bounds are written once.
///
/// ```
/// use schemars::JsonSchema;
/// use serde::Deserialize;
/// use subcontract::{Ctx, TypedTool};
///
/// #[derive(Deserialize, JsonSchema)]
/// struct Add { a: i64, b: i64 }
///
/// struct Adder;
///
/// #[async_trait::async_trait]
/// impl TypedTool for Adder {
///     type Args = Add;
///     type Output = i64;
///     fn name(&self) -> &str { "add" }
///     fn description(&self) -> &str { "Adds two integers." }
///     async fn call(&self, args: Add, _ctx: &Ctx) -> Result<i64, String> {
///         args.a.checked_add(args.b).ok_or_else(|| "overflow".to_string())
///     }
/// }
///
/// let tool = Adder.into_tool();
/// assert_eq!(tool.name(), "add");
/// ```
#[async_trait]
pub trait TypedTool: Send + Sync + Sized + 'static {
    /// The arguments.
    type Args: DeserializeOwned + JsonSchema + Send;
    /// The result.
    type Output: Serialize;
    /// The name a model calls it by.
    fn name(&self) -> &str;
    /// When to use it.
    fn description(&self) -> &str;
    /// Runs it; an `Err` becomes an error result the model reads.
    async fn call(&self, args: Self::Args, ctx: &Ctx) -> Result<Self::Output, String>;

    /// Erases the types so the tool can join a [`ToolSet`](super::ToolSet).
    fn into_tool(self) -> Arc<dyn Tool> {
        let schema = Arc::new(schemars::schema_for!(Self::Args).to_value());
        Arc::new(Typed {
            inner: self,
            schema,
        })
    }
}

struct Typed<T> {
    inner: T,
    schema: Arc<Value>,
}

#[async_trait]
impl<T: TypedTool> Tool for Typed<T> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn description(&self) -> &str {
        self.inner.description()
    }
    fn input_schema(&self) -> Arc<Value> {
        self.schema.clone()
    }
    async fn call(&self, args: Value, ctx: &Ctx) -> ToolOutput {
        let args: T::Args = match serde_json::from_value(args) {
            Ok(a) => a,
            Err(e) => return ToolOutput::error(format!("invalid arguments: {e}")),
        };
        match self.inner.call(args, ctx).await {
            Ok(out) => match serde_json::to_value(out) {
                Ok(Value::String(s)) => ToolOutput::text(s),
                Ok(v) => ToolOutput::json(v),
                Err(e) => ToolOutput::error(format!("tool result could not be serialised: {e}")),
            },
            Err(message) => ToolOutput::error(message),
        }
    }
}

/// What a [`#[tool]`](macro@crate::tool) function returns: `Result<T, E>`, `T` the result the model
/// reads (serialised), `E` an error the model reads (its `Display`).
#[diagnostic::on_unimplemented(
    message = "a #[tool] function returns `Result<T, E>` with `T: Serialize` and `E: Display`, not `{Self}`"
)]
pub trait ToolResult {
    /// The successful result.
    type Ok: Serialize;
    /// The result, its error as the text the model reads.
    fn into_tool_result(self) -> Result<Self::Ok, String>;
}

impl<T: Serialize, E: std::fmt::Display> ToolResult for Result<T, E> {
    type Ok = T;
    fn into_tool_result(self) -> Result<T, String> {
        self.map_err(|e| e.to_string())
    }
}

/// Anything a host can hold as a tool: a [`TypedTool`] (the tool type a
/// [`#[tool]`](macro@crate::tool) function gets, `LookupOrderTool`, among them) or an already erased `Arc<dyn Tool>` ([`FnTool`], a workspace tool, …).
/// [`HostBuilder::tool`](crate::host::HostBuilder::tool) takes one.
pub trait IntoTool {
    /// The tool, erased.
    fn into_dyn_tool(self) -> Arc<dyn Tool>;
}

impl<T: TypedTool> IntoTool for T {
    fn into_dyn_tool(self) -> Arc<dyn Tool> {
        self.into_tool()
    }
}

impl IntoTool for Arc<dyn Tool> {
    fn into_dyn_tool(self) -> Arc<dyn Tool> {
        self
    }
}

/// `Arc::new(my_tool)` as `HostBuilder::tool` took it when it took only `Arc<dyn Tool>`.
impl<T: Tool + 'static> IntoTool for Arc<T> {
    fn into_dyn_tool(self) -> Arc<dyn Tool> {
        self
    }
}

/// Something a spec's tool list can name: a [`TypedTool`] (the tool type a
/// [`#[tool]`](macro@crate::tool) function gets among them), a `dyn Tool` or `Arc<dyn Tool>`, a spec (a sub-agent), or a name
/// as text. [`SpecBuilder::tool`](crate::SpecBuilder::tool) takes one by reference, so a
/// tool written in Rust is named by the value the host holds and a misspelt name cannot
/// compile.
pub trait ToolRef {
    /// The name the spec's tool list holds.
    fn tool_name(&self) -> &str;
}

impl<T: TypedTool> ToolRef for T {
    fn tool_name(&self) -> &str {
        self.name()
    }
}

impl ToolRef for dyn Tool {
    fn tool_name(&self) -> &str {
        self.name()
    }
}

impl ToolRef for Arc<dyn Tool> {
    fn tool_name(&self) -> &str {
        self.name()
    }
}

impl ToolRef for str {
    fn tool_name(&self) -> &str {
        self
    }
}

impl ToolRef for String {
    fn tool_name(&self) -> &str {
        self
    }
}

/// A tool from an async closure over the JSON arguments.
///
/// ```
/// use serde_json::json;
/// use subcontract::{FnTool, ToolOutput};
///
/// let lookup = FnTool::new(
///     "lookup",
///     "Looks a key up.",
///     json!({"type": "object", "properties": {"key": {"type": "string", "maxLength": 50}},
///            "required": ["key"], "additionalProperties": false}),
///     |args| async move { ToolOutput::text(format!("value of {}", args["key"])) },
/// );
/// ```
pub struct FnTool<F, Fut> {
    name: String,
    description: String,
    schema: Arc<Value>,
    f: F,
    _fut: PhantomData<fn() -> Fut>,
}

impl<F, Fut> FnTool<F, Fut>
where
    F: Fn(Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ToolOutput> + Send + 'static,
{
    /// A tool named `name` that runs `f` on its validated arguments.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        f: F,
    ) -> Arc<dyn Tool> {
        Arc::new(FnTool {
            name: name.into(),
            description: description.into(),
            schema: Arc::new(input_schema),
            f,
            _fut: PhantomData,
        })
    }
}

#[async_trait]
impl<F, Fut> Tool for FnTool<F, Fut>
where
    F: Fn(Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ToolOutput> + Send + 'static,
{
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn input_schema(&self) -> Arc<Value> {
        self.schema.clone()
    }
    async fn call(&self, args: Value, _ctx: &Ctx) -> ToolOutput {
        (self.f)(args).await
    }
    // The default would box a second future around `call`'s on every call.
    async fn call_checked(&self, args: Value, _ctx: &Ctx) -> ToolOutput {
        (self.f)(args).await
    }
}
