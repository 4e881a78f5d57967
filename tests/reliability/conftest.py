"""Fixtures for the reliability suite: example counters, own redis-servers, event capture.

* ``stats`` -- records how many hypothesis examples ran and how many times each invariant was
  checked; ``stats.require(check, share)`` fails the test when fewer than ``share`` of its examples
  reached ``check``. With ``--reliability-stats`` the totals (the reach report: examples per
  invariant and per test) are printed at the end of the run; with ``RELIABILITY_STATS_JSON=PATH``
  they are written to PATH (nothing is written otherwise).
* ``redis_server`` (from ``tests/conftest.py``) -- a factory for redis-servers owned by one test.
* ``events`` -- every structlog event ctxlife emits during the test (``structlog.testing.capture_logs``).

Hypothesis settings (``reliability_gen.examples``): no deadline (timing is checked separately), the
number of examples scaled by ``RELIABILITY_EXAMPLES`` (a multiplier, default 1) for longer local runs.
"""

from __future__ import annotations

import json
import os
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


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    target = os.environ.get("RELIABILITY_STATS_JSON")
    show = config.getoption("--reliability-stats", default=False)
    if not _STATS or not (target or show):
        return
    per_invariant: dict[str, dict[str, int]] = defaultdict(lambda: {"examples": 0, "checks": 0})
    for row in _STATS.values():
        for name, n in row["checks"].items():
            per_invariant[name]["checks"] += n
            per_invariant[name]["examples"] += row.get("examples_per_check", {}).get(name, 0)
    if target:
        out = {
            "tests": {
                k: {"examples": v["examples"], "seconds": round(v["seconds"], 2), "checks": dict(v["checks"])}
                for k, v in sorted(_STATS.items())
            },
            "invariants": dict(sorted(per_invariant.items())),
        }
        Path(target).write_text(json.dumps(out, indent=2, sort_keys=True), encoding="utf-8")
    if not show:
        return
    tr = terminalreporter
    tr.section("ctxlife reliability: hypothesis examples per invariant")
    tr.write_line(f"{'invariant':<28}{'examples':>10}{'checks':>10}")
    for name, row in sorted(per_invariant.items()):
        tr.write_line(f"{name:<28}{row['examples']:>10}{row['checks']:>10}")
    tr.write_line(f"{'test':<70}{'examples':>10}{'seconds':>9}")
    for name, row in sorted(_STATS.items()):
        tr.write_line(f"{name[:70]:<70}{row['examples']:>10}{row['seconds']:>9.1f}")
    floored = [(name, row) for name, row in sorted(_STATS.items()) if row.get("floors")]
    if floored:
        tr.write_line(f"{'reach: test / check':<70}{'reached':>10}{'floor':>9}")
        for name, row in floored:
            for check, share in sorted(row["floors"].items()):
                reached = row.get("examples_per_check", Counter()).get(check, 0)
                tr.write_line(f"{(name + ' / ' + check)[:70]:<70}{reached:>5}/{row['examples']:<4}{share:>9.0%}")
    if target:
        tr.write_line(f"written to {target}")


# -- events -----------------------------------------------------------------------------------------


@pytest.fixture
def events() -> Iterator[list[dict[str, Any]]]:
    """Every structlog event emitted during the test, as dicts (event name under "event")."""
    from reliability_gen import captured_events

    with captured_events() as captured:
        yield captured
