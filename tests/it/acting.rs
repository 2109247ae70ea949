//! Sub-agents that act, end to end through the run loop: real git worktrees and copies, the
//! real OS sandbox (Landlock) around every command, scripted models. Each test tries to break
//! one guarantee: the parent's files change only by an accepted change, a command reaches
//! nothing outside its copy, nothing is lost, capabilities only narrow.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde_json::{json, Value};
use subcontract::events::tree::build_tree;
use subcontract::events::EventKind;
use subcontract::host::Host;
use subcontract::model::{Message, ModelRequest, ScriptStep};
use subcontract::spec::load_spec_str;
use subcontract::{Ctx, MemorySink, Outcome, SubAgentSpec};

use crate::common::model;

const INVENTORY: &str = "def total(items):\n    t = 0\n    for i in range(len(items) - 1):\n        t += items[i]\n    return t\n";
const TEST: &str = "import unittest\nfrom inventory import total\n\nclass T(unittest.TestCase):\n    def test_total(self):\n        self.assertEqual(total([1, 2, 3]), 6)\n\nif __name__ == '__main__':\n    unittest.main()\n";

/// A git repository with a failing test, an uncommitted change and an untracked file (the
/// parent's own work in progress, which a worktree must carry over).
fn repo(dir: &Path) {
    std::fs::write(dir.join("inventory.py"), INVENTORY).unwrap();
    std::fs::write(dir.join("test_inventory.py"), TEST).unwrap();
    std::fs::write(dir.join(".gitignore"), "__pycache__/\n").unwrap();
    std::fs::write(dir.join("notes.md"), "committed\n").unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "start"]);
    std::fs::write(
        dir.join("notes.md"),
        "committed\nand changed, uncommitted\n",
    )
    .unwrap();
    std::fs::write(dir.join("draft.md"), "untracked\n").unwrap();
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every file under `dir` (`.git` included: its index, HEAD and refs must not move either),
/// with its bytes; symbolic links as their targets.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap().to_path_buf();
            // Git's own bookkeeping of linked worktrees comes and goes with them, and is
            // checked apart (`git worktree list`); the logs record nothing of ours.
            if rel.starts_with(".git/worktrees") || rel.starts_with(".git/logs") {
                continue;
            }
            let t = e.file_type().unwrap();
            if t.is_dir() {
                stack.push(p);
            } else if t.is_symlink() {
                out.insert(
                    rel,
                    std::fs::read_link(&p)
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes(),
                );
            } else {
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn worktrees(dir: &Path) -> usize {
    git(dir, &["worktree", "list", "--porcelain"])
        .lines()
        .filter(|l| l.starts_with("worktree "))
        .count()
}

fn fixer(isolation: &str, extra: &str) -> SubAgentSpec<Value, Value> {
    load_spec_str(Path::new("fixer.toml"), &fixer_toml(isolation, extra))
        .expect("the fixer spec loads")
}

/// The fixer spec's file text.
fn fixer_toml(isolation: &str, extra: &str) -> String {
    format!(
        r#"
name = "fixer"
description = "Fix the failing test."
system = "FIXER"
tools = ["read_file", "edit_file", "write_file", "run_command"]
[limits]
max_turns = 4
timeout_secs = 60
[workspace]
isolation = "{isolation}"
writes = ["inventory.py", "scratch/**"]
commands = ["python3", "sh"]
checks = ["python3 -m unittest -q"]
{extra}
[input]
type = "object"
[output]
type = "object"
required = ["cause"]
additionalProperties = false
properties.cause = {{ type = "string", maxLength = 200 }}
"#
    )
}

const GOOD_EDIT: (&str, &str) = ("range(len(items) - 1)", "range(len(items))");

fn edit(old: &str, new: &str) -> ScriptStep {
    ScriptStep::tool_call(
        "edit_file",
        json!({"path": "inventory.py", "old": old, "new": new}),
    )
}

fn submit() -> ScriptStep {
    ScriptStep::submit(json!({"cause": "the loop stops one item short"}))
}

struct Setup {
    _tmp: tempfile::TempDir,
    ws: PathBuf,
    copies: PathBuf,
    events: Arc<MemorySink>,
}

fn setup(git_repo: bool) -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    if git_repo {
        repo(&ws);
    } else {
        std::fs::write(ws.join("inventory.py"), INVENTORY).unwrap();
        std::fs::write(ws.join("test_inventory.py"), TEST).unwrap();
    }
    let copies = tmp.path().join("copies");
    Setup {
        ws,
        copies,
        events: Arc::new(MemorySink::new()),
        _tmp: tmp,
    }
}

fn host(
    s: &Setup,
    model: Arc<dyn subcontract::Model>,
    specs: &[&SubAgentSpec<Value, Value>],
) -> Ctx {
    let mut b = Host::builder()
        .model(model)
        .workspace(&s.ws)
        .copies_dir(&s.copies)
        .sink(s.events.clone());
    for spec in specs {
        b = b.spec(*spec);
    }
    b.build().expect("host").build()
}

