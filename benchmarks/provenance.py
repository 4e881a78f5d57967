"""Which code a benchmark result measured: the commit and a hash of the product code.

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
import subprocess
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


if __name__ == "__main__":
    print(commit(), code_hash())
