"""Test-session set-up: CrewAI offline, no stray hosts between tests."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator

# Before anything imports crewai: no telemetry, tracing or version check (no network here).
from ctxlife.testing import OFFLINE_ENV

for _key, _value in OFFLINE_ENV.items():
    os.environ[_key] = _value

import pytest  # noqa: E402

# The strategy-author kit's fixtures (ctxlife.pytest_plugin) load through ctxlife's pytest11
# entry point; the first-party tests use them like any plugin author would.


@pytest.fixture(autouse=True)
def _fresh_manage_hosts():
    """``ctxlife.manage`` caches hosts per config; tests must not share them."""
    from ctxlife.api import clear_hosts

    clear_hosts()
    yield
    clear_hosts()


@pytest.fixture(autouse=True)
def _no_ctxlife_env(monkeypatch):
    """A developer's CTXLIFE_* variables must not leak into tests."""
    for key in list(os.environ):
        if key.startswith("CTXLIFE_"):
            monkeypatch.delenv(key)


# -- a real redis-server for the Redis store tests ---------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _redis_binary() -> str | None:
    found = shutil.which("redis-server")
    if found:
        return found
    return "/usr/bin/redis-server" if os.access("/usr/bin/redis-server", os.X_OK) else None


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a throw-away redis-server on a free 127.0.0.1 port, killed at the end of the run."""
    binary = _redis_binary()
    if binary is None:
        pytest.skip(
            "redis-server is not installed, so the Redis store tests cannot run here; "
            "install it with `apt-get install redis-server` (CI's .ci/run does)"
        )
    try:
        import redis
    except ImportError:
        pytest.skip("the 'redis' Python package is not installed: pip install redis")
    workdir = tmp_path_factory.mktemp("redis-server")
    last_error = ""
    for _attempt in range(3):  # the free port can be taken between probing and binding
        port = _free_port()
        log_file = workdir / f"redis-{port}.log"
        proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(workdir),
                "--logfile",
                str(log_file),
                "--daemonize",
                "no",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)
        deadline = time.monotonic() + 10
        ready = False
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                ready = bool(client.ping())
                break
            except redis.RedisError:
                time.sleep(0.02)
        client.close()
        if ready:
            try:
                yield f"redis://127.0.0.1:{port}/0"
            finally:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            return
        proc.kill()
        proc.wait()
        last_error = log_file.read_text(errors="replace")[-2000:] if log_file.exists() else ""
    pytest.fail(f"redis-server did not answer PING on a free port after 3 tries; log:\n{last_error}")


