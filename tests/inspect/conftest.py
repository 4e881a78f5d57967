"""Fixtures for the inspection tests: a store of each kind (Redis: the run's real redis-server) and a
session recorded on it through ctxlife.Session."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # inspect_sessions

from inspect_sessions import STORE_KINDS, build_session, config_data  # noqa: E402


@pytest.fixture(params=STORE_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_url(request: pytest.FixtureRequest, store_kind: str, tmp_path: Path) -> str:
    if store_kind == "file":
        return f"file://{tmp_path / 'store' / 'sessions'}"
    if store_kind == "sqlite":
        return f"sqlite:///{tmp_path / 'db' / 'sessions.db'}"
    base = request.getfixturevalue("redis_url")
    return f"{base}?prefix=inspect-{uuid.uuid4().hex[:12]}:"


@pytest.fixture
def config_file(store_url: str, tmp_path: Path) -> Path:
    """The test config as a TOML file (for the command line)."""
    lines = []
    tables = {}
    for key, value in config_data(store_url).items():
        if isinstance(value, dict):
            tables[key] = value
        else:
            lines.append(f"{key} = {json.dumps(value)}")
    for name, table in tables.items():
        lines.append(f"\n[{name}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in table.items()]
    path = tmp_path / "ctxlife.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def stored(store_url: str) -> dict[str, Any]:
    return build_session(store_url)


@pytest.fixture
def store(store_url: str) -> Iterator[Any]:
    from ctxlife.sessions import open_store

    s = open_store(store_url)
    yield s
    s.close()
