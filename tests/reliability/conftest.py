"""Fixtures for the reliability suite: example counters, own redis-servers, event capture.

* ``stats`` -- records how many hypothesis examples ran and how many times each invariant was
  checked; ``stats.require(check, share)`` fails the test when fewer than ``share`` of its examples
  reached ``check``. With ``--reliability-stats`` the totals (the reach report: examples per
  invariant and per test, and each floor's reach) are printed at the end of the run, also under
  pytest-xdist (each worker sends its counts; tests/conftest.py adds them up and prints them); with
  ``RELIABILITY_STATS_JSON=PATH`` they are written to PATH (nothing is written otherwise).
* ``redis_server`` (from ``tests/conftest.py``) -- a factory for redis-servers owned by one test.
* ``events`` -- every structlog event ctxlife emits during the test (``structlog.testing.capture_logs``).

Hypothesis settings (``reliability_gen.examples``): no deadline (timing is checked separately), the
number of examples scaled by ``RELIABILITY_EXAMPLES`` (a multiplier, default 1) for longer local runs.
"""

from __future__ import annotations

import json
import sys
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
        self.floors: dict[str, float] = {}

    def require(self, check: str, share: float) -> None:
        """The test fails (at its end) unless at least ``share`` of its examples ran ``check``: a
        property whose assertion generated examples rarely reach tests little (issue 44)."""
        self.floors[check] = share
        with _STATS_LOCK:
            _STATS[self.test].setdefault("floors", {})[check] = share

    def below_floor(self) -> list[str]:
        """The checks of :meth:`require` reached by too few examples, each with its reach."""
        with _STATS_LOCK:
            row = _STATS[self.test]
            examples = row["examples"]
            per_check = row.get("examples_per_check", Counter())
        return [
            f"{check}: reached in {per_check.get(check, 0)} of {examples} examples, below the floor {share:.0%}"
            for check, share in sorted(self.floors.items())
            if examples and per_check.get(check, 0) / examples < share
        ]

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
    stats = Stats(request.node.nodeid.split("::", 1)[-1])
    yield stats
    with _STATS_LOCK:
        _STATS[stats.test]["seconds"] += time.perf_counter() - start
    if stats.floors:
        below = stats.below_floor()
        if below:
            pytest.fail("the property's assertions were rarely reached: " + "; ".join(below), pytrace=False)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Hand this process's counts to the report (tests/conftest.py prints it): under pytest-xdist each
    worker sends its own to the controller, which adds them up."""
    with _STATS_LOCK:
        rows = {
            test: {
                "examples": row["examples"],
                "seconds": row["seconds"],
                "checks": dict(row["checks"]),
                "examples_per_check": dict(row.get("examples_per_check", {})),
                "floors": dict(row.get("floors", {})),
            }
            for test, row in _STATS.items()
        }
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["ctxlife_reach"] = json.dumps(rows)
    else:
        session.config.ctxlife_reach = rows  # type: ignore[attr-defined]


# -- events -----------------------------------------------------------------------------------------


@pytest.fixture
def events() -> Iterator[list[dict[str, Any]]]:
    """Every structlog event emitted during the test, as dicts (event name under "event")."""
    from reliability_gen import captured_events

    with captured_events() as captured:
        yield captured
