//! A Temporal development server of its own (`temporal server start-dev`: in memory, on free
//! ports), killed when dropped. Shared by the Temporal tests (`tests/it/temporal.rs`) and their
//! benchmark (`examples/bench_temporal.rs`), which both include this file.

#![allow(dead_code)] // Each includer uses its own part of it.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A process killed when dropped (a run that fails leaves nothing running).
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A port free now (another process may take it before it is bound).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The Temporal CLI pointed at one server.
#[derive(Clone)]
pub struct Probe {
    pub cli: PathBuf,
    pub address: String,
}

impl Probe {
    /// The CLI run with `args` against the server.
    pub fn temporal(&self, args: &[&str]) -> Output {
        Command::new(&self.cli)
            .args(args)
            .args(["--address", &self.address])
            .output()
            .expect("the Temporal CLI runs")
    }
}

/// A development server of its own, ready: it answered.
pub struct DevServer {
    pub probe: Probe,
    pub process: Killed,
}

impl DevServer {
    /// Starts one with the CLI `cli` and waits until it answers. A server that exits before
    /// it answers (a port another server took between the probe for a free one and its bind)
    /// is started again on other ports, up to three times; one that neither answers nor exits
    /// fails after 180 s (two cores shared with a language model can slow its start, never
    /// this much).
    pub fn start(cli: PathBuf) -> DevServer {
        let deadline = Instant::now() + Duration::from_secs(180);
        let mut exits = Vec::new();
        loop {
            let port = free_port();
            let address = format!("127.0.0.1:{port}");
            let process = Command::new(&cli)
                .args(["server", "start-dev", "--headless", "--ip", "127.0.0.1"])
                .args(["--port", &port.to_string()])
                .args(["--http-port", &free_port().to_string()])
                .args(["--metrics-port", &free_port().to_string()])
                .args(["--log-level", "error"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("the Temporal CLI starts");
            let mut server = DevServer {
                probe: Probe {
                    cli: cli.clone(),
                    address,
                },
                process: Killed(process),
            };
            loop {
                if server
                    .probe
                    .temporal(&["operator", "namespace", "describe", "default"])
                    .status
                    .success()
                {
                    return server;
                }
                if let Ok(Some(status)) = server.process.0.try_wait() {
                    exits.push(status.to_string());
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "the Temporal development server did not answer within 180 s"
                );
                std::thread::sleep(Duration::from_millis(500));
            }
            assert!(
                exits.len() < 3 && Instant::now() < deadline,
                "the Temporal development server exited before it answered, {} times: {}",
                exits.len(),
                exits.join("; ")
            );
        }
    }

    /// The engine URL that points at it.
    pub fn engine(&self) -> String {
        format!("temporal://{}", self.probe.address)
    }
}
