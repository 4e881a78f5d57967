"""Fixtures for the session store tests: one store of each kind (redis_url is in tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
sys.path.insert(0, str(Path(__file__).parent))  # pg_sql
STORE_KINDS = ("file", "sqlite", "redis", "postgres")


@pytest.fixture
def redis_client(redis_url: str):
    import redis

    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture(params=STORE_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_url(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], str]:
    """``make_url(kind)``: a fresh, isolated store URL of that kind for this test."""

    def make(kind: str) -> str:
        if kind == "file":
            return f"file://{tmp_path / 'root' / 'sessions'}"
        if kind == "sqlite":
            return f"sqlite:///{tmp_path / 'db' / 'sessions.db'}"
        if kind == "redis":
            base = request.getfixturevalue("redis_url")
            return f"{base}?prefix=test-{uuid.uuid4().hex[:12]}:"
        if kind == "postgres":  # a schema of the test's own in the run's server
            base = request.getfixturevalue("postgres_url")
            return f"{base}?schema=t_{uuid.uuid4().hex[:12]}"
        raise ValueError(kind)

    return make


@pytest.fixture
def store_url(store_kind: str, make_url: Callable[[str], str]) -> str:
    return make_url(store_kind)


@pytest.fixture
def store(store_url: str):
    from ctxlife.sessions import open_store

    s = open_store(store_url)
    yield s
    s.close()


def _child_env(temp_folder: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH", "")) if p)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # A temp folder of the test's own: these children are killed at any moment, and one killed while
    # Python's tempfile probes the temp folder (it writes and deletes a file with a random 8-letter
    # name) leaves that file behind, where the run's check of the system temp folder would find it.
    env["TMPDIR"] = str(temp_folder)
    return env


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """``spawn(code, *args)``: start ``python -c code args...`` that can import this checkout's
    ctxlife (stdin/stdout/stderr piped, text mode; ``TMPDIR`` under the test's ``tmp_path``).
    Children still running at teardown are killed."""
    procs: list[subprocess.Popen[str]] = []
    temp_folder = tmp_path / "children-temp"
    temp_folder.mkdir(exist_ok=True)

    def start(code: str, *args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", code, *args],
            env=_child_env(temp_folder),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
