//! Each test runs a command that tries to break one guarantee and checks that the attack
//! failed and the legitimate operation next to it worked. They need Landlock, a `pids`
//! cgroup and root (the machines this is built on have them); without, they fail.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::capture::Capture;
use super::*;

fn request(copy: &Path, argv: &[&str]) -> CommandRequest {
    CommandRequest {
        argv: argv.iter().map(|s| (*s).to_owned()).collect(),
        cwd: copy.to_path_buf(),
        writable: vec![copy.to_path_buf()],
        allowed_programs: vec!["sh".to_owned(), "python3".to_owned(), "env".to_owned()],
        network: false,
        timeout: Duration::from_secs(8),
        mode: SandboxMode::Os,
        limits: CommandLimits::default(),
    }
}

fn sh(copy: &Path, script: &str) -> CommandRequest {
    request(copy, &["sh", "-c", script])
}

/// Runs `req`, bounded from the outside too.
async fn run_ok(req: CommandRequest) -> CommandOutput {
    tokio::time::timeout(Duration::from_secs(15), run(req, CancellationToken::new()))
        .await
        .expect("the command ends within 15 s")
        .expect("the sandbox runs the command")
}

/// Live (not zombie) processes whose command line is exactly `argv`.
fn live(argv: &[&str]) -> Vec<u32> {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want)
                && std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                    !s.rsplit(')')
                        .next()
                        .unwrap_or("")
                        .trim_start()
                        .starts_with('Z')
                })
        })
        .collect()
}

