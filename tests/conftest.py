"""Test-session set-up: CrewAI offline, no stray hosts between tests."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
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


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a throw-away redis-server on a free 127.0.0.1 port, killed at the end of the run."""
    from ctxlife.testing import redis_server, redis_server_binary

    if redis_server_binary() is None:
        pytest.skip(
            "redis-server is not installed, so the Redis store tests cannot run here; "
            "install it with `apt-get install redis-server` (CI's .ci/run does)"
        )
    pytest.importorskip("redis", reason="the 'redis' Python package is not installed: pip install redis")
    try:
        with redis_server(tmp_path_factory.mktemp("redis-server")) as url:
            yield url
    except RuntimeError as exc:
        pytest.fail(str(exc))


# -- the tau-bench trajectories kept in tests/data (MIT, license beside them) --------------------

TAU_BENCH = Path(__file__).resolve().parent / "data" / "tau-bench-airline-gpt4o.json.gz"


@pytest.fixture(scope="session")
def tau_bench() -> list[dict]:
    """The 200 tau-bench airline trajectories (objects with ``task_id``, ``trial``, ``traj``)."""
    with gzip.open(TAU_BENCH, "rt", encoding="utf-8") as fh:
        return json.load(fh)


# -- is the event loop ever blocked? -------------------------------------------------------------


@pytest.fixture
def run_watching_the_loop():
    """``run(main) -> (result, longest stall)``: asyncio.run(main()) beside a 20 ms heartbeat task;
    the stall is the longest gap between heartbeats, in seconds (how long the loop was blocked)."""
    import asyncio
    import time

    def run(main):
        async def watched():
            ticks: list[float] = []
            stop = asyncio.Event()

            async def heartbeat() -> None:
                while not stop.is_set():
                    ticks.append(time.perf_counter())
                    await asyncio.sleep(0.02)

            beat = asyncio.create_task(heartbeat())
            try:
                result = await main()
            finally:
                stop.set()
                await beat
            return result, max((b - a for a, b in zip(ticks, ticks[1:])), default=0.0)

        return asyncio.run(watched())

    return run
