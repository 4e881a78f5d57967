"""The file store outside the core's mutation scope (scope `stores-file`, docs/mutation/stores-file.md): what
its files hold after an append, an erase, a delete, a crash mid-write; what a read returns; the error a user
sees. Each test was written for a mutant the store's other tests let survive."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxlife.errors import StoreError
from ctxlife.sessions.file import FileStore


def test_a_url_without_a_path_or_of_another_scheme_is_refused_naming_the_fix(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="has no path; use file://workspace/sessions"):
        FileStore.from_url("file://?fsync=false")
    with pytest.raises(StoreError, match=r"not a file store URL: 'sqlite:///x' \(expected file://PATH\)"):
        FileStore.from_url("sqlite:///x")
    store = FileStore.from_url(f"FILE://{tmp_path}/s%20p?fsync=false&ttl=60")
    assert (store.directory, store.fsync, store.ttl) == (tmp_path / "s p", False, 60)
