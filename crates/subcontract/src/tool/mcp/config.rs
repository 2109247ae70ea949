//! The `mcpServers` file (`.mcp.json`, as Claude Code, Claude Desktop and Cursor write it):
//! parsed into [`McpConfig`], `${VAR}` / `${VAR:-default}` expanded, every mistake reported
//! with file and line like a spec file's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::diag::{codes, Diagnostic, LineIndex, Pos};

/// The servers of one config file, by name (sorted).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct McpConfig {
    /// The file they were read from, as given.
    pub file: String,
    /// One entry per server.
    pub servers: Vec<ServerConfig>,
}

/// One server of the config.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// Its key in `mcpServers`: the `SERVER` of `mcp__SERVER__TOOL`.
    pub name: String,
    /// How to reach it.
    pub transport: ServerTransport,
    /// Its `timeout` (milliseconds in the file): the longest one call may take.
    pub timeout: Option<Duration>,
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerTransport {
    /// A child process speaking MCP on stdin/stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set in its (otherwise cleared) environment.
        env: BTreeMap<String, String>,
        /// Its working directory (relative paths: to the config file's directory).
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP.
    Http {
        /// The endpoint.
        url: String,
        /// Headers sent with every request.
        headers: BTreeMap<String, String>,
    },
}

/// Keys of a server entry that name features subcontract does not have: refused, not ignored,
/// so a server that needs them fails at load, not at its first call.
const REFUSED: [(&str, &str); 2] = [
    (
        "oauth",
        "OAuth sign-in is not supported; pass a token in `headers` (e.g. `\"Authorization\": \"Bearer ${TOKEN}\"`)",
    ),
    (
        "headersHelper",
        "a headers helper program is not supported; write the headers in `headers` (`${VAR}` expands)",
    ),
];

const STDIO_KEYS: [&str; 6] = ["type", "command", "args", "env", "cwd", "timeout"];
const HTTP_KEYS: [&str; 4] = ["type", "url", "headers", "timeout"];

/// Reads and parses a config file. `Err` holds one diagnostic per problem (an unreadable file
/// is one `io-error`).
pub fn load_mcp_config(path: &Path) -> Result<McpConfig, Vec<Diagnostic>> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        vec![Diagnostic::error(
            &shown,
            Pos { line: 1, column: 1 },
            codes::IO_ERROR,
            format!("cannot read the MCP config: {e}"),
        )]
    })?;
    let base = path.parent().unwrap_or(Path::new("."));
    parse_mcp_config(&shown, &text, base, &|k| std::env::var(k).ok())
}

/// Parses config text; `env` answers `${VAR}`, `base` anchors a relative `cwd`.
pub fn parse_mcp_config(
    file: &str,
    text: &str,
    base: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<McpConfig, Vec<Diagnostic>> {
    let index = LineIndex::new(text);
    let root: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            let pos = Pos {
                line: u32::try_from(e.line()).unwrap_or(1).max(1),
                column: u32::try_from(e.column()).unwrap_or(1).max(1),
            };
            return Err(vec![Diagnostic::error(
                file,
                pos,
                codes::JSON_SYNTAX,
                format!("not valid JSON: {e}"),
            )]);
        }
    };
    let offsets = key_offsets(text);
    let mut p = Parser {
        file,
        index: &index,
        offsets: &offsets,
        env,
        out: Vec::new(),
    };
    let servers = p.root(&root, base);
    if p.out.is_empty() {
        Ok(McpConfig {
            file: file.to_owned(),
            servers,
        })
    } else {
        Err(p.out)
    }
}

struct Parser<'a> {
    file: &'a str,
    index: &'a LineIndex,
    offsets: &'a BTreeMap<Vec<String>, usize>,
    env: &'a dyn Fn(&str) -> Option<String>,
    out: Vec<Diagnostic>,
}