/// Live copies under the copies directory (kept patches aside).
fn live_copies(copies: &Path) -> Vec<String> {
    std::fs::read_dir(copies)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n != "patches")
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_fix_in_a_worktree_comes_back_as_changes_and_the_parent_is_untouched() {
    let s = setup(true);
    let before = snapshot(&s.ws);
    let spec = fixer("worktree", "");
    let m = model(|_, turn, req: &ModelRequest<'_>| match turn {
        // The copy holds the parent's uncommitted and untracked work.
        1 => ScriptStep::tool_call("read_file", json!({"path": "draft.md"})),
        2 => {
            let seen = match req.messages.last() {
                Some(Message::ToolResults { results, .. }) => results[0].content.clone(),
                _ => String::new(),
            };
            assert!(
                seen.contains("untracked"),
                "the copy lacks the untracked file: {seen}"
            );
            edit(GOOD_EDIT.0, GOOD_EDIT.1)
        }
        _ => submit(),
    });
    let ctx = host(&s, m, &[&spec]);
    let r = spec.run_child(&json!({}), &ctx).await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    let changes = r
        .changes
        .expect("a completed acting run hands back its changes");
    let paths: Vec<&str> = changes.files.iter().map(|f| f.path.as_str()).collect();
    // Only what the run changed: not the parent's uncommitted notes, not the untracked draft.
    assert_eq!(paths, ["inventory.py"]);
    assert_eq!(
        (changes.files[0].insertions, changes.files[0].deletions),
        (1, 1)
    );
    assert_eq!(snapshot(&s.ws), before, "the parent's tree changed");
    assert_eq!(worktrees(&s.ws), 1, "a worktree was left registered");
    assert!(
        live_copies(&s.copies).is_empty(),
        "copies left: {:?}",
        live_copies(&s.copies)
    );
    // The diff is one `git apply` takes in the parent's tree, and applying it fixes the test.
    let patch = s.ws.parent().unwrap().join("fix.patch");
    std::fs::write(&patch, &changes.diff).unwrap();
    git(&s.ws, &["apply", "--check", patch.to_str().unwrap()]);
    changes.apply(&s.ws).expect("applies");
    assert_eq!(
        std::fs::read_to_string(s.ws.join("notes.md")).unwrap(),
        "committed\nand changed, uncommitted\n"
    );
    let ok = Command::new("python3")
        .args(["-m", "unittest", "-q"])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .current_dir(&s.ws)
        .status()
        .unwrap()
        .success();
    assert!(ok, "the applied fix should pass the test");
}

#[tokio::test]
async fn a_failing_check_goes_back_for_repair_and_unrepaired_changes_are_kept_not_applied() {
    let s = setup(true);
    let before = snapshot(&s.ws);
    let spec = fixer("worktree", "");
    let m = model(|_, turn, req: &ModelRequest<'_>| match turn {
        1 => edit("t += items[i]", "t += items[i] * 1"),
        2 => submit(),
        3 => {
            // The repair names the failing check and quotes its output.
            let text = match req.messages.last() {
                Some(Message::ToolResults { results, .. }) => results[0].content.clone(),
                _ => String::new(),
            };
            assert!(text.contains("python3 -m unittest -q"), "{text}");
            assert!(
                text.contains("AssertionError") || text.contains("FAILED"),
                "{text}"
            );
            submit()
        }
        _ => submit(),
    });
    let ctx = host(&s, m, &[&spec]);
    let r = spec.run_child(&json!({}), &ctx).await;
    assert_eq!(r.outcome, Outcome::InvalidOutput);
    assert!(
        r.changes.is_none(),
        "a failed run's changes are never handed back to apply"
    );
    assert_eq!(snapshot(&s.ws), before);
    // Kept, not lost: the patch file its event names holds the edit.
    let tree = build_tree(&s.events.events());
    let kept = tree[0]
        .changes
        .iter()
        .find(|c| c.status == "kept")
        .and_then(|c| c.patch.clone())
        .expect("a kept patch");
    assert!(Path::new(&kept).starts_with(&s.copies), "{kept}");
    let text = std::fs::read_to_string(&kept).unwrap();
    assert!(text.contains("+        t += items[i] * 1"), "{text}");
    assert!(tree[0].commands.iter().all(|c| c.program == "python3"));
}

