"""The file store outside the core's mutation scope (scope `stores-file`, docs/mutation/stores-file.md): what
its files hold after an append, an erase, a delete, a crash mid-write; what a read returns; the error a user
sees. Each test was written for a mutant the store's other tests let survive."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from ctxlife.errors import SessionIdError, StoreError
from ctxlife.sessions.file import FileStore
from ctxlife.sessions.file_io import link_new
from ctxlife.sessions.records import REMOVE, Event
from ctxlife.sessions.snapshot import Snapshot
from fsync_spy import fsyncs


def test_a_url_without_a_path_or_of_another_scheme_is_refused_naming_the_fix(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="has no path; use file://workspace/sessions"):
        FileStore.from_url("file://?fsync=false")
    with pytest.raises(StoreError, match=r"not a file store URL: 'sqlite:///x' \(expected file://PATH\)"):
        FileStore.from_url("sqlite:///x")
    store = FileStore.from_url(f"FILE://{tmp_path}/s%20p?fsync=false&ttl=60")
    assert (store.directory, store.fsync, store.ttl) == (tmp_path / "s p", False, 60)
    assert store.url == f"file://{tmp_path}/s p"
    plain = FileStore.from_url(f"file://{tmp_path}/plain")
    assert (plain.directory, plain.fsync, plain.ttl) == (tmp_path / "plain", True, None)
    assert FileStore.from_url(f"file://{tmp_path}/t?fsync=true").fsync is True
    with pytest.raises(StoreError, match=r"unknown option 'sync' \(known options: fsync, ttl\)"):
        FileStore.from_url(f"file://{tmp_path}/x?sync=false")
    with pytest.raises(
        StoreError, match=rf"^store URL 'file://{tmp_path}/x\?fsync=maybe': option fsync='maybe' must be"
    ):
        FileStore.from_url(f"file://{tmp_path}/x?fsync=maybe")  # the URL as given


def test_a_relative_or_home_path_is_made_absolute_when_the_store_is_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert FileStore("~/sessions").directory == tmp_path / "home" / "sessions"
    store = FileStore.from_url("file://work/../sessions")
    assert (store.directory, store.url) == (tmp_path / "sessions", f"file://{tmp_path / 'sessions'}")


def _store(tmp_path: Path, **options: Any) -> FileStore:
    return FileStore(tmp_path / "sessions", fsync=False, **options)


def _snap(session_id: str, view: str = "", updated_at: float = 100.0) -> Snapshot:
    return Snapshot(
        session_id=session_id,
        view=view,
        messages=[{"role": "user", "content": "hi"}],
        raw_length=0,
        updated_at=updated_at,
    )


def _age(path: Path, seconds: float) -> None:
    """Set ``path``'s modification time ``seconds`` in the past (the file store's clock of a session)."""
    then = time.time() - seconds
    os.utime(path, (then, then), follow_symlinks=False)


# -- listing -------------------------------------------------------------------------------------


def test_a_session_with_only_a_views_snapshot_is_listed_with_that_snapshots_time(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.save_snapshot(_snap("lane", view="agent-1", updated_at=123.5))
    store.save_snapshot(_snap("lane", view="agent-2", updated_at=99.0))
    infos = store.list_sessions()
    assert [(i.session_id, i.message_count, i.updated_at) for i in infos] == [("lane", 0, 123.5)]
    assert store.load_snapshot("lane", "agent-1") is not None


def test_a_listing_names_no_foreign_json_file_nor_a_symlink_named_like_a_session(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.append("real", [{"n": 1}])
    folder = tmp_path / "sessions"
    (folder / "settings.json").write_text("{}")
    outside = tmp_path / "outside.jsonl"
    outside.write_text("")
    (folder / "planted_raw.jsonl").symlink_to(outside)
    (folder / "other_ctx@v.json").symlink_to(outside)
    assert [i.session_id for i in store.list_sessions()] == ["real"]


def test_a_listing_says_when_each_session_was_last_written_and_skips_only_the_expired_ones(tmp_path: Path) -> None:
    store = _store(tmp_path, ttl=3600)
    for sid in ("a-old", "b-new", "c-new"):
        store.append(sid, [{"n": 1}])
    _age(tmp_path / "sessions" / "a-old_raw.jsonl", 7200)
    _age(tmp_path / "sessions" / "c-new_raw.jsonl", 60)
    infos = store.list_sessions()
    assert [i.session_id for i in infos] == ["b-new", "c-new"]
    assert infos[1].last_active == os.stat(tmp_path / "sessions" / "c-new_raw.jsonl").st_mtime
    assert not (tmp_path / "sessions" / "a-old_raw.jsonl").exists()  # the listing deleted the expired one


def test_an_unreadable_snapshot_in_a_listing_is_a_warning_naming_the_session_the_view_and_the_error(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    store.save_snapshot(_snap("good", view="v", updated_at=5.0))
    (tmp_path / "sessions" / "bad_ctx@v.json").write_text("{not json")
    with capture_logs() as logs:
        infos = store.list_sessions()
    assert [(i.session_id, i.updated_at) for i in infos] == [("bad", None), ("good", 5.0)]
    (event,) = logs
    assert {k: v for k, v in event.items() if k != "error"} == {
        "event": "snapshot_unreadable",
        "log_level": "warning",
        "store": "file",
        "session_id": "bad",
        "view": "v",
    }
    assert "bad_ctx@v.json" in event["error"]


# -- expiry --------------------------------------------------------------------------------------


def test_a_session_of_only_snapshots_expires_by_their_time(tmp_path: Path) -> None:
    store = _store(tmp_path, ttl=3600)
    store.save_snapshot(_snap("old"))  # with a ttl a snapshot write marks the session active: a raw file
    (tmp_path / "sessions" / "old_raw.jsonl").unlink()
    _age(tmp_path / "sessions" / "old_ctx.json", 7200)
    store.save_snapshot(_snap("new"))
    (tmp_path / "sessions" / "new_raw.jsonl").unlink()
    assert store.load_snapshot("old") is None
    assert store.load_snapshot("new") is not None


# -- delete --------------------------------------------------------------------------------------


def test_deleting_a_session_of_only_records_or_only_derived_data_says_it_existed(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.append("raw-only", [{"n": 1}])
    assert store.delete("raw-only") is True
    assert os.listdir(tmp_path / "sessions") == []
    derived = store.derived_dir("index-only")
    assert derived is not None
    (derived / "deep").mkdir(parents=True)
    (derived / "deep" / "index.db").write_text("x")
    assert store.delete("index-only") is True
    assert not derived.exists()
    assert store.delete("index-only") is False


def test_delete_removes_the_temporary_files_a_crashed_write_left(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.append("s", [{"n": 1}])
    folder = tmp_path / "sessions"
    left = [".s_raw.jsonl.abc.tmp", ".s_ctx.json.def.tmp", ".s_ctx@agent.json.ghi.tmp"]
    for name in left:
        (folder / name).write_text("secret")
    (folder / ".other_ctx.json.jkl.tmp").write_text("another session's")
    assert store.delete("s") is True
    assert sorted(os.listdir(folder)) == [".other_ctx.json.jkl.tmp"]


def test_delete_leaves_a_held_lock_file_and_a_failure_names_the_session_and_the_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path)
    store.append("s", [{"n": 1}])
    with store.lock("s"):
        assert store.delete("s") is True
        assert (tmp_path / "sessions" / "s.lock").exists()  # its holder still has it
    store.put_blob("t", "k", "v")

    def refused(path: Any, *args: Any, **kwargs: Any) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(shutil, "rmtree", refused)
    with pytest.raises(StoreError, match=rf"^cannot delete session 't' in {tmp_path / 'sessions'}: Permission denied$"):
        store.delete("t")


def test_delete_refuses_a_planted_symlink_for_the_raw_history_or_the_lock_naming_the_file(tmp_path: Path) -> None:
    store = _store(tmp_path)
    folder = tmp_path / "sessions"
    store.append("real", [{"n": 1}])
    outside = tmp_path / "outside"
    outside.write_text("keep")
    (folder / "evil_raw.jsonl").symlink_to(outside)
    with pytest.raises(StoreError, match=rf"^cannot delete {folder / 'evil_raw.jsonl'}: "):
        store.delete("evil")
    (folder / "evil_raw.jsonl").unlink()
    (folder / "evil.lock").symlink_to(outside)
    with pytest.raises(StoreError, match=r"^cannot delete session 'evil'"):
        store.delete("evil")
    assert outside.read_text() == "keep"


def test_a_stores_own_reader_numbers_call_records_after_the_stores(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert store.append_call("s", "", {"n": 1}) == 1
    reader = store.own_reader()
    assert reader.append_call("s", "", {"n": 2}) == 2
    assert store.append_call("s", "", {"n": 3}) == 3
    assert [c.doc for c in reader.read_calls("s")] == [{"n": 1}, {"n": 2}, {"n": 3}]


# -- erase's rewrite -------------------------------------------------------------------------------


def test_an_erase_cuts_a_torn_last_line_and_drops_only_its_own_temporary_copies(tmp_path: Path) -> None:
    """An erase of a message already removed appends nothing: its rewrite itself repairs the torn end (the
    warning names the session), drops a killed erase's copy of the raw history, and leaves a snapshot's
    temporary file alone (another process may be saving it now)."""
    store = _store(tmp_path)
    folder = tmp_path / "sessions"
    store.append("s", [{"role": "user", "content": "my card 4111"}, {"role": "user", "content": "fine"}])
    store.append_events("s", [Event(REMOVE, {}, target=1)])
    with (folder / "s_raw.jsonl").open("ab") as raw:
        raw.write(b'{"seq": 4, "vi')  # a crash mid-write
    (folder / ".s_raw.jsonl.old.tmp").write_text("a killed erase's copy: my card 4111")
    (folder / ".s_ctx.json.new.tmp").write_text("a snapshot being saved")
    with capture_logs() as logs:
        assert store.erase("s", [1]) == [1]
    assert [(e["event"], e["session_id"], e["file"]) for e in logs if e["event"] == "raw_torn_record_repaired"] == [
        ("raw_torn_record_repaired", "s", "s_raw.jsonl")
    ]
    data = (folder / "s_raw.jsonl").read_bytes()
    assert b"4111" not in data and data.endswith(b"}\n")
    assert [r.seq for r in store.read_records("s")] == [1, 2, 3]
    assert not (folder / ".s_raw.jsonl.old.tmp").exists()
    assert (folder / ".s_ctx.json.new.tmp").read_text() == "a snapshot being saved"


def test_an_erase_scrubs_a_call_record_and_keeps_each_records_view_and_number(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.append_call("s", "planner", {"t": {"x": {"role": "user", "content": "hello"}}})
    store.append_call("s", "coder", {"t": {"y": {"role": "user", "content": "the code is 4242"}}})
    FileStore(tmp_path / "sessions").erase_matching("s", "4242")  # a process that never appended a call
    calls = store.read_calls("s")
    assert [(c.n, c.view) for c in calls] == [(1, "planner"), (2, "coder")]
    assert calls[0].doc == {"t": {"x": {"role": "user", "content": "hello"}}}
    assert "4242" not in (tmp_path / "sessions" / "s_calls.jsonl").read_text()
    assert store.append_call("s", "coder", {"n": 3}) == 3


# -- call records ----------------------------------------------------------------------------------


def test_an_expired_sessions_call_records_read_as_none(tmp_path: Path) -> None:
    store = _store(tmp_path, ttl=3600)
    store.append_call("old", "", {"n": 1})
    _age(tmp_path / "sessions" / "old_raw.jsonl", 7200)  # with a ttl a call record marks the session active
    store.append_call("new", "", {"n": 1})
    assert store.read_calls("old") == []
    assert [c.doc for c in store.read_calls("new")] == [{"n": 1}]


def test_an_unreadable_call_record_is_skipped_with_an_event_naming_the_session(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.append_call("s", "", {"n": 1})
    with (tmp_path / "sessions" / "s_calls.jsonl").open("a") as calls:
        calls.write('{"view": "", "do\n')
    store.append_call("s", "", {"n": 3})
    with capture_logs() as logs:
        assert [(c.n, c.doc) for c in store.read_calls("s")] == [(1, {"n": 1}), (3, {"n": 3})]
    assert [(e["event"], e["session_id"], e["call"]) for e in logs] == [("ctxlife.call_record_skipped", "s", 2)]


# -- the session lock ------------------------------------------------------------------------------


def test_a_lock_file_that_is_a_symlink_is_refused_naming_it(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.append("s", [{"n": 1}])
    outside = tmp_path / "outside"
    outside.write_text("keep")
    (tmp_path / "sessions" / "s.lock").symlink_to(outside)
    path = tmp_path / "sessions" / "s.lock"
    with pytest.raises(StoreError, match=rf"^cannot lock {path}: it is a symbolic link \(refusing to follow it\)$"):
        with store.lock("s"):
            pass
    assert outside.read_text() == "keep"


def test_a_lock_without_a_timeout_waits_for_the_holder(tmp_path: Path) -> None:
    store = _store(tmp_path)
    got: list[str] = []

    def second() -> None:
        try:
            with store.lock("s", timeout=None):
                got.append("held")
        except Exception as exc:  # the test fails below naming it
            got.append(repr(exc))

    with store.lock("s"):
        waiter = threading.Thread(target=second)
        waiter.start()
        waiter.join(1.5)  # the waiter is still waiting: it gives up only if told a timeout
        assert got == []
    waiter.join(30)
    assert got == ["held"]


# -- the folder, snapshots, blobs, the mark key ----------------------------------------------------------


def test_a_folder_that_cannot_be_made_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(StoreError, match=rf"^session folder {tmp_path / 'a-file'} exists but is not a directory$"):
        FileStore(tmp_path / "a-file").append("s", [{"n": 1}])
    below = tmp_path / "a-file" / "sessions"
    with pytest.raises(StoreError, match=rf"^cannot create session folder {below}: Not a directory$"):
        FileStore(below).save_snapshot(_snap("s"))
    deep = FileStore(tmp_path / "one" / "two" / "three")
    deep.put_blob("s", "k", "v")
    for folder in (tmp_path / "one", tmp_path / "one" / "two", tmp_path / "one" / "two" / "three"):
        assert folder.stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "one" / "two" / "three" / "s_blobs").stat().st_mode & 0o777 == 0o700


def test_a_views_snapshot_has_its_own_file_and_without_a_ttl_a_snapshot_writes_nothing_else(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.save_snapshot(_snap("s", view="agent-1", updated_at=1.0))
    store.save_snapshot(_snap("s", updated_at=2.0))
    assert sorted(os.listdir(tmp_path / "sessions")) == ["s_ctx.json", "s_ctx@agent-1.json"]
    assert json.loads((tmp_path / "sessions" / "s_ctx@agent-1.json").read_text())["updated_at"] == 1.0
    assert store.load_snapshot("s", "agent-1").updated_at == 1.0  # type: ignore[union-attr]
    assert store.load_snapshot("s", "agent-2") is None


def test_with_a_ttl_every_write_marks_the_session_active(tmp_path: Path) -> None:
    store = _store(tmp_path, ttl=3600)
    raw = tmp_path / "sessions" / "s_raw.jsonl"
    store.save_snapshot(_snap("s"))
    assert raw.read_bytes() == b""  # the session's clock, not a record
    for write in (
        lambda: store.save_snapshot(_snap("s")),
        lambda: store.put_blob("s", "k", "v"),
        lambda: store.append_call("s", "", {"n": 1}),
    ):
        _age(raw, 1800)
        write()
        assert time.time() - raw.stat().st_mtime < 600
    assert raw.stat().st_mode & 0o777 == 0o600
    assert store.read_records("s") == []


def test_a_write_to_an_expired_session_starts_it_over_and_says_so(tmp_path: Path) -> None:
    store = _store(tmp_path, ttl=3600)
    store.append("s", [{"n": 1}])
    store.put_blob("s", "k", "old")
    store.save_snapshot(_snap("s"))
    _age(tmp_path / "sessions" / "s_raw.jsonl", 7200)
    assert store.get_blob("s", "k") is None
    assert store.load_snapshot("s") is None
    assert store.read_records("s") == []
    assert store.head("s") == 0
    with capture_logs() as logs:
        store.put_blob("s", "other", "new")
    assert logs == [
        {"event": "session_expired", "log_level": "info", "store": "file", "session_id": "s", "ttl_seconds": 3600}
    ]
    assert store.get_blob("s", "k") is None
    assert store.get_blob("s", "other") == "new"
    assert sorted(os.listdir(tmp_path / "sessions")) == ["s_blobs", "s_raw.jsonl"]


def test_a_blob_that_is_not_utf8_is_an_error_naming_it(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.put_blob("s", "k", "fine")
    path = tmp_path / "sessions" / "s_blobs" / "k"
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(StoreError, match=rf"^cannot read blob {path}: 'utf-8' codec can't decode"):
        store.get_blob("s", "k")
    path.unlink()
    path.mkdir()
    with pytest.raises(StoreError, match=rf"^cannot read blob {path}: "):
        store.get_blob("s", "k")


def test_the_mark_key_is_made_once_kept_private_and_a_damaged_one_is_named(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert store.mark_key() is None
    assert not (tmp_path / "sessions").exists()  # reading never creates it
    key = store.mark_key(create=True)
    assert key is not None and len(key) == 32
    path = tmp_path / "sessions" / ".ctxlife_mark_key"
    assert path.read_text() == key.hex()
    assert path.stat().st_mode & 0o777 == 0o600
    assert _store(tmp_path).mark_key(create=True) == key  # another process reads the same one
    path.write_text("not hex\n")
    with pytest.raises(StoreError, match=rf"^cannot read the store's mark key {path}: non-hexadecimal"):
        _store(tmp_path).mark_key(create=True)


def test_a_folder_that_is_a_file_cannot_be_listed_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(StoreError, match=rf"^cannot list session folder {tmp_path / 'a-file'}: Not a directory$"):
        FileStore(tmp_path / "a-file").list_sessions()


@pytest.mark.parametrize("write", ["snapshot", "call", "blob", "append"])
def test_any_write_to_an_expired_session_leaves_none_of_its_old_records(tmp_path: Path, write: str) -> None:
    store = _store(tmp_path, ttl=3600)
    store.append("s", [{"n": "old"}])
    _age(tmp_path / "sessions" / "s_raw.jsonl", 7200)
    if write == "snapshot":
        store.save_snapshot(_snap("s"))
    elif write == "call":
        store.append_call("s", "", {"n": 1})
    elif write == "blob":
        store.put_blob("s", "k", "v")
    else:
        store.append("s", [{"n": "new"}])
    assert [r.message for r in store.read_records("s")] == ([{"n": "new"}] if write == "append" else [])


def test_a_call_record_that_is_not_json_names_the_session_and_writes_nothing(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with pytest.raises(StoreError, match=r"^call record of session 's' is not JSON-serializable: "):
        store.append_call("s", "", {"when": object()})
    assert store.read_calls("s") == []


def test_a_call_record_is_fsynced_with_the_folder_that_got_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileStore(tmp_path / "sessions")
    store.append("s", [{"n": 1}])
    synced = fsyncs(monkeypatch)
    store.append_call("s", "", {"n": 1})
    calls = str(tmp_path / "sessions" / "s_calls.jsonl")
    assert synced == [calls, str(tmp_path / "sessions")]
    store.append_call("s", "", {"n": 2})
    assert synced[2:] == [calls]


def test_call_records_are_numbered_across_processes_and_after_a_torn_last_line(tmp_path: Path) -> None:
    first, second = _store(tmp_path), _store(tmp_path)
    assert first.append_call("s", "", {"n": 1}) == 1
    assert second.append_call("s", "", {"n": 2}) == 2
    assert first.append_call("s", "", {"n": 3}) == 3  # counted again: the file grew since its own append
    with (tmp_path / "sessions" / "s_calls.jsonl").open("a") as calls:
        calls.write('{"view": "", "doc": {"n"')  # a crash mid-write
    assert second.append_call("s", "", {"n": 5}) == 5  # the torn line stays one unreadable line, number 4
    assert first.append_call("s", "", {"n": 6}) == 6
    with capture_logs() as logs:
        assert [(c.n, c.doc) for c in first.read_calls("s")] == [(n, {"n": n}) for n in (1, 2, 3, 5, 6)]
    assert [(e["event"], e["call"]) for e in logs] == [("ctxlife.call_record_skipped", 4)]


def test_a_call_record_file_that_is_a_symlink_is_refused_naming_it(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.append("s", [{"n": 1}])
    outside = tmp_path / "outside"
    outside.write_text("")
    path = tmp_path / "sessions" / "s_calls.jsonl"
    path.symlink_to(outside)
    with pytest.raises(
        StoreError, match=rf"^cannot append a call record to {path}: Too many levels of symbolic links$"
    ):
        store.append_call("s", "", {"n": 1})
    assert outside.read_text() == ""


def test_a_call_record_after_a_crash_that_left_one_byte_gets_the_next_number(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.append("s", [{"n": 1}])
    (tmp_path / "sessions" / "s_calls.jsonl").write_text("{")
    assert store.append_call("s", "", {"n": 2}) == 2
    assert [(c.n, c.doc) for c in store.read_calls("s")] == [(2, {"n": 2})]


def test_a_call_record_waiting_while_an_erase_rewrote_the_file_goes_to_the_new_file(tmp_path: Path) -> None:
    """An erase replaces the calls file under its lock; an append waiting on the old file's lock then
    appends to the new one, numbered after its lines (if the append opened the file before the swap)."""
    store = _store(tmp_path)
    for n in (1, 2):
        store.append_call("s", "", {"n": n})
    path = tmp_path / "sessions" / "s_calls.jsonl"
    got: list[Any] = []
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as an erase holds it
        appender = threading.Thread(target=lambda: got.append(store.append_call("s", "", {"n": 4})))
        appender.start()
        appender.join(0.5)
        replacement = tmp_path / "sessions" / "replacement"
        replacement.write_text("".join(json.dumps({"view": "", "doc": {"n": n}}) + "\n" for n in (1, 2, 3)))
        os.replace(replacement, path)
    finally:
        os.close(fd)
    appender.join(30)
    assert got == [4]
    assert [(c.n, c.doc) for c in store.read_calls("s")] == [(n, {"n": n}) for n in (1, 2, 3, 4)]


# -- file_io: writes whole, or a temporary file that a delete removes ---------------------------------------


def test_a_snapshot_write_stopped_before_its_rename_leaves_only_a_temporary_file_that_delete_removes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path)
    store.save_snapshot(_snap("s", updated_at=1.0))

    def killed(*args: Any) -> None:
        raise KeyboardInterrupt  # the process stops here: no cleanup of an OSError runs

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        store.save_snapshot(_snap("s", updated_at=2.0))
    monkeypatch.undo()
    folder = tmp_path / "sessions"
    [temp] = [name for name in os.listdir(folder) if name != "s_ctx.json"]
    assert temp.startswith(".s_ctx.json.") and temp.endswith(".tmp")
    assert (folder / temp).stat().st_mode & 0o777 == 0o600
    assert store.load_snapshot("s").updated_at == 1.0  # type: ignore[union-attr]
    assert [i.session_id for i in store.list_sessions()] == ["s"]
    assert store.delete("s") is True
    assert os.listdir(folder) == []


def test_a_write_that_fails_is_an_error_naming_the_file_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.save_snapshot(_snap("ok"))
    folder = tmp_path / "sessions"
    (folder / "s_ctx.json").mkdir()
    with pytest.raises(StoreError, match=rf"^cannot write {folder / 's_ctx.json'}: Is a directory$"):
        store.save_snapshot(_snap("s"))
    assert sorted(os.listdir(folder)) == ["ok_ctx.json", "s_ctx.json"]
    store.put_blob("b", "k", "v")
    shutil.rmtree(folder / "b_blobs")
    (folder / "b_blobs").write_text("not a folder")
    with pytest.raises(StoreError, match=rf"^session folder {folder / 'b_blobs'} exists but is not a directory$"):
        store.put_blob("b", "k", "v")


def test_a_folder_that_refuses_fsync_still_takes_writes_and_another_fsync_error_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileStore(tmp_path / "sessions")
    store.append("s", [{"n": 1}])
    real = os.fsync
    refusal = [errno.EINVAL]

    def folder_refuses(fd: int) -> None:
        if os.path.isdir(os.readlink(f"/proc/self/fd/{fd}")):
            raise OSError(refusal[0], os.strerror(refusal[0]))
        real(fd)

    monkeypatch.setattr(os, "fsync", folder_refuses)
    for code in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
        refusal[0] = code
        store.save_snapshot(_snap("s"))
        store.append_call("s", "", {"n": 1})
    assert store.load_snapshot("s") is not None
    refusal[0] = errno.EIO
    with pytest.raises(StoreError, match=rf"^cannot write {tmp_path / 'sessions' / 's_ctx.json'}: Input/output error$"):
        store.save_snapshot(_snap("s"))


# -- reads ------------------------------------------------------------------------------------------


def test_reads_refuse_a_bad_view_and_a_bad_position_before_touching_the_folder(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with pytest.raises(SessionIdError, match="view"):
        store.read_records("s", view="../up")
    with pytest.raises(SessionIdError, match="view"):
        store.read_calls("s", view="a/b")
    with pytest.raises(StoreError, match="after_seq must be an int >= 0, got -1"):
        store.read_records("s", after_seq=-1)
    assert not (tmp_path / "sessions").exists()
    assert store.read_records("s") == [] and store.read_calls("s") == [] and store.head("s") == 0


def test_head_reads_past_a_corrupt_line_and_a_strict_read_names_it(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.append("s", [{"n": 1}, {"n": 2}])
    raw = tmp_path / "sessions" / "s_raw.jsonl"
    lines = raw.read_bytes().splitlines(keepends=True)
    raw.write_bytes(lines[0] + b"garbage\n" + lines[1])
    reader = _store(tmp_path)
    assert reader.head("s") == 2
    with pytest.raises(StoreError, match="is corrupt at line 2"):
        reader.read_records("s")
    assert [r.seq for r in reader.read_records("s", strict=False)] == [1, 2]


def test_a_blob_that_is_not_text_is_refused_naming_the_session_and_the_key_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    with pytest.raises(StoreError, match=r"^blob 'out-1' of session 's' must be a str, got bytes$"):
        store.put_blob("s", "out-1", b"raw")  # type: ignore[arg-type]
    with pytest.raises(StoreError, match=r"^blob 'out-1' of session 's' is not valid Unicode text"):
        store.put_blob("s", "out-1", "\ud800")
    assert not (tmp_path / "sessions").exists()


def test_the_mark_key_is_written_beside_it_then_linked_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A link never crosses file systems: the temporary file is made in the store's folder."""
    store = _store(tmp_path)
    store.append("s", [{"n": 1}])
    linked: list[tuple[str, str]] = []
    real = os.link

    def spy(source: Any, target: Any, *args: Any, **kwargs: Any) -> None:
        linked.append((str(source), str(target)))
        real(source, target, *args, **kwargs)

    monkeypatch.setattr(os, "link", spy)
    key = store.mark_key(create=True)
    folder = tmp_path / "sessions"
    [(source, target)] = linked
    assert target == str(folder / ".ctxlife_mark_key")
    assert Path(source).parent == folder and Path(source).name.startswith(".ctxlife_mark_key.")
    assert sorted(os.listdir(folder)) == [".ctxlife_mark_key", "s_raw.jsonl"]  # the temporary file gone
    assert key is not None and (folder / ".ctxlife_mark_key").read_text() == key.hex()