impl Parser<'_> {
    fn pos(&self, path: &[&str]) -> Pos {
        // The key itself, else the nearest enclosing key that was found.
        let mut path: Vec<String> = path.iter().map(|s| (*s).to_owned()).collect();
        while !path.is_empty() {
            if let Some(&o) = self.offsets.get(&path) {
                return self.index.pos(o);
            }
            path.pop();
        }
        Pos { line: 1, column: 1 }
    }

    fn error(&mut self, path: &[&str], code: &str, message: String) {
        let pos = self.pos(path);
        self.out
            .push(Diagnostic::error(self.file, pos, code, message));
    }

    fn root(&mut self, root: &Value, base: &Path) -> Vec<ServerConfig> {
        let Some(obj) = root.as_object() else {
            self.error(
                &[],
                codes::INVALID_VALUE,
                "the MCP config must be a JSON object with `mcpServers`".into(),
            );
            return Vec::new();
        };
        for k in obj.keys().filter(|k| *k != "mcpServers") {
            let mut message = format!("unknown key `{}` in the MCP config", crate::diag::shown(k));
            if crate::diag::suggest(k, &["mcpServers"]).is_some() {
                message.push_str("; did you mean `mcpServers`?");
            }
            self.error(&[k], codes::UNKNOWN_KEY, message);
        }
        let Some(servers) = obj.get("mcpServers") else {
            self.error(
                &[],
                codes::INVALID_VALUE,
                "the MCP config has no `mcpServers` object".into(),
            );
            return Vec::new();
        };
        let Some(servers) = servers.as_object() else {
            self.error(
                &["mcpServers"],
                codes::INVALID_VALUE,
                "`mcpServers` must be an object of servers by name".into(),
            );
            return Vec::new();
        };
        let mut out: Vec<ServerConfig> = servers
            .iter()
            .filter_map(|(name, entry)| self.server(name, entry, base))
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    fn server(&mut self, name: &str, entry: &Value, base: &Path) -> Option<ServerConfig> {
        let at = ["mcpServers", name];
        if name.is_empty() {
            self.error(
                &at,
                codes::INVALID_NAME,
                "a server needs a non-empty name".into(),
            );
            return None;
        }
        let Some(obj) = entry.as_object() else {
            self.error(
                &at,
                codes::INVALID_VALUE,
                format!("server `{}` must be an object", crate::diag::shown(name)),
            );
            return None;
        };
        let before = self.out.len();
        for (key, why) in REFUSED {
            if obj.contains_key(key) {
                self.error(
                    &["mcpServers", name, key],
                    codes::MCP_UNSUPPORTED,
                    format!("server `{}`: `{key}`: {why}", crate::diag::shown(name)),
                );
            }
        }
        let kind = match obj.get("type") {
            None => None,
            Some(Value::String(t)) => Some(t.as_str()),
            Some(_) => {
                self.error(
                    &["mcpServers", name, "type"],
                    codes::INVALID_VALUE,
                    format!(
                        "server `{}`: `type` must be a string",
                        crate::diag::shown(name)
                    ),
                );
                return None;
            }
        };
        let http = match kind {
            Some("stdio") => false,
            Some("http" | "streamable-http" | "streamableHttp") => true,
            Some("sse") => {
                self.error(&["mcpServers", name, "type"], codes::MCP_UNSUPPORTED, format!("server `{}`: the SSE transport (deprecated in MCP) is not supported; use `\"type\": \"http\"` (streamable HTTP) if the server offers it", crate::diag::shown(name)));
                return None;
            }
            Some(other) => {
                self.error(
                    &["mcpServers", name, "type"],
                    codes::INVALID_VALUE,
                    format!(
                        "server `{}`: unknown type `{}`; use `stdio` or `http`",
                        crate::diag::shown(name),
                        crate::diag::shown(other)
                    ),
                );
                return None;
            }
            // Claude Code's rule: an entry with a `url` and no `command` is remote.
            None => obj.contains_key("url") && !obj.contains_key("command"),
        };
        let known: &[&str] = if http { &HTTP_KEYS } else { &STDIO_KEYS };
        for k in obj.keys() {
            if known.contains(&k.as_str()) || REFUSED.iter().any(|(r, _)| r == k) {
                continue;
            }
            let mut message = format!(
                "server `{}`: unknown key `{}` for a {} server (known: {})",
                crate::diag::shown(name),
                crate::diag::shown(k),
                if http { "streamable HTTP" } else { "stdio" },
                known.join(", ")
            );
            if let Some(best) = crate::diag::suggest(k, known) {
                message.push_str(&format!("; did you mean `{best}`?"));
            }
            self.error(&["mcpServers", name, k], codes::UNKNOWN_KEY, message);
        }
        let timeout = match obj.get("timeout") {
            None => None,
            Some(v) => match v.as_u64().filter(|&ms| ms > 0) {
                Some(ms) => Some(Duration::from_millis(ms)),
                None => {
                    self.error(
                        &["mcpServers", name, "timeout"],
                        codes::INVALID_VALUE,
                        format!(
                            "server `{}`: `timeout` must be a positive number of milliseconds",
                            crate::diag::shown(name)
                        ),
                    );
                    None
                }
            },
        };
        let transport = if http {
            let url = self.string(obj, name, "url", true)?;
            let headers = self.string_map(obj, name, "headers");
            ServerTransport::Http { url, headers }
        } else {
            let command = self.string(obj, name, "command", true)?;
            let args = match obj.get("args") {
                None => Vec::new(),
                Some(Value::Array(a)) => a
                    .iter()
                    .filter_map(|v| match v {
                        Value::String(s) => self.expand(s, &["mcpServers", name, "args"]),
                        _ => {
                            self.error(
                                &["mcpServers", name, "args"],
                                codes::INVALID_VALUE,
                                format!(
                                    "server `{}`: every `args` entry must be a string",
                                    crate::diag::shown(name)
                                ),
                            );
                            None
                        }
                    })
                    .collect(),
                Some(_) => {
                    self.error(
                        &["mcpServers", name, "args"],
                        codes::INVALID_VALUE,
                        format!(
                            "server `{}`: `args` must be an array of strings",
                            crate::diag::shown(name)
                        ),
                    );
                    Vec::new()
                }
            };
            let env = self.string_map(obj, name, "env");
            let cwd = self.string(obj, name, "cwd", false).map(|c| base.join(c));
            ServerTransport::Stdio {
                command,
                args,
                env,
                cwd,
            }
        };
        (self.out.len() == before).then(|| ServerConfig {
            name: name.to_owned(),
            transport,
            timeout,
        })
    }

    fn string(
        &mut self,
        obj: &Map<String, Value>,
        name: &str,
        key: &str,
        required: bool,
    ) -> Option<String> {
        match obj.get(key) {
            Some(Value::String(s)) => self.expand(s, &["mcpServers", name, key]),
            None if !required => None,
            None => {
                self.error(
                    &["mcpServers", name],
                    codes::INVALID_VALUE,
                    format!("server `{}` has no `{key}`", crate::diag::shown(name)),
                );
                None
            }
            Some(_) => {
                self.error(
                    &["mcpServers", name, key],
                    codes::INVALID_VALUE,
                    format!(
                        "server `{}`: `{key}` must be a string",
                        crate::diag::shown(name)
                    ),
                );
                None
            }
        }
    }

    fn string_map(
        &mut self,
        obj: &Map<String, Value>,
        name: &str,
        key: &str,
    ) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        match obj.get(key) {
            None => {}
            Some(Value::Object(m)) => {
                for (k, v) in m {
                    match v {
                        Value::String(s) => {
                            if let Some(s) = self.expand(s, &["mcpServers", name, key, k]) {
                                out.insert(k.clone(), s);
                            }
                        }
                        _ => self.error(
                            &["mcpServers", name, key, k],
                            codes::INVALID_VALUE,
                            format!(
                                "server `{}`: `{key}.{}` must be a string",
                                crate::diag::shown(name),
                                crate::diag::shown(k)
                            ),
                        ),
                    }
                }
            }
            Some(_) => self.error(
                &["mcpServers", name, key],
                codes::INVALID_VALUE,
                format!(
                    "server `{}`: `{key}` must be an object of strings",
                    crate::diag::shown(name)
                ),
            ),
        }
        out
    }

    /// `${VAR}` and `${VAR:-default}`; an unset variable without a default is an error (a
    /// server started with an empty token fails later and less clearly).
    fn expand(&mut self, s: &str, at: &[&str]) -> Option<String> {
        match expand_vars(s, self.env) {
            Ok(v) => Some(v),
            Err(message) => {
                self.error(at, codes::INVALID_VALUE, message);
                None
            }
        }
    }
}

