#!/usr/bin/env python3
"""Builds every Rust block of README.md and book/src/*.md as a project of a user would: in a
crate of its own whose only dependencies are subcontract (by path), tokio and serde_json, the
three the README promises, and fails on any warning or error, from the blocks or from the
library (a library's build must print nothing in its users' builds).

The blocks are the library's doc tests too (crates/subcontract/src/lib.rs), but a doc test
sees the library's dev-dependencies (serde, schemars, validator, ...): a block that imports
one of them passes there and fails here.

Each block becomes one example of the crate target/tmp/book-blocks, made the way rustdoc
makes a doc test of it: `ignore` and `compile_fail` blocks are left out, `no_run` and
`should_panic` ones are built (none is run: `cargo test` runs them as doc tests), lines
hidden with `# ` are kept without the marker, and a block without `fn main` is wrapped in
one (returning a `Result` when it ends with `Ok(())`, as rustdoc does), under
`#![allow(unused)]`. The crate builds into the workspace's own target directory (no
RUSTFLAGS), so the dependencies the workspace has built are reused; its lock file is the
workspace's, so it builds what the workspace tests (`--fresh` resolves the newest versions a
new user would get instead).

Usage: python3 .ci/book_blocks.py [--fresh]
"""

import json
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
CRATE = ROOT / "target" / "tmp" / "book-blocks"
SOURCES = [ROOT / "README.md"] + sorted((ROOT / "book" / "src").glob("*.md"))

# The words rustdoc reads in a code block's info string; any other word (sh, toml, text)
# makes the block not Rust, unless `rust` is there too.
RUSTDOC_WORDS = {"rust", "ignore", "no_run", "should_panic", "compile_fail", "test_harness",
                 "standalone_crate"}

MANIFEST = """[package]
name = "book-blocks"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
subcontract = {{ path = "{lib}" }}
tokio = {{ version = "1", features = ["rt", "macros"] }}
serde_json = "1"

# The rig chapter's block is compiled only with the library's `rig-e2e` feature, which needs
# crates beyond these three: here it compiles to nothing, and its cfg is a known one.
[lints.rust]
unexpected_cfgs = {{ level = "warn", check-cfg = ['cfg(feature, values("rig-e2e"))'] }}

# Its own workspace, not a member of the one it sits in.
[workspace]
"""


def rust_blocks(path):
    """(first line, attributes, lines) of each fenced Rust block of the Markdown file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)(`{3,}|~{3,})\s*([^`]*)$", lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m.groups()
        close = re.compile(r"^\s*" + re.escape(fence[0]) + "{%d,}\\s*$" % len(fence))
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        words = [w for w in re.split(r"[,\s]+", info.strip()) if w]
        is_rust = not words or "rust" in words or all(
            w in RUSTDOC_WORDS or w.startswith("edition") for w in words)
        if is_rust:
            body = [l[len(indent):] if l.startswith(indent) else l.lstrip() for l in lines[i + 1:j]]
            yield i + 2, set(words), body
        i = j + 1


def shown_to_compiler(line):
    """A line as rustdoc compiles it: `# ` hides a line, which is compiled; `##` is a `#`."""
    trimmed = line.strip()
    if trimmed.startswith("##"):
        return line.replace("##", "#", 1)
    if trimmed.startswith("# "):
        return trimmed[2:]
    if trimmed == "#":
        return ""
    return line


def as_example(body):
    """The block as rustdoc makes a doc test of it: crate attributes first, then the code,
    wrapped in `fn main` unless it has one."""
    code = [shown_to_compiler(l) for l in body]
    attrs = [l for l in code if l.strip().startswith("#![")]
    rest = [l for l in code if not l.strip().startswith("#![")]
    text = "\n".join(rest)
    head = "#![allow(unused)]\n" + "\n".join(attrs) + "\n"
    if re.search(r"^\s*(pub\s+)?(async\s+)?fn\s+main\s*\(", text, re.M):
        return head + text + "\n"
    last = next((l.strip() for l in reversed(rest) if l.strip()), "")
    if last.endswith("(())"):
        return (head + "fn main() { fn _inner() -> Result<(), impl core::fmt::Debug> {\n"
                + text + "\n} _inner().unwrap() }\n")
    return head + "fn main() {\n" + text + "\n}\n"


def write_if_changed(path, text):
    """Writes `text` to `path` unless it holds it already: an unchanged block keeps its
    file's time, and cargo does not build it again."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except OSError:
        pass
    path.write_text(text, encoding="utf-8")


def main():
    fresh = "--fresh" in sys.argv[1:]
    examples = CRATE / "examples"
    examples.mkdir(parents=True, exist_ok=True)
    where = {}
    for path in SOURCES:
        stem = re.sub(r"[^a-z0-9]", "_", path.stem.lower())
        for line, words, body in rust_blocks(path):
            if words & {"ignore", "compile_fail"}:
                continue
            name = f"{stem}_{line}"
            write_if_changed(examples / f"{name}.rs", as_example(body))
            where[name] = f"{path.relative_to(ROOT)}:{line}"
    for old in examples.glob("*.rs"):
        if old.stem not in where:
            old.unlink()
    manifest = MANIFEST.format(lib=(ROOT / "crates" / "subcontract").as_posix())
    write_if_changed(CRATE / "Cargo.toml", manifest)
    (CRATE / "src").mkdir(exist_ok=True)
    write_if_changed(CRATE / "src" / "lib.rs", "//! The README's and the book's Rust blocks.\n")
    lock = CRATE / "Cargo.lock"
    if fresh:
        lock.unlink(missing_ok=True)
    else:
        write_if_changed(lock, (ROOT / "Cargo.lock").read_text(encoding="utf-8"))
    env = {k: v for k, v in os.environ.items()
           if k not in ("RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_RUSTFLAGS")}
    env["CARGO_TARGET_DIR"] = str(ROOT / "target")
    build = subprocess.run(
        ["cargo", "build", "--quiet", "--examples", "--message-format=json"],
        cwd=CRATE, env=env, stdout=subprocess.PIPE, text=True)
    problems = []
    for line in build.stdout.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("reason") != "compiler-message":
            continue
        diag = msg["message"]
        if diag["level"] not in ("warning", "error") or diag["message"].startswith(
                ("aborting due to", "Some errors have")):
            continue
        target = msg.get("target", {}).get("name", "")
        origin = where.get(target, target)
        problems.append(f"{origin}: {diag['rendered'] or diag['message']}")
    for p in problems:
        print(p, file=sys.stderr)
    if problems or build.returncode != 0:
        print(f"book blocks: {len(problems)} warning(s) or error(s) in {len(where)} block(s)"
              " built with only subcontract, tokio and serde_json", file=sys.stderr)
        return 1
    print(f"book blocks: {len(where)} block(s) build with only subcontract, tokio and "
          "serde_json, without a warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
