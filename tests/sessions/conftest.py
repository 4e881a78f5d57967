"""Fixtures for the session store tests: one store of each kind (redis_url is in tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
sys.path.insert(0, str(Path(__file__).parent))  # pg_sql
#: pgbouncer: the postgres store through a real PgBouncer in transaction mode (skipped where it is not installed)
STORE_KINDS = ("file", "sqlite", "redis", "postgres", "pgbouncer")


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
        if kind == "pgbouncer":  # PgBouncer 1.18 (Debian 12): no prepared statements through it
            base = request.getfixturevalue("pgbouncer_url")
            return f"{base}?schema=t_{uuid.uuid4().hex[:12]}&pgbouncer=true"
        raise ValueError(kind)

    return make


@pytest.fixture(scope="session")
def pgbouncer_url(
    postgres_server: Any, postgres_scheme: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The run's PostgreSQL server behind a PgBouncer of the run's own, ``pool_mode = transaction``, with
    the settings docs/sessions.md recommends; run as the ``postgres`` user when the tests run as root
    (PgBouncer refuses root), as the server is."""
    import shutil
    import socket
    import time
    from urllib.parse import urlsplit

    binary = shutil.which("pgbouncer") or ("/usr/sbin/pgbouncer" if os.access("/usr/sbin/pgbouncer", os.X_OK) else None)
    if binary is None:
        pytest.skip("PgBouncer is not installed, so the store is not tested through it: apt-get install pgbouncer")
    import psycopg

    folder = tmp_path_factory.mktemp("pgbouncer")
    password = urlsplit(postgres_server.url()).password
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (folder / "users.txt").write_text(f'"ctxlife" "{password}"\n')
    (folder / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"postgres = host=127.0.0.1 port={postgres_server.port} dbname={postgres_server.dbname}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = plain\nauth_file = {folder / 'users.txt'}\n"
        "pool_mode = transaction\nmax_client_conn = 400\ndefault_pool_size = 40\n"
        "server_idle_timeout = 600\nignore_startup_parameters = extra_float_digits\n"
        f"logfile = {folder / 'pgbouncer.log'}\npidfile = {folder / 'pgbouncer.pid'}\n"
    )
    args = [binary, str(folder / "pgbouncer.ini")]
    if postgres_server.user is not None:  # root: as the server's user
        for path in (folder, *folder.iterdir()):
            postgres_server.hand_over(path)
        args = ["runuser", "-u", postgres_server.user, "--", *args]
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"postgresql://ctxlife:{password}@127.0.0.1:{port}/postgres"
    deadline = time.monotonic() + 30
    while True:
        try:
            psycopg.connect(url, connect_timeout=2, prepare_threshold=None).close()
            break
        except psycopg.OperationalError:
            if proc.poll() is not None or time.monotonic() > deadline:
                log = folder / "pgbouncer.log"
                pytest.fail(f"pgbouncer did not start: {log.read_text()[-1500:] if log.exists() else proc.returncode}")
            time.sleep(0.05)
    yield url
    proc.terminate()
    proc.wait(timeout=30)


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