#[tokio::test]
async fn writes_outside_the_spec_s_globs_and_escapes_are_refused() {
    let s = setup(true);
    let before = snapshot(&s.ws);
    let spec = fixer("worktree", "");
    let outside = s.ws.parent().unwrap().join("outside.txt");
    let target = outside.display().to_string();
    let refused = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = refused.clone();
    let m = model(move |_, turn, req: &ModelRequest<'_>| {
        if let Some(Message::ToolResults { results, .. }) = req.messages.last() {
            for r in results {
                assert!(r.is_error, "turn {turn}: {}", r.content);
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let write = |path: &str| {
            (
                "write_file".to_owned(),
                json!({"path": path, "content": "x"}),
            )
        };
        match turn {
            // Outside `writes`, then out of the copy by `..`, by absolute path, and into git's
            // own directory (the worktree's `.git` names the parent's repository).
            1 => ScriptStep::tool_calls(vec![write("test_inventory.py")]),
            2 => ScriptStep::tool_calls(vec![write("../outside.txt"), write(&target)]),
            3 => ScriptStep::tool_calls(vec![write(".git/config"), write(".git")]),
            _ => submit(),
        }
    });
    let ctx = host(&s, m, &[&spec]);
    let r = spec.run_child(&json!({}), &ctx).await;
    assert_eq!(refused.load(std::sync::atomic::Ordering::SeqCst), 5);
    assert_ne!(r.outcome, Outcome::Completed);
    assert!(!outside.exists());
    assert_eq!(snapshot(&s.ws), before);
    assert_eq!(worktrees(&s.ws), 1);
}

#[tokio::test]
async fn a_command_writes_only_in_its_copy_and_sees_no_host_secret() {
    let s = setup(false);
    let before = snapshot(&s.ws);
    let spec = fixer("copy", "");
    let parent_file = s.ws.join("inventory.py").display().to_string();
    let m = model(move |_, turn, req: &ModelRequest<'_>| {
        let last = match req.messages.last() {
            Some(Message::ToolResults { results, .. }) => results[0].content.clone(),
            _ => String::new(),
        };
        match turn {
            // Straight at the parent's file, by its absolute path.
            1 => ScriptStep::tool_call(
                "run_command",
                json!({"argv": ["sh", "-c", format!("echo pwned > {parent_file}; echo rc=$?")]}),
            ),
            2 => {
                assert!(
                    !last.contains("rc=0"),
                    "the write outside the copy succeeded: {last}"
                );
                ScriptStep::tool_call("run_command", json!({"argv": ["sh", "-c", "env"]}))
            }
            3 => {
                assert!(!last.contains("SUBCONTRACT_TEST_SECRET"), "{last}");
                assert!(last.contains("PATH="), "{last}");
                ScriptStep::tool_call(
                    "run_command",
                    json!({"argv": ["sh", "-c", "mkdir -p scratch && echo ok > scratch/x && cat scratch/x"]}),
                )
            }
            _ => {
                assert!(
                    last.contains("ok"),
                    "writing in the copy should work: {last}"
                );
                submit()
            }
        }
    });
    // A secret of the host's environment, which no command may see. Set for this process
    // alone; no other test reads it.
    std::env::set_var("SUBCONTRACT_TEST_SECRET", "hunter2");
    let ctx = host(&s, m, &[&spec]);
    let r = spec.run_child(&json!({}), &ctx).await;
    assert_eq!(snapshot(&s.ws), before);
    // The check fails (the test still fails), so the run cannot complete; what matters here is
    // that no command reached outside.
    assert_ne!(r.outcome, Outcome::Completed);

    // One event per command: its program, exit code, time and bytes, never its environment.
    let events = s.events.events();
    let commands: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Command {
                program,
                exit_code,
                output_bytes,
                duration_ms,
                ..
            } if *e.run_id == r.run_id => {
                Some((program.clone(), *exit_code, *output_bytes, *duration_ms))
            }
            _ => None,
        })
        .collect();
    assert!(commands.len() >= 3, "{commands:?}");
    assert!(commands[..3]
        .iter()
        .all(|(p, code, _, ms)| p == "sh" && code.is_some() && *ms >= 0.0));
    // `env` printed the command's whole environment; the event has only its size.
    assert!(commands[1].2 > "PATH=".len() as u64, "{commands:?}");
    let text = serde_json::to_string(&events).unwrap();
    assert!(
        !text.contains("hunter2") && !text.contains("PATH="),
        "an event carries an environment"
    );
    // The run tree shows them, and the changes kept from the failed run.
    let tree = subcontract::events::tree::render_tree(&build_tree(&events));
    // The submission's check is a command too, the last.
    assert!(
        tree.contains("$ 4 command(s), 1 failed; last: python3 (exit 1)"),
        "{tree}"
    );
    assert!(tree.contains("± changes"), "{tree}");
}

#[tokio::test]
async fn a_child_of_an_acting_parent_copies_the_parents_copy_and_the_parent_decides() {
    let s = setup(true);
    let before = snapshot(&s.ws);
    let child = fixer("worktree", "");
    let parent_src = r#"
name = "lead"
description = "Leads."
system = "LEAD"
tools = ["write_file", "fixer", "accept_changes", "discard_changes"]
[limits]
max_turns = 5
[workspace]
isolation = "worktree"
commands = ["python3", "sh"]
[input]
type = "object"
[output]
type = "string"
maxLength = 200
"#;
    let parent = load_spec_str(Path::new("lead.toml"), parent_src).unwrap();
    let m = model(|system, turn, req: &ModelRequest<'_>| {
        let last = match req.messages.last() {
            Some(Message::ToolResults { results, .. }) => results
                .iter()
                .map(|r| r.content.clone())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        };
        if system == "LEAD" {
            return match turn {
                1 => ScriptStep::tool_call(
                    "write_file",
                    json!({"path": "lead.md", "content": "the lead's own work\n"}),
                ),
                2 => ScriptStep::tool_call("fixer", json!({})),
                3 => {
                    let v: Value = serde_json::from_str(&last)
                        .unwrap_or_else(|e| panic!("the child's result is JSON: {e}: {last}"));
                    assert_eq!(v["output"]["cause"], "the loop stops one item short");
                    let id = v["changes"]["id"]
                        .as_str()
                        .expect("a changes id")
                        .to_owned();
                    ScriptStep::tool_call("accept_changes", json!({"id": id}))
                }
                _ => {
                    assert!(last.contains("applied"), "{last}");
                    ScriptStep::text("done")
                }
            };
        }
        match turn {
            // The child sees its parent's copy, uncommitted writes included.
            1 => ScriptStep::tool_call("read_file", json!({"path": "lead.md"})),
            2 => {
                assert!(last.contains("the lead's own work"), "{last}");
                edit(GOOD_EDIT.0, GOOD_EDIT.1)
            }
            _ => submit(),
        }
    });
    let ctx = host(&s, m, &[&child]);
    let r = parent.run(&json!({}), &ctx).await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    let changes = r.changes.expect("the lead's changes");
    let mut paths: Vec<&str> = changes.files.iter().map(|f| f.path.as_str()).collect();
    paths.sort_unstable();
    assert_eq!(paths, ["inventory.py", "lead.md"]);
    assert_eq!(
        snapshot(&s.ws),
        before,
        "nothing reaches the workspace until applied"
    );
    assert_eq!(worktrees(&s.ws), 1);
    let tree = build_tree(&s.events.events());
    assert!(tree[0].changes.iter().any(|c| c.status == "accepted"));
}

