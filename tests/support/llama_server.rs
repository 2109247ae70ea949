//! llama.cpp's own HTTP server with a small instruct model, for the tests that need a real
//! model: installed into the target's temporary directory once (`local-model/install.py`), then
//! started on a free loopback port. The server holds its standard input as a lifeline, so it
//! cannot outlive the test process even when that is killed.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The model size the tests use unless `SUBCONTRACT_REAL_MODEL` names another (`0.5b`).
pub const DEFAULT_MODEL: &str = "1.5b";

/// Which chat template the server applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Template {
    /// The one inside the model file, as the server ships.
    Own,
    /// `local-model/qwen-tool-calls.jinja`: tool calls shown as fenced JSON, which the server's
    /// parser turns into real tool calls.
    ToolCalls,
}

impl Template {
    /// Its short name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Template::Own => "own",
            Template::ToolCalls => "tool-calls",
        }
    }
}

/// The installed server's Python and model file.
pub struct Installed {
    pub python: PathBuf,
    pub model: PathBuf,
}

fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "real model: {line}");
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Installs the server and the model (a no-op once done), or panics with the command to run.
pub fn install() -> Installed {
    let size = std::env::var("SUBCONTRACT_REAL_MODEL").unwrap_or_else(|_| DEFAULT_MODEL.into());
    let dir = env!("CARGO_TARGET_TMPDIR");
    let script = repo().join("local-model/install.py");
    let shown = format!("python3 {} --model {size} --dir {dir}", script.display());
    say(&shown);
    let out = Command::new("python3")
        .arg(&script)
        .args(["--model", &size, "--dir", dir])
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("`{shown}` could not start: {e}"));
    assert!(
        out.status.success(),
        "the real-model tests need llama.cpp's server and a model; `{shown}` failed ({}). Run it by hand to see why.",
        out.status
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(k))
            .map(PathBuf::from)
            .unwrap_or_else(|| panic!("`{shown}` printed no `{k}` line:\n{text}"))
    };
    Installed {
        python: field("python="),
        model: field("model="),
    }
}

/// A running server; stopped when dropped.
pub struct LlamaServer {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
}

impl LlamaServer {
    /// Starts the server with `template` on a free port and waits until the model is loaded.
    pub fn start(installed: &Installed, template: Template) -> LlamaServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut cmd = Command::new(&installed.python);
        cmd.arg(repo().join("local-model/serve.py"))
            .arg("--model")
            .arg(&installed.model)
            .args([
                "--port",
                &port.to_string(),
                "--threads",
                "2",
                "--ctx",
                "8192",
            ])
            .args(["--verbosity", "0", "--stdin-lifeline"]);
        if template == Template::ToolCalls {
            cmd.arg("--chat-template-file")
                .arg(repo().join("local-model/qwen-tool-calls.jinja"));
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("the model server could not start: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.starts_with("listening") {
                    let _ = tx.send(line);
                }
            }
        });
        match rx.recv_timeout(Duration::from_secs(180)) {
            Ok(line) => say(&format!("{} template: {line}", template.name())),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the model server did not report `listening` within 180 s");
            }
        }
        LlamaServer {
            child,
            base: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        // Closing its standard input stops it; kill it if it does not.
        drop(self.child.stdin.take());
        for _ in 0..50 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