def test_a_file_linked_in_place_never_replaces_one_another_process_stored_first(tmp_path: Path) -> None:
    path = tmp_path / "first"
    path.write_bytes(b"stored first")
    link_new(path, b"second", "the test's file")
    assert path.read_bytes() == b"stored first"
    assert os.listdir(tmp_path) == ["first"]


def test_a_snapshot_file_naming_a_view_that_cannot_be_is_left_out_of_a_listing(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.save_snapshot(_snap("s", view="v", updated_at=3.0))
    (tmp_path / "sessions" / "s_ctx@not a view!.json").write_text("{}")
    assert [(i.session_id, i.updated_at) for i in store.list_sessions()] == [("s", 3.0)]


def test_with_a_ttl_a_raw_history_that_is_a_symlink_is_never_touched_and_the_error_names_the_session(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path, ttl=3600)
    store.append("real", [{"n": 1}])
    outside = tmp_path / "outside"
    outside.write_text("")
    raw = tmp_path / "sessions" / "s_raw.jsonl"
    raw.symlink_to(outside)
    message = rf"^cannot mark session 's' active \({raw}\): Too many levels of symbolic links$"
    with pytest.raises(StoreError, match=message):
        store.put_blob("s", "k", "v")
    assert outside.read_text() == ""


def _bytes_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many bytes each ``os.pread`` returns from now on."""
    counts: list[int] = []
    real = os.pread

    def spy(fd: int, n: int, offset: int) -> bytes:
        data = real(fd, n, offset)
        counts.append(len(data))
        return data

    monkeypatch.setattr(os, "pread", spy)
    return counts


def test_a_read_after_a_recent_record_reads_only_the_bytes_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The module's promise: the store remembers where the last record it read ends, so reading the
    records after a recent sequence number reads only the new bytes (plus the last record's line, to
    check the file was not rewritten)."""
    reader, writer = _store(tmp_path), _store(tmp_path)
    writer.append("s", [{"role": "user", "content": "x" * 2000} for _ in range(50)])
    assert len(reader.read_records("s")) == 50
    line = len((tmp_path / "sessions" / "s_raw.jsonl").read_bytes().splitlines(keepends=True)[-1])
    writer.append("s", [{"role": "user", "content": "new"}])
    counts = _bytes_read(monkeypatch)
    assert [r.message["content"] for r in reader.read_records("s", after_seq=50)] == ["new"]
    assert sum(counts) < 2 * line  # the remembered last line, then the new one: not the 100 kB before
    counts.clear()
    assert [r.seq for r in reader.read_records("s", after_seq=50)] == [51]  # the position is where it read to
    assert [r.seq for r in reader.read_records("s", after_seq=50)] == [51]
    assert sum(counts) < 4 * line
    counts.clear()
    assert reader.head("s") == 51
    assert [r.seq for r in reader.read_records("s", after_seq=51)] == []
    assert sum(counts) < 2 * line


def test_a_corrupt_line_after_the_last_record_read_is_named_by_its_line_number(tmp_path: Path) -> None:
    reader, writer = _store(tmp_path), _store(tmp_path)
    writer.append("s", [{"n": 1}, {"n": 2}, {"n": 3}])
    assert len(reader.read_records("s")) == 3
    assert [r.seq for r in reader.read_records("s", after_seq=2)] == [3]  # from the last record's line
    raw = tmp_path / "sessions" / "s_raw.jsonl"
    last = raw.read_bytes().splitlines(keepends=True)[-1]
    assert b'"seq":3,' in last
    with raw.open("ab") as out:
        out.write(b"garbage\n" + last.replace(b'"seq":3,', b'"seq":4,'))  # another process's bad write, then a good one
    with pytest.raises(StoreError, match="is corrupt at line 4: invalid JSON"):
        reader.read_records("s", after_seq=2)
    with pytest.raises(StoreError, match="is corrupt at line 4: invalid JSON"):
        reader.read_records("s", after_seq=3)
    assert [r.seq for r in reader.read_records("s", after_seq=2, strict=False)] == [3, 4]


def test_an_append_reads_only_the_last_line_of_a_history_it_knows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path)
    store.append("s", [{"role": "user", "content": "x" * 2000} for _ in range(50)])
    line = len((tmp_path / "sessions" / "s_raw.jsonl").read_bytes().splitlines(keepends=True)[-1])
    counts = _bytes_read(monkeypatch)
    store.append("s", [{"n": 51}])
    store.append("s", [{"n": 52}])
    assert sum(counts) < 2 * line  # each checks the last line it wrote is still there, nothing before
    other = _store(tmp_path)
    counts.clear()
    assert [r.seq for r in other.append("s", [{"n": 53}])] == [53]
    assert sum(counts) > 50 * line  # a store that never read it reads it whole, once
    counts.clear()
    other.append("s", [{"n": 54}])
    assert sum(counts) < line
    counts.clear()
    store.append("s", [{"n": 55}])  # after another's appends: from its own last line on, not the whole file
    assert sum(counts) < line