#[tokio::test]
async fn siblings_that_conflict_apply_one_and_report_the_other() {
    let s = setup(false);
    let before = snapshot(&s.ws);
    let child = fixer("copy", "");
    let parent_src = r#"
name = "lead"
description = "Leads."
system = "LEAD"
tools = ["fixer", "accept_changes", "discard_changes"]
[limits]
max_turns = 5
[workspace]
isolation = "copy"
commands = ["python3", "sh"]
[input]
type = "object"
[output]
type = "string"
maxLength = 300
"#;
    let parent = load_spec_str(Path::new("lead.toml"), parent_src).unwrap();
    let ids = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = ids.clone();
    let m = model(move |system, turn, req: &ModelRequest<'_>| {
        let results: Vec<(String, bool)> = match req.messages.last() {
            Some(Message::ToolResults { results, .. }) => results
                .iter()
                .map(|r| (r.content.clone(), r.is_error))
                .collect(),
            _ => Vec::new(),
        };
        if system == "LEAD" {
            return match turn {
                1 => ScriptStep::tool_calls(vec![
                    ("fixer".into(), json!({"n": 1})),
                    ("fixer".into(), json!({"n": 2})),
                ]),
                2 => {
                    let mut ids = seen.lock().unwrap();
                    for (c, _) in &results {
                        let v: Value =
                            serde_json::from_str(c).unwrap_or_else(|e| panic!("JSON: {e}: {c}"));
                        ids.push(v["changes"]["id"].as_str().unwrap().to_owned());
                    }
                    ScriptStep::tool_call("accept_changes", json!({"id": ids[0]}))
                }
                3 => {
                    assert!(!results[0].1, "the first accept applies: {}", results[0].0);
                    ScriptStep::tool_call("accept_changes", json!({"id": seen.lock().unwrap()[1]}))
                }
                _ => {
                    let (text, is_error) = &results[0];
                    assert!(
                        *is_error && text.contains("inventory.py"),
                        "the conflict names the file: {text}"
                    );
                    ScriptStep::text("one applied, one conflicted")
                }
            };
        }
        let first = matches!(req.messages.first(), Some(Message::User { text }) if text.contains("\"n\":1"));
        match turn {
            1 if first => edit(GOOD_EDIT.0, GOOD_EDIT.1),
            // The same line, fixed another way: both pass their checks, and they conflict.
            1 => edit(GOOD_EDIT.0, "range(0, len(items))"),
            _ => submit(),
        }
    });
    let ctx = host(&s, m, &[&child]);
    let r = parent.run(&json!({}), &ctx).await;
    assert_eq!(r.outcome, Outcome::Completed, "{:?}", r.error);
    let changes = r.changes.expect("changes");
    assert!(
        changes.diff.contains("+    for i in range(len(items)):"),
        "{}",
        changes.diff
    );
    assert!(!changes.diff.contains("range(0, len(items))"));
    // Accepted into the lead's copy, never further up: the root's tree is untouched.
    assert_eq!(snapshot(&s.ws), before);
}

#[test]
fn an_acting_tool_without_isolation_is_refused_where_it_is_written() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("bad.toml"),
        "name = \"bad\"\ndescription = \"d\"\nsystem = \"s\"\ntools = [\"read_file\", \"run_command\"]\n\
         [input]\ntype = \"object\"\n[output]\ntype = \"string\"\nmaxLength = 10\n\
         [[examples]]\ninput = {}\noutput = \"x\"\n",
    )
    .unwrap();
    let (code, text) = check(dir.path());
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("bad.toml:4:23: error[acting-without-isolation]"),
        "{text}"
    );
}

