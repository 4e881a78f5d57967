"""The snapshot of a view: its saved working context, and the migrations of older snapshot formats.

A restore is a view's :class:`Snapshot` (messages, and ``raw_length``, the last record it reflects)
followed by the view's records after ``raw_length`` (:mod:`ctxlife.sessions.restore`).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ctxlife.errors import CtxlifeError, StoreError
from ctxlife.sessions.ids import validate_session_id, validate_view
from ctxlife.sessions.records import json_text

__all__ = [
    "FORMAT_VERSION",
    "Snapshot",
    "register_snapshot_migration",
]

#: The snapshot format this version of ctxlife writes (2: one snapshot per view, with ``view``).
FORMAT_VERSION = 2

#: ``{from_version: fn}``; ``fn(doc)`` takes a decoded snapshot document of ``from_version`` and returns
#: one of ``from_version + 1``. Filled by :func:`register_snapshot_migration`.
_MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}

_SNAPSHOT_KEYS = ("format_version", "session_id", "view", "raw_length", "updated_at", "meta", "messages")


def register_snapshot_migration(from_version: int, fn: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """Register ``fn`` to upgrade a decoded snapshot document from ``from_version`` to the next one.

    :meth:`Snapshot.from_json` chains migrations until it reaches :data:`FORMAT_VERSION`. The function
    receives the whole decoded JSON object (with ``format_version == from_version``) and must return
    the upgraded object; it need not set ``format_version`` (the caller does).
    """
    if not isinstance(from_version, int) or from_version < 0:
        raise ValueError(f"from_version must be a non-negative int, got {from_version!r}")
    _MIGRATIONS[from_version] = fn


# -- snapshots ---------------------------------------------------------------------------------------


class Snapshot(BaseModel):
    """The saved working context of one view of a session (validated strictly).

    Attributes:
        session_id: the session it belongs to (validated).
        view: the view (agent/task lane) it belongs to; ``""`` is the default view.
        messages: the OpenAI-format message dicts the agent should see next (each a dict with a
            ``"role"``); JSON round-trips exactly.
        raw_length: the sequence number of the last raw record this snapshot reflects (0: none).
            Records of the view with a higher sequence number were produced after it; a restore
            is this snapshot's messages followed by them.
        updated_at: when it was taken, seconds since the epoch (``time.time()``).
        meta: free-form JSON object for strategies.
        format_version: the format of the serialized record; :data:`FORMAT_VERSION` when created.

    Frozen: make a new snapshot (``snapshot.model_copy(update={...})``) rather than editing one. The
    message dicts inside are not copied; don't mutate them after saving if you compare later.
    Invalid fields raise :class:`StoreError` (an unsafe session id: :class:`SessionIdError`).
    """

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")

    session_id: str
    view: str = ""
    messages: list[Any]
    raw_length: int = Field(ge=0)
    updated_at: float = Field(default_factory=time.time)
    meta: dict[str, Any] = Field(default_factory=dict)
    format_version: int = Field(default_factory=lambda: FORMAT_VERSION)

    def __init__(self, **data: Any) -> None:
        sid = data.get("session_id")
        validate_session_id(sid)  # SessionIdError, before anything else
        try:
            super().__init__(**data)
        except ValidationError as exc:
            problems = []
            for error in exc.errors():
                where = ".".join(str(p) for p in error["loc"]) or "(snapshot)"
                msg = error["msg"].removeprefix("Value error, ")
                problems.append(f"{where}: {msg}" + ("" if "got" in msg else f" (got {error.get('input')!r})"[:200]))
            raise StoreError(f"snapshot of session {sid!r} is invalid: " + "; ".join(problems)) from None

    @field_validator("view")
    @classmethod
    def _view_is_safe(cls, value: str) -> str:
        return validate_view(value)

    @field_validator("messages")
    @classmethod
    def _messages_are_messages(cls, value: list[Any]) -> list[Any]:
        for i, m in enumerate(value):
            if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                shown = type(m).__name__ if not isinstance(m, dict) else "a dict without a str 'role'"
                raise ValueError(f"message {i} must be a message dict with a 'role', got {shown}")
        return value

    @field_validator("updated_at")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError(f"must be a finite number (time.time()), got {value!r}")
        return value

    @field_validator("format_version")
    @classmethod
    def _current_version(cls, value: int) -> int:
        if value != FORMAT_VERSION:
            raise ValueError(
                f"format_version {value!r} cannot be created by this ctxlife (it writes version "
                f"{FORMAT_VERSION}); use Snapshot.from_json to read and migrate older records"
            )
        return value

    def to_dict(self) -> dict[str, Any]:
        """The JSON object that :meth:`to_json` writes (shares the message dicts, no copy)."""
        return {
            "format_version": self.format_version,
            "session_id": self.session_id,
            "view": self.view,
            "raw_length": self.raw_length,
            "updated_at": self.updated_at,
            "meta": self.meta,
            "messages": self.messages,
        }

    def to_json(self) -> str:
        """Serialize to one line of compact UTF-8-safe JSON (see :func:`json_text`)."""
        return json_text(self.to_dict(), what=f"snapshot of session {self.session_id!r}")

    @classmethod
    def from_json(cls, data: str | bytes, *, source: str = "snapshot") -> Snapshot:
        """Parse a record written by :meth:`to_json`, migrating older format versions.

        Raises :class:`StoreError` (naming ``source``) for malformed JSON, missing or unknown fields,
        a version written by a newer ctxlife, or an old version with no registered migration.
        """
        try:
            doc = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise StoreError(f"{source} is not valid JSON ({exc}); the record is corrupt") from None
        return cls.from_dict(doc, source=source)

    @classmethod
    def from_dict(cls, doc: object, *, source: str = "snapshot") -> Snapshot:
        """Like :meth:`from_json` for an already decoded object."""
        if not isinstance(doc, dict):
            raise StoreError(f"{source} must be a JSON object, got {type(doc).__name__}")
        version = doc.get("format_version")
        if isinstance(version, bool) or not isinstance(version, int):
            raise StoreError(f"{source} has no integer 'format_version' field; the record is corrupt")
        current = FORMAT_VERSION  # read at call time (tests and future versions patch it)
        if version > current:
            raise StoreError(
                f"{source} has format_version {version}, but this ctxlife reads versions up to "
                f"{current}; it was written by a newer ctxlife. Upgrade ctxlife to read it"
            )
        while version < current:
            migrate = _MIGRATIONS.get(version)
            if migrate is None:
                raise StoreError(
                    f"{source} has format_version {version} and there is no migration from it to "
                    f"{version + 1} (this ctxlife writes {current}); the record cannot be read"
                )
            try:
                doc = dict(migrate(dict(doc)))
            except StoreError:
                raise
            except Exception as exc:  # a migration bug must not look like a driver error
                raise StoreError(f"migrating {source} from format_version {version} failed: {exc!r}") from exc
            version += 1
            doc["format_version"] = version
        missing = [k for k in _SNAPSHOT_KEYS if k not in doc]
        extra = sorted(k for k in doc if k not in _SNAPSHOT_KEYS)
        if missing or extra:
            raise StoreError(
                f"{source} (format_version {version}) has missing fields {missing} / unknown "
                f"fields {extra}; the record is corrupt"
            )
        try:
            return cls(**{k: doc[k] for k in _SNAPSHOT_KEYS})
        except CtxlifeError as exc:  # e.g. a tampered session id
            raise StoreError(f"{source} is invalid: {exc}") from None
