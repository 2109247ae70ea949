//! The attribute macros of `subcontract`: [`macro@tool`] and [`macro@contract`]. Use them
//! through `subcontract` (`subcontract::tool`, `subcontract::contract`, or the prelude): the
//! code they generate names only `::subcontract::…` paths, so a crate that depends on
//! `subcontract` alone can use them.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::{
    Attribute, Error, FnArg, Ident, ItemFn, LitStr, Meta, Pat, ReturnType, Token, Type, Visibility,
};

/// Turns an `async fn` into a tool; see `subcontract::tool` (the attribute) for the guide.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    let opts = match syn::parse::<ToolOpts>(attr) {
        Ok(o) => o,
        Err(e) => return e.to_compile_error().into(),
    };
    let func = match syn::parse::<ItemFn>(item) {
        Ok(f) => f,
        Err(e) => return e.to_compile_error().into(),
    };
    expand_tool(opts, func)
        .unwrap_or_else(Error::into_compile_error)
        .into()
}

/// Routes the derives of serde, schemars and validator on a type through `subcontract`'s
/// re-exports; see `subcontract::contract` for the guide.
#[proc_macro_attribute]
pub fn contract(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        let attr = TokenStream2::from(attr);
        return Error::new(attr.span(), "#[contract] takes no arguments")
            .to_compile_error()
            .into();
    }
    let item = match syn::parse::<syn::Item>(item) {
        Ok(i) => i,
        Err(e) => return e.to_compile_error().into(),
    };
    expand_contract(item)
        .unwrap_or_else(Error::into_compile_error)
        .into()
}

/// `#[tool]` or `#[tool(name = "...")]`.
#[derive(Default)]
struct ToolOpts {
    name: Option<LitStr>,
}

impl Parse for ToolOpts {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut opts = ToolOpts::default();
        while !input.is_empty() {
            let key: Ident = input.parse()?;
            if key != "name" {
                return Err(Error::new(
                    key.span(),
                    format!("unknown option `{key}`; #[tool] takes `name = \"...\"`"),
                ));
            }
            input.parse::<Token![=]>()?;
            opts.name = Some(input.parse()?);
            if !input.is_empty() {
                input.parse::<Token![,]>()?;
            }
        }
        Ok(opts)
    }
}

/// One argument the model gives: a field of the generated arguments struct.
struct Arg {
    ident: Ident,
    mutable: bool,
    ty: Type,
    attrs: Vec<Attribute>,
}