/// A host killed with `kill -9` mid-run leaves its working copy and its worktree registration
/// behind; the next host that makes a copy in the same place removes both.
#[tokio::test]
async fn a_copy_left_by_kill_9_is_removed_by_the_next_start() {
    let s = setup(true);
    let before = snapshot(&s.ws);
    let spec_path = s.ws.parent().unwrap().join("fixer.toml");
    std::fs::write(
        &spec_path,
        "name = \"fixer\"\ndescription = \"d\"\nsystem = \"s\"\ntools = [\"edit_file\"]\n\
         [workspace]\nisolation = \"worktree\"\n[input]\ntype = \"object\"\n[output]\n\
         type = \"string\"\nmaxLength = 10\n",
    )
    .unwrap();
    // A model server that accepts and never answers: the run waits in its first call, its
    // copy made.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let _hold = std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in listener.incoming().take(4) {
            held.push(c);
        }
        std::thread::sleep(std::time::Duration::from_secs(30));
    });
    let mut child = Command::new(env!("CARGO_BIN_EXE_subcontract"))
        .args([
            "run",
            spec_path.to_str().unwrap(),
            "--input",
            "{}",
            "--workspace",
        ])
        .arg(&s.ws)
        .args(["--model", "openai:stuck", "--base-url"])
        .arg(format!("http://127.0.0.1:{port}/v1"))
        .env("OPENAI_API_KEY", "test")
        .env("SUBCONTRACT_COPIES_DIR", &s.copies)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while live_copies(&s.copies).is_empty() || worktrees(&s.ws) < 2 {
        assert!(std::time::Instant::now() < deadline, "no copy was made");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // SIGKILL: nothing of the process runs after it.
    Command::new("kill")
        .args(["-9", &child.id().to_string()])
        .status()
        .unwrap();
    let _ = child.wait();
    assert_eq!(
        worktrees(&s.ws),
        2,
        "the killed run's worktree is still registered"
    );
    assert_eq!(live_copies(&s.copies).len(), 1);

    let spec = fixer("worktree", "");
    let m = model(|_, _, _| submit());
    let ctx = host(&s, m, &[&spec]);
    let r = spec.run_child(&json!({}), &ctx).await;
    assert_eq!(
        r.outcome,
        Outcome::InvalidOutput,
        "the unfixed test fails its check"
    );
    assert!(
        live_copies(&s.copies).is_empty(),
        "left: {:?}",
        live_copies(&s.copies)
    );
    assert_eq!(worktrees(&s.ws), 1, "a stale worktree is still registered");
    assert_eq!(snapshot(&s.ws), before);
}

/// `check` reports each mistake of a `[workspace]` table where it is written, with its stable
/// code; `sandbox = "none"` is a warning, not an error.
#[test]
fn check_reports_workspace_mistakes_at_their_place() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("acting.toml"),
        "name = \"acting\"\ndescription = \"d\"\nsystem = \"s\"\ntools = [\"run_command\"]\n\
         [workspace]\nisolation = \"copy\"\nwrites = [\"src/[\"]\ncommands = [\"cargo\"]\n\
         checks = [\"make test\"]\nsandbox = \"none\"\n[input]\ntype = \"object\"\n[output]\n\
         type = \"string\"\nmaxLength = 10\n[[examples]]\ninput = {}\noutput = \"x\"\n",
    )
    .unwrap();
    let (code, text) = check(dir.path());
    assert_eq!(code, Some(1), "{text}");
    for want in [
        "acting.toml:7:10: error[invalid-glob]",
        "acting.toml:9:10: error[check-not-allowed]",
        "acting.toml:10:11: warning[no-sandbox]",
    ] {
        assert!(text.contains(want), "missing `{want}` in:\n{text}");
    }
    // The same spec without the mistakes is clean but for the warning.
    std::fs::write(
        dir.path().join("acting.toml"),
        "name = \"acting\"\ndescription = \"d\"\nsystem = \"s\"\ntools = [\"run_command\"]\n\
         [workspace]\nisolation = \"copy\"\ncommands = [\"make\"]\nchecks = [\"make test\"]\n\
         [input]\ntype = \"object\"\n[output]\ntype = \"string\"\nmaxLength = 10\n\
         [[examples]]\ninput = {}\noutput = \"x\"\n",
    )
    .unwrap();
    let (code, text) = check(dir.path());
    assert_eq!(code, Some(0), "{text}");
    // A tool that does not move to the copy (an MCP server's) is a warning at its place.
    std::fs::write(
        dir.path().join("acting.toml"),
        "name = \"acting\"\ndescription = \"d\"\nsystem = \"s\"\n\
         tools = [\"run_command\", \"mcp__fs__write_file\"]\n\
         [workspace]\nisolation = \"copy\"\ncommands = [\"make\"]\n\
         [input]\ntype = \"object\"\n[output]\ntype = \"string\"\nmaxLength = 10\n\
         [[examples]]\ninput = {}\noutput = \"x\"\n",
    )
    .unwrap();
    let (code, text) = check(dir.path());
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("acting.toml:4:25: warning[tool-outside-copy]"),
        "{text}"
    );
}

/// `subcontract check DIR`: its exit code, and what it printed.
fn check(dir: &Path) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_subcontract"))
        .arg("check")
        .arg(dir)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), text)
}

