"""Fixtures of the model-route tests."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _fresh_hosts():
    import ctxlife.api

    yield
    ctxlife.api.clear_hosts()