def test_an_append_past_a_corrupt_line_says_which_session_and_line(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.append("s", [{"n": 1}, {"n": 2}])
    raw = tmp_path / "sessions" / "s_raw.jsonl"
    first, second = raw.read_bytes().splitlines(keepends=True)
    raw.write_bytes(first + b"garbage\n" + second)
    with capture_logs() as logs:
        assert [r.seq for r in _store(tmp_path).append("s", [{"n": 3}])] == [3]
    assert [(e["event"], e["session_id"], e["line"]) for e in logs] == [("raw_record_skipped", "s", 2)]


def test_an_append_cuts_a_torn_end_saying_how_many_bytes_and_says_nothing_of_a_clean_file(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.append("s", [{"n": 1}])
    with capture_logs() as logs:
        _store(tmp_path).append("s", [{"n": 2}])
    assert logs == []
    raw = tmp_path / "sessions" / "s_raw.jsonl"
    with raw.open("ab") as out:
        out.write(b'{"seq": 3, "vi')  # a crash mid-write: 14 bytes
    with capture_logs() as logs:
        _store(tmp_path).append("s", [{"n": 3}])
    assert logs == [
        {
            "event": "raw_torn_record_repaired",
            "log_level": "warning",
            "store": "file",
            "session_id": "s",
            "file": "s_raw.jsonl",
            "bytes_removed": 14,
        }
    ]
    assert [r.message for r in store.read_records("s")] == [{"n": 1}, {"n": 2}, {"n": 3}]


def test_a_reader_notices_its_last_record_rewritten_in_place_by_another_process(tmp_path: Path) -> None:
    reader, writer = _store(tmp_path), _store(tmp_path)
    writer.append("s", [{"role": "user", "content": f"m{i}"} for i in range(3)])
    assert len(reader.read_records("s")) == 3
    raw = tmp_path / "sessions" / "s_raw.jsonl"
    lines = raw.read_bytes().splitlines(keepends=True)
    raw.write_bytes(b"".join(lines[:-1]))  # the same file (inode): its last record cut, then others appended
    writer2 = _store(tmp_path)
    writer2.append("s", [{"role": "user", "content": "a longer replacement " * 5}, {"role": "user", "content": "m4"}])
    assert [(r.seq, r.message["content"]) for r in reader.read_records("s", after_seq=3)] == [(4, "m4")]


def test_a_history_holding_only_a_blank_line_reads_as_empty_with_a_warning_and_is_cut_by_the_next_append(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    store.append("s", [{"n": 0}])
    raw = tmp_path / "sessions" / "s_raw.jsonl"
    raw.write_bytes(b"\n")
    reader = _store(tmp_path)
    with capture_logs() as logs:
        assert reader.read_records("s") == []
    assert [(e["event"], e["line"]) for e in logs] == [("raw_torn_record_skipped", 1)]
    assert [r.seq for r in reader.append("s", [{"n": 1}])] == [1]
    assert raw.read_bytes().startswith(b'{"seq":1,')


def test_a_raw_history_that_is_a_symlink_or_a_folder_cannot_be_read_and_the_error_says_so(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.append("real", [{"n": 1}])
    outside = tmp_path / "outside.jsonl"
    outside.write_text("")
    raw = tmp_path / "sessions" / "evil_raw.jsonl"
    raw.symlink_to(outside)
    with pytest.raises(StoreError, match=rf"^cannot read {raw}: Too many levels of symbolic links$"):
        store.read_records("evil")
    (tmp_path / "sessions" / "odd_raw.jsonl").mkdir()
    with pytest.raises(StoreError, match=rf"^cannot read {tmp_path / 'sessions' / 'odd_raw.jsonl'}: Is a directory$"):
        store.read_records("odd")


def test_a_call_record_waiting_while_the_session_was_deleted_starts_the_new_file(tmp_path: Path) -> None:
    store = _store(tmp_path)
    for n in (1, 2):
        store.append_call("s", "", {"n": n})
    path = tmp_path / "sessions" / "s_calls.jsonl"
    got: list[Any] = []
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as a delete holds it
        appender = threading.Thread(target=lambda: got.append(store.append_call("s", "", {"n": "new"})))
        appender.start()
        appender.join(0.5)
        path.unlink()
    finally:
        os.close(fd)
    appender.join(30)
    assert got == [1]
    assert [(c.n, c.doc) for c in store.read_calls("s")] == [(1, {"n": "new"})]