/// A run whose caller stops waiting for it (its future dropped mid-run) loses nothing: what it
/// had changed is kept as a patch, and its copy is removed.
#[tokio::test]
async fn a_run_dropped_mid_way_keeps_its_changes() {
    let s = setup(false);
    let before = snapshot(&s.ws);
    let spec = fixer("copy", "");
    let m = model(|_, turn, _| match turn {
        1 => edit(GOOD_EDIT.0, GOOD_EDIT.1),
        _ => submit().delayed(std::time::Duration::from_secs(30)),
    });
    let ctx = host(&s, m, &[&spec]);
    let input = json!({});
    let run = spec.run_child(&input, &ctx);
    assert!(
        tokio::time::timeout(std::time::Duration::from_secs(3), run)
            .await
            .is_err(),
        "the run should still be waiting on its model"
    );
    let patches = s.copies.join("patches");
    let kept: Vec<PathBuf> = std::fs::read_dir(&patches)
        .map(|rd| rd.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    assert_eq!(kept.len(), 1, "one kept patch in {}", patches.display());
    let text = std::fs::read_to_string(&kept[0]).unwrap();
    assert!(text.contains("+    for i in range(len(items)):"), "{text}");
    assert!(
        live_copies(&s.copies).is_empty(),
        "left: {:?}",
        live_copies(&s.copies)
    );
    assert_eq!(snapshot(&s.ws), before);
}

#[tokio::test]
async fn a_child_cannot_run_what_its_acting_parent_cannot() {
    let s = setup(false);
    let before = snapshot(&s.ws);
    let child = fixer("copy", "");
    // The parent acts but may run nothing: its child's `commands` narrow to none, so even the
    // child's own check cannot run, and the child cannot complete.
    let parent_src = r#"
name = "lead"
description = "Leads."
system = "LEAD"
tools = ["fixer"]
[limits]
max_turns = 3
[workspace]
isolation = "copy"
[input]
type = "object"
[output]
type = "string"
maxLength = 2000
"#;
    let parent = load_spec_str(Path::new("lead.toml"), parent_src).unwrap();
    let m = model(|system, turn, req: &ModelRequest<'_>| {
        let last = match req.messages.last() {
            Some(Message::ToolResults { results, .. }) => results[0].content.clone(),
            _ => String::new(),
        };
        if system == "LEAD" {
            return match turn {
                1 => ScriptStep::tool_call("fixer", json!({})),
                _ => ScriptStep::text(last),
            };
        }
        match turn {
            1 => ScriptStep::tool_call("run_command", json!({"argv": ["python3", "-V"]})),
            _ => {
                if turn == 2 {
                    assert!(last.contains("not an allowed program"), "{last}");
                }
                edit(GOOD_EDIT.0, GOOD_EDIT.1)
            }
        }
    });
    let ctx = host(&s, m, &[&child]);
    let r = parent.run(&json!({}), &ctx).await;
    let answer = r.output.unwrap_or_default();
    let answer = answer.as_str().unwrap_or_default();
    assert!(answer.contains("ended without a result"), "{answer}");
    let tree = build_tree(&s.events.events());
    let refused = &tree[0].children[0].commands;
    assert!(
        !refused.is_empty() && refused.iter().all(|c| c.error.is_some()),
        "every command of the child was refused: {refused:?}"
    );
    assert_eq!(snapshot(&s.ws), before);
}

