"""Sessions for the inspection tests, built through the public API (ctxlife.Session), and a store hash."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

STORE_KINDS = ("file", "sqlite", "redis")
SESSION = "inspect-u42"
WINDOW = 1500
#: A detail said early in the conversation, evicted by compaction later, asked about at the end.
CODE_NAME = "BLUEBIRD-77"
HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


def config_data(store_url: str, **extra: Any) -> dict[str, Any]:
    """A config that compacts early (a small window) and recalls what compaction evicted."""
    data: dict[str, Any] = {
        "strategies": ["bootstrap", "llm_summary", "recall"],
        "context_window": WINDOW,
        "threshold": 0.5,
        "store": store_url,
        "bootstrap": {"text": "Working rules: answer briefly and cite ticket numbers."},
        "llm_summary": {"summarizer": "extractive", "min_gain_tokens": 50, "max_summary_tokens": 200},
        "recall": {"max_share": 0.1},
    }
    data.update(extra)
    return data


def turns() -> list[tuple[str, str]]:
    """(user, assistant) turns: a greeting (the pinned first turn), a detail, filler that forces compaction
    with the hostile text among it."""
    out = [
        ("Hello, I handle the support queue this week.", "Hello! Ready to help with the queue."),
        (
            f"Project falcon's release code name is {CODE_NAME}; please remember it for the launch notes.",
            f"Noted: the falcon release code name is {CODE_NAME}.",
        ),
    ]
    for i in range(1, 9):
        out.append(
            (
                f"Status of ticket TCK-{7000 + i}? The customer reported a login failure after the update "
                f"on region {i} and wants a refund of order ORD-{52000 + i}. " + "Details follow. " * 12,
                f"Ticket TCK-{7000 + i} is open; the refund for ORD-{52000 + i} is queued for review. "
                + "We checked the logs of the payment service and found nothing unusual. " * 4,
            )
        )
        if i == 4:
            out.append((f"Please quote this exactly: {HOSTILE}", f"Quoted: {HOSTILE}"))
    return out


def build_session(store_url: str, session_id: str = SESSION) -> dict[str, Any]:
    """Record a conversation through ctxlife.Session (compacting on the way) and close it."""
    import ctxlife
    from ctxlife.config import settings_from_dict

    settings = settings_from_dict(config_data(store_url), source="test config")
    sent: list[list[dict[str, Any]]] = []
    with ctxlife.Session(session_id, settings, system="You are a support clerk.") as session:
        for user, reply in turns():
            sent.append(session.messages({"role": "user", "content": user}))
            session.record_reply(reply)
    return {"settings": settings, "sent": sent}


def fingerprint_store(store_url: str) -> str:
    """A hash of everything the store holds: its files (file, SQLite) or its keys and values (Redis)."""
    digest = hashlib.sha256()
    scheme, _, rest = store_url.partition("://")
    if scheme in ("file", "sqlite"):
        root = Path(rest.split("?")[0]).parent if scheme == "sqlite" else Path(rest)
        if scheme == "sqlite":
            root = Path("/" + rest.lstrip("/")).parent
        files = sorted(p for p in root.rglob("*") if p.is_file())
        assert files, f"nothing stored under {root}"
        for path in files:
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
        return digest.hexdigest()
    import redis

    base, _, query = store_url.partition("?")
    prefix = query.removeprefix("prefix=")
    client = redis.Redis.from_url(base)
    try:
        keys = sorted(client.scan_iter(match=f"{prefix}*"))
        assert keys, f"nothing stored under prefix {prefix!r}"
        for key in keys:
            digest.update(key)
            digest.update(client.dump(key) or b"")
            digest.update(str(client.ttl(key)).encode())
    finally:
        client.close()
    return digest.hexdigest()
