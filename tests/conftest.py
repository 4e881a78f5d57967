"""Test-session set-up: CrewAI offline, no stray hosts between tests."""

from __future__ import annotations

import os

# Before anything imports crewai: no telemetry, tracing or version check (no network here).
from ctxlife.testing import OFFLINE_ENV

for _key, _value in OFFLINE_ENV.items():
    os.environ[_key] = _value

import pytest  # noqa: E402


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
