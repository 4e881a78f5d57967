"""Fixtures for the reliability suite: example counters, own redis-servers, event capture.

* ``stats`` -- records how many hypothesis examples ran and how many times each invariant was
  checked. The totals are printed at the end of the run and written to
  ``$TMPDIR/ctxlife-reliability-stats.json`` (override with ``RELIABILITY_STATS_JSON``).
* ``redis_server`` -- a factory for redis-servers owned by one test (so the test may kill,
  restart, password-protect or TLS-enable them), on free 127.0.0.1 ports, killed at teardown.
* ``events`` -- every structlog event ctxlife emits during the test (``structlog.testing.capture_logs``).

Hypothesis settings (``reliability_gen.examples``): no deadline (timing is checked separately), the
number of examples scaled by ``RELIABILITY_EXAMPLES`` (a multiplier, default 1) for longer local runs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # reliability_gen


# -- statistics -------------------------------------------------------------------------------------

_STATS: dict[str, dict[str, Any]] = defaultdict(lambda: {"examples": 0, "checks": Counter(), "seconds": 0.0})
_STATS_LOCK = threading.Lock()


class Stats:
    def __init__(self, test: str) -> None:
        self.test = test

    def example(self, checks: Counter | dict[str, int] | None = None) -> None:
        """One hypothesis example finished; ``checks``: invariant name -> times checked in it."""
        with _STATS_LOCK:
            row = _STATS[self.test]
            row["examples"] += 1
            for name, n in (checks or {}).items():
                row["checks"][name] += n
                row.setdefault("examples_per_check", Counter())[name] += 1 if n else 0


@pytest.fixture
def stats(request: pytest.FixtureRequest) -> Iterator[Stats]:
    start = time.perf_counter()
    yield Stats(request.node.nodeid.split("::", 1)[-1])
    with _STATS_LOCK:
        _STATS[request.node.nodeid.split("::", 1)[-1]]["seconds"] += time.perf_counter() - start


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _STATS:
        return
    per_invariant: dict[str, dict[str, int]] = defaultdict(lambda: {"examples": 0, "checks": 0})
    for row in _STATS.values():
        for name, n in row["checks"].items():
            per_invariant[name]["checks"] += n
            per_invariant[name]["examples"] += row.get("examples_per_check", {}).get(name, 0)
    out = {
        "tests": {
            k: {"examples": v["examples"], "seconds": round(v["seconds"], 2), "checks": dict(v["checks"])}
            for k, v in sorted(_STATS.items())
        },
        "invariants": dict(sorted(per_invariant.items())),
    }
    path = Path(
        os.environ.get("RELIABILITY_STATS_JSON", Path(tempfile.gettempdir()) / "ctxlife-reliability-stats.json")
    )
    try:
        path.write_text(json.dumps(out, indent=2, sort_keys=True), encoding="utf-8")
    except OSError:
        pass
    tr = terminalreporter
    tr.section("ctxlife reliability: hypothesis examples per invariant")
    tr.write_line(f"{'invariant':<28}{'examples':>10}{'checks':>10}")
    for name, row in sorted(per_invariant.items()):
        tr.write_line(f"{name:<28}{row['examples']:>10}{row['checks']:>10}")
    tr.write_line(f"{'test':<70}{'examples':>10}{'seconds':>9}")
    for name, row in sorted(_STATS.items()):
        tr.write_line(f"{name[:70]:<70}{row['examples']:>10}{row['seconds']:>9.1f}")
    tr.write_line(f"written to {path}")


# -- events -----------------------------------------------------------------------------------------


@pytest.fixture
def events() -> Iterator[list[dict[str, Any]]]:
    """Every structlog event emitted during the test, as dicts (event name under "event")."""
    from reliability_gen import captured_events

    with captured_events() as captured:
        yield captured


# -- redis servers owned by one test ----------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def redis_binary() -> str | None:
    return shutil.which("redis-server") or (
        "/usr/bin/redis-server" if os.access("/usr/bin/redis-server", os.X_OK) else None
    )


class RedisServer:
    """One redis-server process this test controls: ``start()``, ``kill()`` (SIGKILL), ``restart()``.

    Persistence is AOF with ``appendfsync always`` in the server's own folder, so a killed server
    restarted on the same folder has every acknowledged write (what "nothing stored is lost"
    means for Redis: its durability is Redis's own).
    """

    def __init__(self, workdir: Path, extra: list[str]) -> None:
        self.workdir = workdir
        self.extra = extra
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = workdir / "redis.log"

    @property
    def tls(self) -> bool:
        return "--tls-port" in self.extra

    def args(self) -> list[str]:
        base = [
            redis_binary() or "redis-server",
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.workdir),
            "--logfile",
            str(self.log),
        ]
        base += ["--save", "", "--appendonly", "yes", "--appendfsync", "always", "--daemonize", "no"]
        if self.tls:
            base += ["--port", "0", "--tls-port", str(self.port)]
            extra = [
                a
                for i, a in enumerate(self.extra)
                if a != "--tls-port" and (i == 0 or self.extra[i - 1] != "--tls-port")
            ]
        else:
            base += ["--port", str(self.port)]
            extra = self.extra
        return base + extra

    def start(self, timeout: float = 10.0) -> None:
        offset = self.log.stat().st_size if self.log.exists() else 0
        self.proc = subprocess.Popen(
            self.args(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                raise RuntimeError(
                    f"redis-server exited with {self.proc.returncode}: {err[-800:]} {self._log_tail(offset)}"
                )
            if "Ready to accept connections" in self._log_tail(offset):
                return
            time.sleep(0.02)
        raise RuntimeError(f"redis-server not ready within {timeout} s: {self._log_tail(offset)}")

    def _log_tail(self, offset: int) -> str:
        try:
            with open(self.log, "rb") as f:
                f.seek(offset)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL: no shutdown, no final save (AOF with fsync always keeps acknowledged writes)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def restart(self) -> None:
        self.kill()
        self.start()

    def stop(self) -> None:
        self.kill()
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.stderr.close()

    def url(self, password: str | None = None, db: int = 0, query: str = "") -> str:
        auth = f":{password}@" if password else ""
        scheme = "rediss" if self.tls else "redis"
        return f"{scheme}://{auth}127.0.0.1:{self.port}/{db}" + (f"?{query}" if query else "")


@pytest.fixture
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """``redis_server(*extra_args)`` starts a redis-server owned by this test and returns it."""
    if redis_binary() is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server; .ci/run installs it)")
    pytest.importorskip("redis", reason="the 'redis' Python package is not installed")
    servers: list[RedisServer] = []

    def start(*extra: str) -> RedisServer:
        server = RedisServer(tmp_path_factory.mktemp("own-redis"), list(extra))
        servers.append(server)
        server.start()
        return server

    yield start
    for server in servers:
        server.stop()
