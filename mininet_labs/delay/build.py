"""Build the C tools (``dlyfwd``, ``dlyprobe``) on first use; never committed, never rebuilt needlessly.

The binary's name carries a hash of its source and of the compiler command, so an edited source is
rebuilt and an unchanged one is not. Builds go to a temporary file renamed into place under a file
lock: two labs starting at once neither race nor see half a binary. ``scripts/bootstrap.sh`` calls
``python -m mininet_labs.delay build`` so ``make test``/``make demo`` have them ready.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUILD_DIR = HERE / "_build"
TOOLS = ("dlyfwd", "dlyprobe")
CFLAGS = ("-O2", "-Wall", "-Wextra", "-Werror")


class BuildError(RuntimeError):
    """The C compiler is missing or the source did not compile (one-line reason)."""

    user_error = True


def _binary_path(tool: str) -> Path:
    h = hashlib.sha256(" ".join(CFLAGS).encode())
    for src in (HERE / f"{tool}.c", *sorted(HERE.glob("*.h"))):
        h.update(src.read_bytes())
    digest = h.hexdigest()[:12]
    return BUILD_DIR / f"{tool}-{digest}"


def ensure_binary(tool: str, timeout: float = 120.0) -> Path:
    """The path of ``tool`` built from its current source (compiled now if it is not yet)."""
    if tool not in TOOLS:
        raise BuildError(f"unknown tool {tool!r} (have: {', '.join(TOOLS)})")
    target = _binary_path(tool)
    if target.is_file() and os.access(target, os.X_OK):
        return target
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise BuildError("no C compiler (gcc): run scripts/bootstrap.sh, which installs it")
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    lock = os.open(BUILD_DIR / ".lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_file():  # another process built it while we waited
            return target
        tmp = target.with_suffix(f".tmp{os.getpid()}")
        proc = subprocess.run([cc, *CFLAGS, "-o", str(tmp), str(HERE / f"{tool}.c")],
                              capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            first = (proc.stderr.strip().splitlines() or ["(no output)"])[0]
            raise BuildError(f"building {tool} failed: {first}")
        os.replace(tmp, target)
        for old in BUILD_DIR.glob(f"{tool}-*"):  # earlier builds of an older source
            if old != target:
                with contextlib.suppress(FileNotFoundError):
                    old.unlink()
        return target
    finally:
        os.close(lock)