/// Waits (up to `within`) until `f` holds.
async fn eventually(within: Duration, mut f: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + within;
    loop {
        if f() {
            return true;
        }
        if Instant::now() > until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A duration in seconds no other test (or program) uses, so `sleep N` is findable.
fn unique_secs() -> String {
    format!("{}", 100_000 + fastrand::u32(..800_000))
}

#[test]
fn the_future_can_move_between_threads() {
    fn is_send<T: Send>(_: &T) {}
    let copy = std::env::temp_dir();
    is_send(&run(sh(&copy, "true"), CancellationToken::new()));
}

#[test]
fn the_os_sandbox_is_available_here() {
    let support = probe().unwrap_or_else(|m| panic!("{m}"));
    assert!(support.fs && support.net && support.scope, "{support:?}");
}

#[test]
fn missing_pieces_are_named() {
    let none = SandboxSupport {
        landlock_abi: None,
        fs: false,
        net: false,
        scope: false,
        process_limit: Err("no writable pids cgroup".to_owned()),
    };
    let err = SandboxError::Unavailable(none.missing_for(SandboxMode::Os, false).unwrap());
    let text = err.to_string();
    assert!(text.starts_with(
        "run_command refused: the OS sandbox cannot be set up: Landlock is not available \
         (needs Linux ≥ 5.13 with landlock enabled)"
    ));
    assert!(text.contains("process limit"), "{text}");
    let old = SandboxSupport {
        landlock_abi: Some(3),
        fs: true,
        net: false,
        scope: false,
        process_limit: Ok(PathBuf::from("/x")),
    };
    assert!(old
        .missing_for(SandboxMode::Os, false)
        .unwrap()
        .to_string()
        .contains("network"));
    assert_eq!(old.missing_for(SandboxMode::Os, true), None);
    assert_eq!(old.missing_for(SandboxMode::None, false), None);
    // The process limit is needed without Landlock too.
    assert!(none.missing_for(SandboxMode::None, true).is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_land_only_in_the_copy_and_the_private_tmp() {
    let parent = tempfile::tempdir().unwrap();
    let copy = tempfile::tempdir().unwrap();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".to_owned());
    let tag = unique_secs();
    let script = format!(
        r#"
try() {{ if ( eval "$2" ) 2>/dev/null; then echo "$1:written"; else echo "$1:denied"; fi; }}
try parent 'echo x > {parent}/escape'
try parent-mkdir 'mkdir {parent}/d'
try tmp 'echo x > /tmp/escape-{tag}'
try home 'echo x > {home}/escape-{tag}'
try copy 'echo inside > inside.txt'
try copy-abs 'mkdir {copy}/sub && echo y > {copy}/sub/f'
try tmpdir 'echo t > "$TMPDIR/t" && test "$(cat "$TMPDIR/t")" = t'
try home-var 'echo h > "$HOME/.h"'
echo "private=$TMPDIR"
"#,
        parent = parent.path().display(),
        copy = copy.path().display(),
    );
    let out = run_ok(sh(copy.path(), &script)).await;
    let text = &out.stdout.text;
    for denied in ["parent", "parent-mkdir", "tmp", "home"] {
        assert!(
            text.contains(&format!("{denied}:denied\n")),
            "{denied}: {}",
            out.to_tool_text()
        );
    }
    for written in ["copy", "copy-abs", "tmpdir", "home-var"] {
        assert!(
            text.contains(&format!("{written}:written\n")),
            "{written}: {}",
            out.to_tool_text()
        );
    }
    assert!(!parent.path().join("escape").exists());
    assert!(!Path::new(&format!("/tmp/escape-{tag}")).exists());
    assert!(!Path::new(&format!("{home}/escape-{tag}")).exists());
    assert_eq!(
        std::fs::read_to_string(copy.path().join("inside.txt")).unwrap(),
        "inside\n"
    );
    assert_eq!(
        std::fs::read_to_string(copy.path().join("sub/f")).unwrap(),
        "y\n"
    );
    // The private directory was removed afterwards.
    let private = text
        .lines()
        .find_map(|l| l.strip_prefix("private="))
        .unwrap();
    assert!(
        private.starts_with(std::env::temp_dir().to_str().unwrap()),
        "{private}"
    );
    assert!(!Path::new(private).exists(), "{private} was left behind");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_network_is_closed_unless_allowed() {
    let copy = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = format!(
        r#"
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
    print("connect:open")
except OSError as e:
    print("connect:closed", e.errno)
try:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); print("bind:open")
except OSError as e:
    print("bind:closed", e.errno)
"#
    );
    let closed = run_ok(request(copy.path(), &["python3", "-c", &script])).await;
    assert!(
        closed.stdout.text.contains("connect:closed 13"),
        "{}",
        closed.to_tool_text()
    );
    assert!(
        closed.stdout.text.contains("bind:closed 13"),
        "{}",
        closed.to_tool_text()
    );
    let nothing = tokio::time::timeout(Duration::from_millis(200), listener.accept()).await;
    assert!(nothing.is_err(), "a connection reached the listener");

    let mut open = request(copy.path(), &["python3", "-c", &script]);
    open.network = true;
    let (opened, accepted) = tokio::join!(run_ok(open), listener.accept());
    assert!(
        opened.stdout.text.contains("connect:open"),
        "{}",
        opened.to_tool_text()
    );
    assert!(
        opened.stdout.text.contains("bind:open"),
        "{}",
        opened.to_tool_text()
    );
    assert!(accepted.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abstract_sockets_signals_and_the_hosts_proc_are_out_of_reach() {
    use std::os::linux::net::SocketAddrExt;
    let copy = tempfile::tempdir().unwrap();
    let name = format!("subcontract-sandbox-test-{}", unique_secs());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let _listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    let script = format!(
        r#"
import os, signal, socket
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\0{name}"); print("unix:open")
except OSError as e:
    print("unix:closed", e.errno)
try:
    os.kill({me}, signal.SIGCONT); print("signal:sent")
except OSError as e:
    print("signal:denied", e.errno)
try:
    open("/proc/{me}/environ", "rb").read(); print("environ:read")
except OSError as e:
    print("environ:denied", e.errno)
caps = [l.split()[1] for l in open("/proc/self/status") if l.startswith(("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"))]
print("caps:none" if set(caps) == {{"0000000000000000"}} and len(caps) == 5 else "caps:" + ",".join(caps))
child = os.fork()
if child == 0:
    signal.pause()
os.kill(child, signal.SIGKILL); os.waitpid(child, 0); print("own-child:signalled")
"#,
        me = std::process::id()
    );
    let out = run_ok(request(copy.path(), &["python3", "-c", &script])).await;
    let text = &out.stdout.text;
    assert!(text.contains("unix:closed 1\n"), "{}", out.to_tool_text());
    assert!(text.contains("signal:denied 1\n"), "{}", out.to_tool_text());
    // Even as root, the command has no capability to step around the rest.
    assert!(text.contains("caps:none\n"), "{}", out.to_tool_text());
    // The host's environment (its API keys) cannot be read through /proc either.
    assert!(
        text.contains("environ:denied 13\n"),
        "{}",
        out.to_tool_text()
    );
    assert!(
        text.contains("own-child:signalled"),
        "{}",
        out.to_tool_text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_host_variable_reaches_a_command() {
    // The test process's environment holds a key; the command must not see it. (Set once,
    // to a fixed value, before any command of this test runs.)
    std::env::set_var("OPENAI_API_KEY", "sk-sentinel-sandbox-test");
    let copy = tempfile::tempdir().unwrap();
    for mode in [SandboxMode::Os, SandboxMode::None] {
        let mut req = request(copy.path(), &["env"]);
        req.mode = mode;
        let out = run_ok(req).await;
        assert_eq!(out.exit_code, Some(0), "{}", out.to_tool_text());
        let mut names: Vec<&str> = out
            .stdout
            .text
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, _)| k)
            .collect();
        names.sort_unstable();
        assert_eq!(
            names,
            ["HOME", "LANG", "PATH", "TMPDIR"],
            "{}",
            out.stdout.text
        );
        assert!(!out.stdout.text.contains("sk-sentinel"));
        assert!(out.stdout.text.contains(&format!("PATH={DEFAULT_PATH}\n")));
        assert!(out.stdout.text.contains("LANG=C.UTF-8\n"));
    }
    assert_eq!(
        std::env::var("OPENAI_API_KEY").unwrap(),
        "sk-sentinel-sandbox-test"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_process_outlives_its_command() {
    let copy = tempfile::tempdir().unwrap();
    for mode in [SandboxMode::Os, SandboxMode::None] {
        let (a, b, c) = (unique_secs(), unique_secs(), unique_secs());
        // Plain background, setsid (a new session and group), and one that keeps stdout.
        let script = format!(
            "sleep {a} >/dev/null 2>&1 & setsid sleep {b} >/dev/null 2>&1 & sleep {c} & echo started"
        );
        let mut req = sh(copy.path(), &script);
        req.mode = mode;
        let out = run_ok(req).await;
        assert_eq!(out.exit_code, Some(0), "{}", out.to_tool_text());
        assert_eq!(out.stdout.text, "started\n");
        assert!(out.duration < Duration::from_secs(4), "{:?}", out.duration);
        for secs in [&a, &b, &c] {
            assert!(
                live(&["sleep", secs]).is_empty(),
                "{mode:?}: sleep {secs} survived"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_or_cancelling_kills_every_process() {
    let copy = tempfile::tempdir().unwrap();
    for cancel_it in [false, true] {
        let (a, b, c) = (unique_secs(), unique_secs(), unique_secs());
        let script = format!("sleep {a} & setsid sleep {b} >/dev/null 2>&1 & sleep {c}");
        let mut req = sh(copy.path(), &script);
        req.timeout = Duration::from_secs(60);
        let cancel = CancellationToken::new();
        let fut = run(req, cancel.clone());
        let all_up = async {
            assert!(
                eventually(Duration::from_secs(5), || [&a, &b, &c]
                    .iter()
                    .all(|s| !live(&["sleep", s]).is_empty()))
                .await,
                "the command's processes never started"
            );
        };
        if cancel_it {
            let (res, ()) = tokio::join!(fut, async {
                all_up.await;
                cancel.cancel();
            });
            assert!(matches!(res, Err(SandboxError::Cancelled)), "{res:?}");
        } else {
            tokio::select! {
                _ = fut => panic!("the command ended by itself"),
                () = all_up => {}
            }
            // `fut` was dropped at the end of the select.
        }
        for secs in [&a, &b, &c] {
            assert!(
                eventually(Duration::from_secs(3), || live(&["sleep", secs]).is_empty()).await,
                "cancel={cancel_it}: sleep {secs} survived"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_kills_the_command_promptly() {
    let copy = tempfile::tempdir().unwrap();
    let secs = unique_secs();
    let mut req = sh(
        copy.path(),
        &format!("echo before; setsid sleep {secs} & sleep {secs}"),
    );
    req.timeout = Duration::from_millis(500);
    let out = run_ok(req).await;
    assert!(out.timed_out, "{}", out.to_tool_text());
    assert_eq!(out.signal, Some(9));
    assert_eq!(out.exit_code, None);
    assert!(out.duration < Duration::from_secs(2), "{:?}", out.duration);
    assert_eq!(out.stdout.text, "before\n");
    assert!(
        out.to_tool_text().starts_with("timed out after"),
        "{}",
        out.to_tool_text()
    );
    assert!(live(&["sleep", &secs]).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_bomb_is_contained() {
    let copy = tempfile::tempdir().unwrap();
    // Bounded even if containment failed: at most 200 children, each gone within 20 s.
    let script = r#"
import os, time
n = 0
for _ in range(200):
    try:
        pid = os.fork()
    except OSError as e:
        print("fork refused after", n, "errno", e.errno, flush=True)
        break
    if pid == 0:
        time.sleep(20)
        os._exit(0)
    n += 1
else:
    print("forked", n, flush=True)
time.sleep(20)
"#;
    let mut req = request(copy.path(), &["python3", "-c", script]);
    req.limits.max_processes = 16;
    req.timeout = Duration::from_secs(3);
    let out = run_ok(req).await;
    assert!(out.timed_out);
    let line = out
        .stdout
        .text
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    let forked: u32 = line
        .strip_prefix("fork refused after ")
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not contained: {}", out.to_tool_text()));
    assert!(forked < 16, "{line}");
    assert!(line.ends_with("errno 11"), "EAGAIN: {line}");
    // Every child was killed with the command.
    assert!(
        live(&["python3", "-c", script]).is_empty(),
        "fork-bomb processes survived"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_size_is_limited() {
    let copy = tempfile::tempdir().unwrap();
    let mut req = sh(copy.path(), "head -c 3000000 /dev/zero > big; echo status=$?; head -c 1000 /dev/zero > small; echo status=$?");
    req.limits.max_file_bytes = 1 << 20;
    let out = run_ok(req).await;
    let lines: Vec<&str> = out.stdout.text.lines().collect();
    assert_ne!(lines.first(), Some(&"status=0"), "{}", out.to_tool_text());
    assert_eq!(lines.get(1), Some(&"status=0"), "{}", out.to_tool_text());
    assert_eq!(
        std::fs::metadata(copy.path().join("big")).unwrap().len(),
        1 << 20
    );
    assert_eq!(
        std::fs::metadata(copy.path().join("small")).unwrap().len(),
        1000
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_output_is_cut_and_read_promptly() {
    let copy = tempfile::tempdir().unwrap();
    let req = sh(
        copy.path(),
        "echo START; yes 0123456789 | head -c 100000000; echo; echo END; echo err >&2",
    );
    let out = run_ok(req).await;
    assert_eq!(out.exit_code, Some(0));
    assert!(out.duration < Duration::from_secs(8), "{:?}", out.duration);
    assert_eq!(out.stdout.total_bytes, 100_000_000 + 6 + 1 + 4);
    assert!(out.stdout.cut);
    assert!(
        out.stdout.text.len() < (64 << 10) + 100,
        "{}",
        out.stdout.text.len()
    );
    assert!(out.stdout.text.starts_with("START\n0123456789\n"));
    assert!(out.stdout.text.ends_with("\nEND\n"));
    assert!(out.stdout.text.contains(" bytes cut …]"));
    assert_eq!(out.stderr.text, "err\n");
    assert!(!out.stderr.cut);
    let text = out.to_tool_text();
    assert!(
        text.contains("stdout (100000011 bytes, cut"),
        "{}",
        &text[..200]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_allowed_programs_run() {
    let copy = tempfile::tempdir().unwrap();
    let refused = run(
        request(copy.path(), &["curl", "http://example.com"]),
        CancellationToken::new(),
    )
    .await;
    let Err(e @ SandboxError::NotAllowed { .. }) = refused else {
        panic!("{refused:?}")
    };
    assert!(e.to_string().contains("allowed: sh, python3, env"), "{e}");
    // A path is not its bare name, and a bare name not a path.
    let by_path = run(
        request(copy.path(), &["/bin/sh", "-c", "true"]),
        CancellationToken::new(),
    )
    .await;
    assert!(
        matches!(by_path, Err(SandboxError::NotAllowed { .. })),
        "{by_path:?}"
    );
    // A program in the copy, listed exactly as written.
    std::fs::write(copy.path().join("x"), "#!/bin/sh\necho from-x\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            copy.path().join("x"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
    }
    let mut req = request(copy.path(), &["./x"]);
    req.allowed_programs.push("./x".to_owned());
    assert_eq!(run_ok(req).await.stdout.text, "from-x\n");
    let mut req = request(copy.path(), &["no-such-program-here"]);
    req.allowed_programs.push("no-such-program-here".to_owned());
    let missing = run(req, CancellationToken::new()).await;
    assert!(
        matches!(missing, Err(SandboxError::NotFound { .. })),
        "{missing:?}"
    );
    let empty = run(request(copy.path(), &[]), CancellationToken::new()).await;
    assert!(matches!(empty, Err(SandboxError::EmptyArgv)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mode_none_has_no_landlock_but_keeps_the_rest() {
    let parent = tempfile::tempdir().unwrap();
    let copy = tempfile::tempdir().unwrap();
    let secs = unique_secs();
    let mut req = sh(
        copy.path(),
        &format!(
            "echo x > {}/outside && echo written; setsid sleep {secs} >/dev/null 2>&1 & echo $HOME",
            parent.path().display()
        ),
    );
    req.mode = SandboxMode::None;
    let out = run_ok(req).await;
    assert!(
        out.stdout.text.starts_with("written\n"),
        "{}",
        out.to_tool_text()
    );
    assert!(parent.path().join("outside").exists());
    assert!(
        out.stdout.text.contains("subcontract-cmd-"),
        "HOME is private: {}",
        out.stdout.text
    );
    assert!(live(&["sleep", &secs]).is_empty());
}

#[test]
fn capture_keeps_head_and_tail() {
    let mut c = Capture::new(10);
    c.push(b"abc");
    c.push(b"defghijklmnopqrstuvwxyz");
    c.push(b"12");
    let got = c.finish();
    assert_eq!(got.total_bytes, 28);
    assert!(got.cut);
    assert_eq!(got.text, "abcde\n[… 18 bytes cut …]\nxyz12");

    let mut c = Capture::new(10);
    c.push(b"0123456789");
    let got = c.finish();
    assert_eq!((got.text.as_str(), got.cut), ("0123456789", false));

    // A cut never splits a character.
    let mut c = Capture::new(8);
    c.push("ééééééééé".as_bytes());
    let got = c.finish();
    assert!(!got.text.contains('\u{FFFD}'), "{}", got.text);
    assert_eq!(got.total_bytes, 18);
}

#[test]
fn tool_text_says_how_it_ended() {
    let out = CommandOutput {
        exit_code: Some(2),
        signal: None,
        timed_out: false,
        duration: Duration::from_millis(1500),
        stdout: Captured {
            text: "hi\n".into(),
            total_bytes: 3,
            cut: false,
        },
        stderr: Captured::default(),
    };
    assert_eq!(
        out.to_tool_text(),
        "exit code 2; 1.50 s\nstdout:\nhi\nstderr: (empty)\n"
    );
}
