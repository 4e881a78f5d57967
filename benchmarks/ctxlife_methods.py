"""The ctxlife rows of the recall and retention benchmarks, run as the docs tell users to run them,
and the simulated clock their replays run on.

* :func:`ctxlife_settings`: ``truncate_last_n`` (default options), ``llm_summary`` (default
  options, extractive summarizer: offline), ``llm_summary+recall`` (the same plus ``recall``, over
  the raw history ``snapshot_restore`` records in a file store under ``workdir``);
* :func:`clock_at`: ``time.time()`` reads as when a recorded message was said, so recalled
  passages carry the date they were said, as in a real deployment.

Used by ``bench_recall.py`` and ``bench_retention.py``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from ctxlife.config import Settings, settings_from_dict

METHODS = ("truncate_last_n", "llm_summary", "llm_summary+recall")


def ctxlife_settings(method: str, workdir: Path, source: str = "benchmarks") -> Settings:
    """The settings of one ctxlife row (``METHODS``); ``source`` names the row in configuration errors."""
    config: dict[str, Any]
    if method == "truncate_last_n":
        config = {"strategies": ["truncate_last_n"]}
    elif method == "llm_summary":
        config = {"strategies": ["llm_summary"], "llm_summary": {"summarizer": "extractive"}}
    elif method == "llm_summary+recall":
        config = {
            "strategies": ["snapshot_restore", "llm_summary", "recall"],
            "store": f"file://{workdir}/sessions?fsync=false",
            "llm_summary": {"summarizer": "extractive"},
        }
    else:
        raise ValueError(f"unknown ctxlife method {method!r}: expected one of {', '.join(METHODS)}")
    return settings_from_dict(config, source=source)


@contextlib.contextmanager
def clock_at(when: str | float | None) -> Iterator[None]:
    """``time.time()`` reads as ``when`` (ISO date, date and time, or a timestamp), advancing in real time."""
    if when is None:
        yield
        return
    if isinstance(when, str):
        start = datetime.fromisoformat(when if "T" in when else when + "T09:00").timestamp()
    else:
        start = float(when)
    real = time.time
    t0 = time.perf_counter()
    time.time = lambda: start + (time.perf_counter() - t0)
    try:
        yield
    finally:
        time.time = real
