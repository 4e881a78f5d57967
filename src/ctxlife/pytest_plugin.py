"""Pytest fixtures for strategy authors, loaded automatically where ctxlife is installed
(through the ``pytest11`` entry point; disable with ``-p no:ctxlife``).

Fixtures:

* ``make_host`` — ``make_host(strategies=[...], options={name: {...}}, context_window=8000,
  plugins=(), **settings)`` builds a fresh :class:`ctxlife.Host` (its own plugin manager)
  with validated settings; hosts are closed after the test.
* ``install_strategy`` — ``install_strategy(MyStrategy)`` makes a strategy class findable
  by name in configs for this test only (as if its package were installed).
* ``hook_recorder`` — a :class:`ctxlife.testing.HookRecorder` to pass in ``plugins=``.
* ``scripted_llm`` — the factory :func:`ctxlife.testing.scripted_llm` (an offline CrewAI
  LLM that replies from a script and records what it receives).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from typing import Any

import pytest

from ctxlife import testing


@pytest.fixture
def make_host() -> Iterator[Callable[..., Any]]:
    # lazy: pytest loads this plugin in every run; the host loads only for a test that uses the fixture
    from ctxlife.config import settings_from_dict
    from ctxlife.host import Host

    hosts: list[Host] = []

    def make(
        strategies: Sequence[str] = (),
        options: dict[str, dict[str, Any]] | None = None,
        *,
        context_window: int = 8000,
        plugins: Sequence[object] = (),
        session_id: str | None = None,
        model: str | None = None,
        **settings: Any,
    ) -> Host:
        data = {"strategies": list(strategies), **(options or {}), **settings}
        host = Host(
            settings_from_dict(data, source="make_host"),
            context_window=context_window,
            plugins=plugins,
            session_id=session_id,
            model=model,
        )
        hosts.append(host)
        return host

    yield make
    for host in hosts:
        host.close()


@pytest.fixture
def install_strategy() -> Iterator[Callable[[type], type]]:
    with ExitStack() as stack:
        yield lambda cls: stack.enter_context(testing.installed_strategy(cls))


@pytest.fixture
def hook_recorder() -> testing.HookRecorder:
    return testing.HookRecorder()


@pytest.fixture
def scripted_llm() -> Callable[..., Any]:
    testing.offline_environment()
    return testing.scripted_llm
