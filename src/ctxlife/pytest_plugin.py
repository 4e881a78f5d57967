"""Pytest fixtures for strategy authors, loaded automatically where ctxlife is installed
(through the ``pytest11`` entry point; disable with ``-p no:ctxlife``).

The fixtures (``make_host``, ``install_strategy``, ``hook_recorder``, ``scripted_llm``) and how to use
them: docs/writing-a-strategy.md.
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
