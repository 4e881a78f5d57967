"""``os.fsync`` watched by a test: the paths it is called on, the real fsync still run."""

from __future__ import annotations

import os

import pytest


def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths ``os.fsync`` is called on from now on (the calls still happen)."""
    synced: list[str] = []
    real = os.fsync

    def spy(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return synced