/// `subcontract run SPEC --workspace DIR` with a model server at `url`; exit code and stderr.
fn run_cli(
    spec: &Path,
    s: &Setup,
    url: &str,
    extra: &[&str],
    tmpdir: Option<&Path>,
) -> (Option<i32>, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_subcontract"));
    cmd.arg("run")
        .arg(spec)
        .args(["--input", "{}", "--workspace"])
        .arg(&s.ws)
        .args(["--model", "openai:mock", "--base-url", url])
        .args(extra)
        .env("OPENAI_API_KEY", "test")
        .env("SUBCONTRACT_COPIES_DIR", &s.copies)
        .stdin(std::process::Stdio::null());
    if let Some(t) = tmpdir {
        cmd.env("TMPDIR", t);
    }
    let out = cmd.output().expect("subcontract runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A model that makes the good fix, then submits; `before_submit` runs as the submission is
/// asked for (the parent's own edit during the run, say).
fn fixing_server(before_submit: impl Fn() + Send + 'static) -> String {
    crate::common::chat_server(move |n, _| {
        if n == 0 {
            let (old, new) = GOOD_EDIT;
            return Some((
                "edit_file".into(),
                json!({"path": "inventory.py", "old": old, "new": new}),
            ));
        }
        before_submit();
        Some((
            "submit_output".into(),
            json!({"cause": "the loop stops one item short"}),
        ))
    })
}

/// The command line leaves the workspace byte for byte as it was, writes the patch where
/// `--changes-out` says (or to a file outside the workspace that stderr names) and says what
/// changed; `--apply` applies it; a conflict applies nothing and exits 1.
#[test]
fn the_command_line_keeps_the_workspace_until_asked_to_apply() {
    let s = setup(true);
    let spec = s.ws.parent().unwrap().join("fixer.toml");
    std::fs::write(&spec, fixer_toml("worktree", "")).unwrap();
    let before = snapshot(&s.ws);

    // --changes-out: the patch there, the workspace untouched, `git apply` takes the patch.
    let out = s.ws.parent().unwrap().join("fix.patch");
    let (code, err) = run_cli(
        &spec,
        &s,
        &fixing_server(|| {}),
        &["--changes-out", out.to_str().unwrap()],
        None,
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        snapshot(&s.ws),
        before,
        "the workspace changed without --apply"
    );
    let patch = std::fs::read_to_string(&out).expect("the patch was written");
    assert!(
        patch.contains("+    for i in range(len(items)):"),
        "{patch}"
    );
    assert!(
        err.contains(&format!(
            "changes: 1 file(s), +1 -1, written to {}",
            out.display()
        )),
        "{err}"
    );
    assert!(err.contains("the workspace is unchanged"), "{err}");
    git(&s.ws, &["apply", "--check", out.to_str().unwrap()]);

    // No --changes-out: a file outside the workspace, named on stderr.
    let (code, err) = run_cli(&spec, &s, &fixing_server(|| {}), &[], None);
    assert_eq!(code, Some(0), "{err}");
    let named = err
        .lines()
        .find_map(|l| l.split_once(", written to ").map(|(_, p)| PathBuf::from(p)))
        .unwrap_or_else(|| panic!("no patch path on stderr: {err}"));
    assert!(!named.starts_with(&s.ws), "{}", named.display());
    assert_eq!(std::fs::read_to_string(&named).unwrap(), patch);
    assert_eq!(snapshot(&s.ws), before);

    // A conflict: the parent's own edit of the same line during the run. Nothing applied.
    let ws = s.ws.clone();
    let theirs = INVENTORY.replace("range(len(items) - 1)", "range(0, len(items) - 1)");
    let parent_edit = theirs.clone();
    let url = fixing_server(move || std::fs::write(ws.join("inventory.py"), &parent_edit).unwrap());
    let (code, err) = run_cli(&spec, &s, &url, &["--apply"], None);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("were not applied (nothing was changed)"),
        "{err}"
    );
    assert!(err.contains("inventory.py"), "{err}");
    let mut after_edit = before.clone();
    after_edit.insert("inventory.py".into(), theirs.into_bytes());
    assert_eq!(
        snapshot(&s.ws),
        after_edit,
        "a conflicting apply changed the workspace"
    );

    // --apply with no conflict: exactly the fix, nothing else.
    std::fs::write(s.ws.join("inventory.py"), INVENTORY).unwrap();
    let (code, err) = run_cli(&spec, &s, &fixing_server(|| {}), &["--apply"], None);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("changes applied to"), "{err}");
    let mut fixed = before.clone();
    fixed.insert(
        "inventory.py".into(),
        INVENTORY.replace(GOOD_EDIT.0, GOOD_EDIT.1).into_bytes(),
    );
    assert_eq!(snapshot(&s.ws), fixed);
    assert!(
        live_copies(&s.copies).is_empty(),
        "{:?}",
        live_copies(&s.copies)
    );
}

/// The pids of processes whose command line is exactly `argv`.
fn processes(argv: &[&str]) -> Vec<u32> {
    let want: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want))
        .filter(|pid| {
            // A zombie has ended; only its entry waits to be reaped.
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| {
                st.rsplit_once(") ")
                    .is_some_and(|(_, r)| !r.starts_with('Z'))
            })
        })
        .collect()
}

/// Kills what a failed test left running.
struct KillOnDrop(Vec<u32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for pid in &self.0 {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    }
}