fn expand_tool(opts: ToolOpts, func: ItemFn) -> syn::Result<TokenStream2> {
    let sig = &func.sig;
    if sig.asyncness.is_none() {
        return Err(Error::new(sig.fn_token.span, "#[tool] needs an `async fn`"));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        return Err(Error::new(
            sig.generics.span(),
            "#[tool] functions take no generic parameters: the arguments' schema must be one type",
        ));
    }
    if let Some(v) = &sig.variadic {
        return Err(Error::new(v.span(), "#[tool] functions are not variadic"));
    }
    let output = match &sig.output {
        ReturnType::Type(_, ty) => ty.as_ref().clone(),
        ReturnType::Default => {
            return Err(Error::new(
                sig.ident.span(),
                "#[tool] functions return `Result<T, E>`, with `T: Serialize` (what the model \
                 reads) and `E: Display` (an error result the model reads)",
            ))
        }
    };

    let fn_name = &sig.ident;
    let name = match &opts.name {
        Some(n) => n.value(),
        None => fn_name.to_string().trim_start_matches("r#").to_string(),
    };
    if !valid_tool_name(&name) {
        let span = opts.name.as_ref().map_or(fn_name.span(), LitStr::span);
        return Err(Error::new(
            span,
            format!(
                "tool name `{name}` must be 1 to 64 characters from A-Z, a-z, 0-9, `_` and `-`"
            ),
        ));
    }
    if name == "submit_output" {
        let span = opts.name.as_ref().map_or(fn_name.span(), LitStr::span);
        return Err(Error::new(
            span,
            "`submit_output` is the name a sub-agent submits its output by; give the tool \
             another (`#[tool(name = \"...\")]`)",
        ));
    }
    let description = doc_text(&func.attrs);
    if description.is_empty() {
        return Err(Error::new(
            fn_name.span(),
            "#[tool] functions need a doc comment: it is the description the model chooses \
             tools by",
        ));
    }

    let mut args = Vec::new();
    let mut has_ctx = false;
    let mut params = Vec::new();
    for input in &sig.inputs {
        let FnArg::Typed(pt) = input else {
            return Err(Error::new(
                input.span(),
                "#[tool] functions are free functions: no `self`",
            ));
        };
        if is_ctx_ref(&pt.ty) {
            if has_ctx {
                return Err(Error::new(pt.span(), "one `&Ctx` argument at most"));
            }
            if let Some(a) = pt.attrs.first() {
                return Err(Error::new(
                    a.span(),
                    "the context argument takes no attributes",
                ));
            }
            has_ctx = true;
            params.push(Param::Ctx(pt));
            continue;
        }
        if let Type::Reference(r) = pt.ty.as_ref() {
            return Err(Error::new(
                r.span(),
                "#[tool] arguments are owned (`String`, not `&str`): each is decoded from the \
                 model's JSON; the one reference allowed is the context, `&Ctx`",
            ));
        }
        let (ident, mutable) = match pt.pat.as_ref() {
            Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => {
                (p.ident.clone(), p.mutability.is_some())
            }
            other => {
                return Err(Error::new(
                    other.span(),
                    "#[tool] arguments are plain names (`id: String`): each is a property of \
                     the arguments' JSON object",
                ))
            }
        };
        for a in &pt.attrs {
            let known = ["doc", "validate", "schemars", "serde"];
            if !known.iter().any(|k| a.path().is_ident(k)) {
                return Err(Error::new(
                    a.span(),
                    "#[tool] arguments take doc comments and `#[validate(...)]`, \
                     `#[schemars(...)]` or `#[serde(...)]` attributes",
                ));
            }
        }
        params.push(Param::Arg(args.len()));
        args.push(Arg {
            ident,
            mutable,
            ty: pt.ty.as_ref().clone(),
            attrs: pt.attrs.clone(),
        });
    }

    let vis = &func.vis;
    let args_vis = match vis {
        // A private tool's arguments struct is private too; a wider one is as wide, as the
        // trait impl names it.
        Visibility::Inherited => quote!(),
        v => v.to_token_stream(),
    };
    let args_ty = format_ident!("{}Args", camel(&fn_name.to_string()), span = fn_name.span());
    let tool_ty = format_ident!("{}Tool", camel(&fn_name.to_string()), span = fn_name.span());
    let validates = args
        .iter()
        .any(|a| a.attrs.iter().any(|at| at.path().is_ident("validate")));
    let validate_derive = validates.then(|| quote!(, ::subcontract::validator::Validate));
    let validate_crate = validates.then(|| quote!(#[validate(crate = "::subcontract::validator")]));
    let validate_call = validates.then(|| {
        quote! {
            if let ::core::result::Result::Err(e) = ::subcontract::validator::Validate::validate(&__tool_args) {
                return ::core::result::Result::Err(::std::format!("invalid arguments: {e}"));
            }
        }
    });
    let fields = args.iter().map(|a| {
        let (ident, ty, attrs) = (&a.ident, &a.ty, &a.attrs);
        quote! { #(#attrs)* pub #ident: #ty }
    });
    // Bound under names of their own, so an argument called `ctx` or `args` cannot shadow
    // the context or the arguments.
    let bound =
        |id: &Ident| format_ident!("__tool_arg_{}", id.to_string().trim_start_matches("r#"));
    let destructure = args.iter().map(|a| {
        let (id, b) = (&a.ident, bound(&a.ident));
        quote!(#id: #b)
    });
    let call_args = params.iter().map(|p| match p {
        Param::Ctx(..) => quote!(__tool_ctx),
        Param::Arg(i) => {
            let b = bound(&args[*i].ident);
            quote!(#b)
        }
    });
    let run_params = params.iter().map(|p| match p {
        Param::Ctx(pt) => {
            let (pat, ty) = (&pt.pat, &pt.ty);
            quote!(#pat: #ty)
        }
        Param::Arg(i) => {
            let a = &args[*i];
            let (ident, ty) = (&a.ident, &a.ty);
            let m = a.mutable.then(|| quote!(mut));
            quote!(#m #ident: #ty)
        }
    });
    // Every attribute (the doc comment, `cfg`, `allow`, `tracing::instrument`, …) stays on
    // the function; the tool's type takes the `cfg`s too.
    let fn_attrs = &func.attrs;
    let cfgs = func.attrs.iter().filter(|a| a.path().is_ident("cfg"));
    let cfgs = quote!(#(#cfgs)*);
    let body = &func.block;
    let ret_check = quote_spanned! {output.span()=>
        <#output as ::subcontract::tool::ToolResult>::Ok
    };
    let ty_doc = format!(
        "The tool `{name}`: the function `{fn_name}` as a `TypedTool`, its arguments \
         [`{args_ty}`]. Hand it to a host (`HostBuilder::tool({tool_ty})`) and name \
         it in a spec (`SpecBuilder::tool(&{tool_ty})`)."
    );
    // The function stays a function (callable as written, and its name free for bindings
    // elsewhere in the module); the tool is a unit type of its own, named in CamelCase.
    Ok(quote! {
        #(#fn_attrs)*
        // A tool's function is async even when it awaits nothing.
        #[allow(clippy::unused_async)]
        #vis async fn #fn_name(#(#run_params),*) -> #output #body

        #cfgs
        #[doc = #ty_doc]
        #[derive(Clone, Copy, Debug, Default)]
        #vis struct #tool_ty;

        #cfgs
        #[allow(missing_docs)]
        #[derive(::subcontract::serde::Deserialize, ::subcontract::schemars::JsonSchema #validate_derive)]
        #[serde(crate = "::subcontract::serde", deny_unknown_fields)]
        #[schemars(crate = "::subcontract::schemars")]
        #validate_crate
        #args_vis struct #args_ty {
            #(#fields,)*
        }

        #cfgs
        #[::subcontract::async_trait::async_trait]
        impl ::subcontract::TypedTool for #tool_ty {
            type Args = #args_ty;
            type Output = #ret_check;
            fn name(&self) -> &str {
                #name
            }
            fn description(&self) -> &str {
                #description
            }
            async fn call(
                &self,
                __tool_args: Self::Args,
                __tool_ctx: &::subcontract::Ctx,
            ) -> ::core::result::Result<Self::Output, ::std::string::String> {
                #validate_call
                let #args_ty { #(#destructure),* } = __tool_args;
                let _ = __tool_ctx;
                ::subcontract::tool::ToolResult::into_tool_result(#fn_name(#(#call_args),*).await)
            }
        }
    })
}

/// A parameter of the function, in order: the context, or the `n`th argument.
enum Param<'a> {
    Ctx(&'a syn::PatType),
    Arg(usize),
}

/// `&Ctx`, `&subcontract::Ctx` or `&::subcontract::Ctx`: the context, not an argument.
fn is_ctx_ref(ty: &Type) -> bool {
    let Type::Reference(r) = ty else { return false };
    if r.mutability.is_some() {
        return false;
    }
    let Type::Path(p) = r.elem.as_ref() else {
        return false;
    };
    p.qself.is_none() && p.path.segments.last().is_some_and(|s| s.ident == "Ctx")
}

/// The doc comment's text, its lines joined as rustdoc reads them (one leading space each
/// dropped).
fn doc_text(attrs: &[Attribute]) -> String {
    let mut lines = Vec::new();
    for a in attrs {
        if let Meta::NameValue(nv) = &a.meta {
            if nv.path.is_ident("doc") {
                if let syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) = &nv.value
                {
                    let v = s.value();
                    lines.push(v.strip_prefix(' ').unwrap_or(&v).trim_end().to_string());
                }
            }
        }
    }
    lines.join("\n").trim().to_string()
}

fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `read_config` → `ReadConfig`.
fn camel(snake: &str) -> String {
    snake
        .trim_start_matches("r#")
        .split('_')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            match c.next() {
                Some(f) => f.to_uppercase().chain(c).collect::<String>(),
                None => String::new(),
            }
        })
        .collect()
}

fn expand_contract(mut item: syn::Item) -> syn::Result<TokenStream2> {
    let attrs = match &mut item {
        syn::Item::Struct(s) => &mut s.attrs,
        syn::Item::Enum(e) => &mut e.attrs,
        other => {
            return Err(Error::new(
                other.span(),
                "#[contract] goes on a struct or an enum",
            ))
        }
    };
    let (mut serde, mut schemars, mut validator) = (false, false, false);
    for a in attrs.iter() {
        if !a.path().is_ident("derive") {
            continue;
        }
        let paths = a.parse_args_with(
            syn::punctuated::Punctuated::<syn::Path, Token![,]>::parse_terminated,
        )?;
        for p in paths {
            match p.segments.last().map(|s| s.ident.to_string()).as_deref() {
                Some("Serialize" | "Deserialize") => serde = true,
                Some("JsonSchema") => schemars = true,
                Some("Validate") => validator = true,
                _ => {}
            }
        }
    }
    if !(serde || schemars || validator) {
        return Err(Error::new(
            Span::call_site(),
            "#[contract] found no derive of `Serialize`, `Deserialize`, `JsonSchema` or \
             `Validate` below it: write it above the `#[derive(...)]`",
        ));
    }
    // Appended after the derives: helper attributes are read wherever they stand.
    if serde {
        attrs.push(syn::parse_quote!(#[serde(crate = "::subcontract::serde")]));
    }
    if schemars {
        attrs.push(syn::parse_quote!(#[schemars(crate = "::subcontract::schemars")]));
    }
    if validator {
        attrs.push(syn::parse_quote!(#[validate(crate = "::subcontract::validator")]));
    }
    Ok(item.into_token_stream())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand(attr: TokenStream2, item: TokenStream2) -> Result<String, String> {
        let opts: ToolOpts = syn::parse2(attr).map_err(|e| e.to_string())?;
        let func: ItemFn = syn::parse2(item).map_err(|e| e.to_string())?;
        expand_tool(opts, func)
            .map(|t| t.to_string())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn generated_code_names_only_subcontract_core_and_std() {
        let code = expand(
            quote!(),
            quote! {
                /// Reads a setting.
                async fn read_setting(
                    /// The key.
                    #[validate(length(max = 40))]
                    key: String,
                    ctx: &Ctx,
                    by: Option<String>,
                ) -> Result<String, String> {
                    Ok(key)
                }
            },
        )
        .expect("it expands");
        // Leading `::` paths: each root is one of these three.
        let mut leading = std::collections::BTreeSet::new();
        let toks: Vec<&str> = code.split_whitespace().collect();
        for i in 0..toks.len().saturating_sub(1) {
            // `a ::`, `T > ::` continue a path; `-> ::`, `( ::` start one.
            let after_name = i > 0
                && toks[i - 1] != "->"
                && toks[i - 1].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '>');
            if toks[i] == "::" && !after_name {
                leading.insert(toks[i + 1].to_string());
            }
        }
        assert_eq!(
            leading.into_iter().collect::<Vec<_>>(),
            ["core", "std", "subcontract"]
        );
        // The crate attributes of the three derives point at subcontract's re-exports.
        for attr in [
            "crate = \"::subcontract::serde\"",
            "crate = \"::subcontract::schemars\"",
            "crate = \"::subcontract::validator\"",
        ] {
            assert!(code.contains(attr), "{attr}: {code}");
        }
        assert!(code.contains("struct ReadSettingArgs"), "{code}");
        assert!(code.contains("\"Reads a setting.\""), "{code}");
    }

    #[test]
    fn no_validate_attribute_no_validate_derive() {
        let code = expand(
            quote!(name = "lookup"),
            quote! {
                /// Looks up.
                pub async fn find(id: u32) -> Result<u32, String> { Ok(id) }
            },
        )
        .expect("it expands");
        assert!(!code.contains("validator"), "{code}");
        assert!(code.contains("\"lookup\""), "{code}");
        assert!(code.contains("pub struct FindArgs"), "{code}");
        // The function stays a function; the tool is a type of its own.
        assert!(code.contains("pub async fn find"), "{code}");
        assert!(code.contains("pub struct FindTool"), "{code}");
    }

    #[test]
    fn misuse_is_a_compile_error_that_says_what_to_write() {
        let cases = [
            (
                quote!(),
                quote!(
                    async fn f() -> Result<(), String> {
                        Ok(())
                    }
                ),
                "doc comment",
            ),
            (
                quote!(),
                quote!(
                    /// D.
                    fn f() -> Result<(), String> {
                        Ok(())
                    }
                ),
                "async fn",
            ),
            (
                quote!(),
                quote!(
                    /// D.
                    async fn f() {}
                ),
                "return `Result<T, E>`",
            ),
            (
                quote!(),
                quote!(
                    /// D.
                    async fn f<T>(t: T) -> Result<(), String> {
                        Ok(())
                    }
                ),
                "generic",
            ),
            (
                quote!(),
                quote!(
                    /// D.
                    async fn f((a, b): (u8, u8)) -> Result<(), String> {
                        Ok(())
                    }
                ),
                "plain names",
            ),
            (
                quote!(),
                quote!(
                    /// D.
                    async fn f(#[inline] a: u8) -> Result<(), String> {
                        Ok(())
                    }
                ),
                "doc comments and",
            ),
            (
                quote!(),
                quote!(
                    /// D.
                    async fn f(a: &Ctx, b: &Ctx) -> Result<(), String> {
                        Ok(())
                    }
                ),
                "one `&Ctx`",
            ),
            (
                quote!(nme = "x"),
                quote!(
                    /// D.
                    async fn f() -> Result<(), String> {
                        Ok(())
                    }
                ),
                "unknown option `nme`",
            ),
            (
                quote!(),
                quote!(
                    /// D.
                    async fn f(q: &str) -> Result<(), String> {
                        Ok(())
                    }
                ),
                "not `&str`",
            ),
            (
                quote!(),
                quote!(
                    /// D.
                    async fn submit_output() -> Result<(), String> {
                        Ok(())
                    }
                ),
                "another (`#[tool(name",
            ),
            (
                quote!(name = "a b"),
                quote!(
                    /// D.
                    async fn f() -> Result<(), String> {
                        Ok(())
                    }
                ),
                "must be 1 to 64",
            ),
        ];
        for (attr, item, says) in cases {
            let e = expand(attr, item.clone()).expect_err(&item.to_string());
            assert!(e.contains(says), "{item}: {e}");
        }
    }

    #[test]
    fn contract_adds_the_crate_attribute_of_each_derive_present() {
        let item: syn::Item = syn::parse_quote! {
            #[derive(Debug, Serialize, JsonSchema)]
            struct S { a: u8 }
        };
        let code = expand_contract(item).expect("it expands").to_string();
        assert!(
            code.contains("serde (crate = \"::subcontract::serde\")"),
            "{code}"
        );
        assert!(
            code.contains("schemars (crate = \"::subcontract::schemars\")"),
            "{code}"
        );
        assert!(!code.contains("validator"), "{code}");
        let none: syn::Item = syn::parse_quote! { #[derive(Debug)] struct S; };
        let e = expand_contract(none).expect_err("nothing to route");
        assert!(e.to_string().contains("above the `#[derive(...)]`"), "{e}");
    }

    #[test]
    fn camel_case_of_snake_case_names() {
        assert_eq!(camel("read_config"), "ReadConfig");
        assert_eq!(camel("r#type"), "Type");
        assert_eq!(camel("a__b_"), "AB");
    }
}