/// The name of the config file found beside the specs, as Claude Code finds one in a project.
pub const BESIDE: &str = ".mcp.json";

/// The config file a command uses: `explicit` (`--mcp-config`) when given, else the
/// [`BESIDE`] file of the specs' directory (a path that is a directory, or a file's parent);
/// `None` when there is neither. Two different such files are an error, not a choice: which
/// servers a run gets must never depend on the order of its arguments.
pub fn find_mcp_config(
    explicit: Option<&Path>,
    spec_paths: &[PathBuf],
) -> Result<Option<PathBuf>, String> {
    if let Some(p) = explicit {
        return Ok(Some(p.to_path_buf()));
    }
    let mut found: Vec<PathBuf> = Vec::new();
    for p in spec_paths {
        let dir = if p.is_dir() {
            p.as_path()
        } else {
            p.parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
        };
        let file = dir.join(BESIDE);
        if !file.is_file() {
            continue;
        }
        let same = |f: &PathBuf| f.canonicalize().ok() == file.canonicalize().ok();
        if !found.iter().any(same) {
            found.push(file);
        }
    }
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop()),
        _ => {
            let shown: Vec<String> = found.iter().map(|f| f.display().to_string()).collect();
            Err(format!(
                "the specs have more than one {BESIDE} ({}); name one with --mcp-config",
                shown.join(", ")
            ))
        }
    }
}