/// A host killed with `kill -9` while a command runs leaves the command running, its cgroup
/// and its private temporary directory; the next start kills the command and removes them.
#[test]
fn a_command_left_running_by_kill_9_is_killed_by_the_next_start() {
    let s = setup(true);
    let tmp = s.ws.parent().unwrap().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let spec = s.ws.parent().unwrap().join("sleeper.toml");
    std::fs::write(
        &spec,
        "name = \"sleeper\"\ndescription = \"d\"\nsystem = \"s\"\ntools = [\"run_command\"]\n\
         [limits]\ntimeout_secs = 120\n[workspace]\nisolation = \"worktree\"\n\
         commands = [\"sleep\"]\nmax_command_secs = 100\n[input]\ntype = \"object\"\n\
         [output]\ntype = \"object\"\nadditionalProperties = false\nproperties.cause = { type = \"string\", maxLength = 20 }\n",
    )
    .unwrap();
    // Seconds no other test sleeps: the process is found by its command line.
    let secs = format!("{}", 4_000_000 + std::process::id());
    let argv = ["sleep", secs.as_str()];
    let run_argv = json!(argv);
    let url = crate::common::chat_server(move |n, _| {
        (n == 0).then(|| ("run_command".into(), json!({ "argv": run_argv })))
    });
    let log = s.ws.parent().unwrap().join("host.log");
    let mut host = Command::new(env!("CARGO_BIN_EXE_subcontract"))
        .arg("run")
        .arg(&spec)
        .args(["--input", "{}", "--workspace"])
        .arg(&s.ws)
        .args(["--model", "openai:mock", "--base-url", &url])
        .env("OPENAI_API_KEY", "test")
        .env("SUBCONTRACT_COPIES_DIR", &s.copies)
        .env("TMPDIR", &tmp)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let pids = loop {
        let found = processes(&argv);
        if !found.is_empty() {
            break found;
        }
        assert!(
            std::time::Instant::now() < deadline && host.try_wait().unwrap().is_none(),
            "the command never started: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let _guard = KillOnDrop(pids.clone());
    Command::new("kill")
        .args(["-9", &host.id().to_string()])
        .status()
        .unwrap();
    let _ = host.wait();
    let leftovers = |tmp: &Path| -> Vec<String> {
        std::fs::read_dir(tmp)
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("subcontract-cmd-"))
            .collect()
    };
    // What the kill left: the command still running (no one was there to end it), and its
    // temporary directory.
    assert_eq!(
        processes(&argv),
        pids,
        "the command did not outlive its host"
    );
    assert_eq!(leftovers(&tmp).len(), 1, "{:?}", leftovers(&tmp));

    // The next start, in the same places: a run that answers at once.
    let url =
        crate::common::chat_server(|_, _| Some(("submit_output".into(), json!({"cause": "done"}))));
    let (code, err) = run_cli(&spec, &s, &url, &[], Some(&tmp));
    assert_eq!(code, Some(0), "{err}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !processes(&argv).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the dead host's command still runs"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(leftovers(&tmp).is_empty(), "{:?}", leftovers(&tmp));
    assert!(
        live_copies(&s.copies).is_empty(),
        "{:?}",
        live_copies(&s.copies)
    );
    assert_eq!(worktrees(&s.ws), 1);
}

/// `subcontract batch` over an acting spec keeps each run's changes as a patch of its own,
/// named on the run's result line, and applies none: the workspace is byte for byte as it was.
#[test]
fn a_batch_keeps_each_runs_patch_and_applies_none() {
    let s = setup(true);
    let dir = s.ws.parent().unwrap().to_path_buf();
    let spec = dir.join("fixer.toml");
    std::fs::write(&spec, fixer_toml("worktree", "")).unwrap();
    let inputs = dir.join("inputs.jsonl");
    std::fs::write(
        &inputs,
        "{\"id\": \"a\", \"input\": {}}\n{\"id\": \"b\", \"input\": {}}\n",
    )
    .unwrap();
    let before = snapshot(&s.ws);
    // Runs share the server: each request is answered by what its own conversation holds.
    let url = crate::common::chat_server(|_, body| {
        let fixed = body["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
        Some(if fixed {
            (
                "submit_output".into(),
                json!({"cause": "the loop stops one item short"}),
            )
        } else {
            let (old, new) = GOOD_EDIT;
            (
                "edit_file".into(),
                json!({"path": "inventory.py", "old": old, "new": new}),
            )
        })
    });
    let out = dir.join("results.jsonl");
    let done = Command::new(env!("CARGO_BIN_EXE_subcontract"))
        .arg("batch")
        .arg(&spec)
        .arg("--inputs")
        .arg(&inputs)
        .arg("--out")
        .arg(&out)
        .arg("--workspace")
        .arg(&s.ws)
        .args(["--model", "openai:mock", "--base-url", &url, "-q"])
        .env("OPENAI_API_KEY", "test")
        .env("SUBCONTRACT_COPIES_DIR", &s.copies)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(0), "{err}");
    assert_eq!(snapshot(&s.ws), before, "a batch applied changes");
    let lines: Vec<Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        // The first line names the batch.
        .filter(|l: &Value| l.get("batch").is_none())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    let mut patches = Vec::new();
    for line in &lines {
        assert_eq!(line["outcome"], "completed", "{line}");
        let patch = line["changes"]["patch"]
            .as_str()
            .unwrap_or_else(|| panic!("no patch: {line}"));
        let text = std::fs::read_to_string(patch).unwrap();
        assert!(text.contains("+    for i in range(len(items)):"), "{text}");
        assert!(!Path::new(patch).starts_with(&s.ws));
        patches.push(patch.to_owned());
    }
    assert_ne!(patches[0], patches[1], "each run keeps its own patch");
    assert_eq!(worktrees(&s.ws), 1);
}

/// Quiet, a run whose changes failed their checks still says where they were kept: the patch
/// is how it ended, not progress.
#[test]
fn a_quiet_failed_run_still_names_its_kept_patch() {
    let s = setup(true);
    let spec = s.ws.parent().unwrap().join("fixer.toml");
    std::fs::write(&spec, fixer_toml("worktree", "")).unwrap();
    let before = snapshot(&s.ws);
    // An edit that does not fix the test, then the same submission until the turns run out.
    let url = crate::common::chat_server(|n, _| {
        Some(if n == 0 {
            (
                "edit_file".into(),
                json!({"path": "inventory.py", "old": "t = 0", "new": "t = 0  # start"}),
            )
        } else {
            ("submit_output".into(), json!({"cause": "not found"}))
        })
    });
    let (code, err) = run_cli(&spec, &s, &url, &["-q"], None);
    assert_eq!(code, Some(1), "{err}");
    let kept = err
        .lines()
        .find_map(|l| l.split_once(", kept in ").map(|(_, p)| PathBuf::from(p)))
        .unwrap_or_else(|| panic!("no kept patch on stderr: {err}"));
    assert!(std::fs::read_to_string(&kept)
        .unwrap()
        .contains("t = 0  # start"));
    assert!(!err.contains("turn 1"), "quiet prints no progress: {err}");
    assert_eq!(snapshot(&s.ws), before);
}
