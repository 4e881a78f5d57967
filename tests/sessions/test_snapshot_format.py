"""A snapshot's own checks, word for word: what an invalid snapshot, a corrupt or newer record, and a migration
registered wrongly are refused with (the text a user reads in the error names the field, the value and the fix)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxlife.errors import StoreError
from ctxlife.sessions import snapshot as sessions_snapshot
from ctxlife.sessions.snapshot import Snapshot, register_snapshot_migration


def _refusal(**fields: Any) -> str:
    with pytest.raises(StoreError) as caught:
        Snapshot(**{"session_id": "a", "messages": [], "raw_length": 0, **fields})
    return str(caught.value)


def test_an_invalid_snapshot_names_each_field_its_problem_and_the_value() -> None:
    head = "snapshot of session 'a' is invalid: "
    assert _refusal(raw_length=-1) == head + "raw_length: Input should be greater than or equal to 0 (got -1)"
    assert _refusal(messages=["hi"]) == head + "messages: message 0 must be a message dict with a 'role', got str"
    assert _refusal(meta=[]) == head + "meta: Input should be a valid dictionary (got [])"
    assert _refusal(updated_at=float("inf")) == head + "updated_at: must be a finite number (time.time()), got inf"
    assert _refusal(raw_length=-1, updated_at=float("nan")) == head + (
        "raw_length: Input should be greater than or equal to 0 (got -1); "
        "updated_at: must be a finite number (time.time()), got nan"
    )
    assert _refusal(bogus=1) == head + "bogus: Extra inputs are not permitted (got 1)"
    assert _refusal(meta={1: "x"}) == head + "meta.1.[key]: Input should be a valid string (got 1)"  # a nested place
    assert _refusal(format_version=1) == head + (
        "format_version: format_version 1 cannot be created by this ctxlife (it writes version 2); use "
        "Snapshot.from_json to read and migrate older records (got 1)"
    )


def test_a_huge_wrong_value_is_cut_short_in_the_error() -> None:
    text = _refusal(raw_length="x" * 300)
    assert text.startswith("snapshot of session 'a' is invalid: raw_length: Input should be a valid integer (got 'xxx")
    assert len(text) == len("snapshot of session 'a' is invalid: raw_length: Input should be a valid integer") + 200


def _good() -> dict[str, Any]:
    return json.loads(Snapshot(session_id="a", messages=[], raw_length=0, updated_at=1.5).to_json())


@pytest.mark.parametrize(
    ("record", "error"),
    [
        (
            "{not json",
            "is not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1)); "
            "the record is corrupt",
        ),
        ("[]", "must be a JSON object, got list"),
        (
            json.dumps({**_good(), "format_version": "2"}),
            "has no integer 'format_version' field; the record is corrupt",
        ),
        (
            json.dumps({**_good(), "format_version": True}),
            "has no integer 'format_version' field; the record is corrupt",
        ),
        (
            json.dumps({**_good(), "format_version": 3}),
            "has format_version 3, but this ctxlife reads versions up to 2; it was written by a newer ctxlife. "
            "Upgrade ctxlife to read it",
        ),
        (
            json.dumps({k: v for k, v in _good().items() if k != "messages"}),
            "(format_version 2) has missing fields ['messages'] / unknown fields []; the record is corrupt",
        ),
        (
            json.dumps({**_good(), "surprise": 1}),
            "(format_version 2) has missing fields [] / unknown fields ['surprise']; the record is corrupt",
        ),
    ],
)
def test_a_corrupt_or_newer_record_is_refused_naming_its_source(record: str, error: str) -> None:
    with pytest.raises(StoreError) as caught:
        Snapshot.from_json(record, source="the snapshot file x.json")
    assert str(caught.value) == f"the snapshot file x.json {error}"
    with pytest.raises(StoreError) as caught:
        Snapshot.from_json(record)  # the default source
    assert str(caught.value) == f"snapshot {error}"


def test_a_record_of_an_unsafe_session_is_refused_naming_its_source() -> None:
    with pytest.raises(StoreError) as caught:
        Snapshot.from_json(json.dumps({**_good(), "session_id": "../etc"}), source="the snapshot file x.json")
    assert str(caught.value).startswith("the snapshot file x.json is invalid: session id '../etc' contains")


def test_a_decoded_record_that_is_no_object_is_refused_as_a_snapshot() -> None:
    with pytest.raises(StoreError) as caught:
        Snapshot.from_dict([])
    assert str(caught.value) == "snapshot must be a JSON object, got list"


def test_a_message_that_is_not_json_names_the_snapshot() -> None:
    snapshot = Snapshot(session_id="a", messages=[{"role": "user", "x": object()}], raw_length=0)
    with pytest.raises(StoreError) as caught:
        snapshot.to_json()
    assert (
        str(caught.value)
        == "snapshot of session 'a' is not JSON-serializable: Object of type object is not JSON serializable"
    )


def test_the_round_trip_keeps_every_field() -> None:
    snapshot = Snapshot(
        session_id="a", view="agent-a", messages=[{"role": "user", "content": "Zoë ✈️"}], raw_length=3, meta={"k": 1}
    )
    assert Snapshot.from_json(snapshot.to_json()) == snapshot
    assert Snapshot.from_dict(snapshot.to_dict()) == snapshot


def test_a_migration_is_registered_from_version_0_on_and_never_for_a_negative_or_text_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sessions_snapshot, "_MIGRATIONS", {})
    monkeypatch.setattr(sessions_snapshot, "FORMAT_VERSION", 1)
    register_snapshot_migration(0, lambda doc: {**doc, "meta": {"from": 0}})
    old = {**_good(), "format_version": 0}
    assert Snapshot.from_dict(old).meta == {"from": 0}
    for bad in (-1, "1"):
        with pytest.raises(ValueError) as caught:
            register_snapshot_migration(bad, lambda doc: doc)  # type: ignore[arg-type]
        assert str(caught.value) == f"from_version must be a non-negative int, got {bad!r}"
    assert list(sessions_snapshot._MIGRATIONS) == [0]