/// Diagnostics of a config that did not load, one `file:line:column: code: message` a line.
pub fn render_diagnostics(diagnostics: &[Diagnostic]) -> String {
    diagnostics
        .iter()
        .map(|d| {
            format!(
                "{}:{}:{}: {}: {}",
                d.file, d.line, d.column, d.code, d.message
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Expands `${VAR}` and `${VAR:-default}` in `s` (the default used when `VAR` is unset or
/// empty, as in the shell).
pub fn expand_vars(s: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!("unclosed `${{` in `{}`", crate::diag::shown(s)));
        };
        let inner = &after[..end];
        let (var, default) = match inner.split_once(":-") {
            Some((v, d)) => (v, Some(d)),
            None => (inner, None),
        };
        if var.is_empty() || !var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(format!(
                "`${{{}}}`: not a variable name",
                crate::diag::shown(inner)
            ));
        }
        match (env(var).filter(|v| !v.is_empty()), default) {
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => {
                return Err(format!(
                    "environment variable `{var}` is not set (write `${{{var}:-default}}` for a default)"
                ))
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The byte offset of every object key in valid JSON `text`, by its path of keys (array items
/// are not entered: the config has no keys inside arrays).
fn key_offsets(text: &str) -> BTreeMap<Vec<String>, usize> {
    let b = text.as_bytes();
    let mut out = BTreeMap::new();
    // A stack of (is_object, current key) per open container.
    let mut stack: Vec<(bool, Option<String>)> = Vec::new();
    let mut expect_key = false;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'{' => {
                stack.push((true, None));
                expect_key = true;
            }
            b'[' => {
                stack.push((false, None));
                expect_key = false;
            }
            b'}' | b']' => {
                stack.pop();
                expect_key = false;
            }
            b',' => expect_key = stack.last().is_some_and(|(obj, _)| *obj),
            b'"' => {
                let start = i;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                if expect_key {
                    let key: String =
                        serde_json::from_str(&text[start..=i.min(b.len() - 1)]).unwrap_or_default();
                    let in_arrays = stack.iter().any(|(obj, _)| !obj);
                    if let Some(top) = stack.last_mut() {
                        top.1 = Some(key);
                    }
                    if !in_arrays {
                        let path: Vec<String> =
                            stack.iter().filter_map(|(_, k)| k.clone()).collect();
                        out.entry(path).or_insert(start);
                    }
                    expect_key = false;
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(k: &str) -> Option<String> {
        match k {
            "TOKEN" => Some("t0k".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    fn parse(text: &str) -> Result<McpConfig, Vec<Diagnostic>> {
        parse_mcp_config("m.json", text, Path::new("/cfg"), &env)
    }

    #[test]
    fn stdio_and_http_with_expansion() {
        let c = parse(r#"{"mcpServers": {
            "fs": {"command": "node", "args": ["x.js", "${HOME_DIR:-/tmp}"], "env": {"K": "${TOKEN}"}, "cwd": "sub", "timeout": 5000},
            "web": {"type": "http", "url": "http://h/${EMPTY:-mcp}", "headers": {"Authorization": "Bearer ${TOKEN}"}}
        }}"#)
        .unwrap();
        assert_eq!(c.servers.len(), 2);
        assert_eq!(
            c.servers[0].transport,
            ServerTransport::Stdio {
                command: "node".into(),
                args: vec!["x.js".into(), "/tmp".into()],
                env: [("K".to_string(), "t0k".to_string())].into(),
                cwd: Some(PathBuf::from("/cfg/sub")),
            }
        );
        assert_eq!(c.servers[0].timeout, Some(Duration::from_secs(5)));
        assert_eq!(
            c.servers[1].transport,
            ServerTransport::Http {
                url: "http://h/mcp".into(),
                headers: [("Authorization".to_string(), "Bearer t0k".to_string())].into(),
            }
        );
    }

    #[test]
    fn mistakes_have_lines() {
        let e = parse("{\"mcpServers\": {\n \"a\": {\"command\": \"x\", \"envv\": {}},\n \"b\": {\"type\": \"sse\", \"url\": \"u\"},\n \"c\": {\"url\": \"u\",\n  \"oauth\": {}},\n \"d\": {\"command\": \"${NOPE}\"}\n}}")
            .unwrap_err();
        let got: Vec<(u32, &str)> = e.iter().map(|d| (d.line, d.code.as_str())).collect();
        assert_eq!(
            got,
            [
                (2, codes::UNKNOWN_KEY),
                (3, codes::MCP_UNSUPPORTED),
                (5, codes::MCP_UNSUPPORTED),
                (6, codes::INVALID_VALUE)
            ]
        );
        assert!(
            e[0].message.contains("did you mean `env`?"),
            "{}",
            e[0].message
        );
        assert!(
            e[3].message.contains("`NOPE` is not set"),
            "{}",
            e[3].message
        );
        let syntax = parse("{\n\"mcpServers\": }").unwrap_err();
        assert_eq!(
            (syntax[0].line, syntax[0].code.as_str()),
            (2, codes::JSON_SYNTAX)
        );
    }

    #[test]
    fn expansion_edges() {
        assert_eq!(expand_vars("a${TOKEN}b${X:-}c", &env).unwrap(), "at0kbc");
        assert!(expand_vars("${", &env).is_err());
        assert!(expand_vars("${a b}", &env).is_err());
        assert_eq!(expand_vars("$TOKEN", &env).unwrap(), "$TOKEN");
    }

    #[test]
    fn the_config_beside_the_specs_is_found_and_never_chosen_between() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let spec = a.join("s.toml");
        std::fs::write(&spec, "").unwrap();
        assert_eq!(find_mcp_config(None, std::slice::from_ref(&spec)), Ok(None));
        std::fs::write(a.join(BESIDE), "{}").unwrap();
        // Beside a spec file, in a spec directory, once however often it is reached.
        let found = Some(a.join(BESIDE));
        assert_eq!(
            find_mcp_config(None, std::slice::from_ref(&spec)),
            Ok(found.clone())
        );
        assert_eq!(find_mcp_config(None, &[a.clone(), spec.clone()]), Ok(found));
        // The flag wins; two different files are an error naming both.
        let flag = Path::new("elsewhere.json");
        assert_eq!(
            find_mcp_config(Some(flag), std::slice::from_ref(&spec)),
            Ok(Some(flag.to_path_buf()))
        );
        std::fs::write(b.join(BESIDE), "{}").unwrap();
        let e = find_mcp_config(None, &[a.clone(), b.clone()]).unwrap_err();
        assert!(
            e.contains("--mcp-config") && e.contains("b/.mcp.json"),
            "{e}"
        );
    }
}
