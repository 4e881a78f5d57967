"""``ctxlife session show ID --context``: the exact list the next call would send, on every store."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from inspect_sessions import CODE_NAME, SESSION, WINDOW, fingerprint_store

from ctxlife.cli import main
from ctxlife.inspection import compose, next_context
from ctxlife.tokens import TokenCounter


def test_next_context_is_what_the_session_itself_would_send(stored: dict[str, Any], store_url: str, store) -> None:
    """The inspected list equals the list ctxlife.Session sends on its next call (same config, same store)."""
    import ctxlife

    settings = stored["settings"]
    before = fingerprint_store(store_url)
    call = next_context(settings, store, SESSION, ask="And what about the falcon launch?")
    assert fingerprint_store(store_url) == before  # read only: nothing recorded, nothing saved

    # The real thing, afterwards (it records the turn and may save a snapshot: that is its job).
    with ctxlife.Session(SESSION, settings, system="You are a support clerk.") as session:
        real = session.messages({"role": "user", "content": "And what about the falcon launch?"})
    assert call.composition.messages == real
    assert call.composition.total == TokenCounter().count_messages(real)


def test_parts_are_labelled_with_their_tokens(stored: dict[str, Any], store) -> None:
    call = next_context(stored["settings"], store, SESSION, ask=f"What was the code name of falcon? {CODE_NAME[:0]}")
    comp = call.composition
    kinds = [p.kind for p in comp.parts]
    # The stored conversation was compacted: a summary, the system prompt with the bootstrap section, recent turns.
    assert kinds[0] == "system" and "bootstrap" in kinds and "summary" in kinds and kinds[-1] == "recent"
    assert call.restored_from_snapshot > 0
    by_kind = comp.tokens_by_kind()
    assert sum(by_kind.values()) + comp.priming == comp.total
    assert comp.priming == 3  # the reply priming belongs to no message
    boot = next(p for p in comp.parts if p.kind == "bootstrap")
    assert "Working rules" in boot.text
    assert boot.tokens == TokenCounter().count_text(boot.text)
    # Recall brings the evicted code name back for a question about it.
    assert any(p.kind == "recall" and CODE_NAME in p.text for p in comp.parts), kinds
    assert CODE_NAME not in " ".join(p.text for p in comp.parts if p.kind == "recent")


def test_compose_labels_a_plain_list() -> None:
    counter = TokenCounter()
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]
    comp = compose(messages, counter)
    assert [(p.kind, p.role) for p in comp.parts] == [("system", "system"), ("recent", "user"), ("recent", "assistant")]
    assert [p.tokens for p in comp.parts] == [counter.count_message(m) for m in messages]


def test_session_show_context_command(stored: dict[str, Any], store_url: str, config_file: Path, capsys) -> None:
    before = fingerprint_store(store_url)
    code = main(["session", "show", SESSION, "--context", "--config", str(config_file), "--ask", "Falcon code name?"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert fingerprint_store(store_url) == before
    assert f"of a {WINDOW:,} window" in out
    for kind in ("system", "bootstrap", "summary", "recall", "recent"):
        assert kind in out
    assert "Tokens by part:" in out

    assert "SIMULATED because the question has not been asked yet" in out

    # Without --ask: the last call as recorded, exactly the list the session sent.
    code = main(["session", "show", SESSION, "--context", "--json", "--config", str(config_file)])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert data["source"] == "recorded" and data["call"] == len(stored["sent"])
    assert data["messages"] == stored["sent"][-1]
    assert data["total_tokens"] == sum(p["tokens"] for p in data["parts"]) + data["priming_tokens"]

    # --simulate: the next call, restored from the snapshot and run through the config.
    code = main(["session", "show", SESSION, "--context", "--json", "--simulate", "--config", str(config_file)])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["source"] == "simulated" and "SIMULATED on purpose" in data["note"]
    assert data["restored"]["from_snapshot"] > 0
    assert fingerprint_store(store_url) == before


def test_unknown_session_and_view_are_named(stored: dict[str, Any], config_file: Path) -> None:
    err = io.StringIO()
    import contextlib

    with contextlib.redirect_stderr(err):
        assert main(["session", "show", "nobody", "--context", "--config", str(config_file)]) == 2
        assert main(["session", "show", SESSION, "--context", "--view", "other", "--config", str(config_file)]) == 2
        assert main(["session", "show", SESSION, "--json", "--config", str(config_file)]) == 2
    text = err.getvalue()
    assert "--json go with --context" in text
    assert "no session 'nobody'" in text
    assert "has nothing in view 'other'" in text and "pass --view" in text


def test_the_scratch_copy_is_the_session(stored: dict[str, Any], store_url: str, store) -> None:
    """Same records (numbers, views, messages, fingerprints, times) and snapshots; the original only read."""
    from ctxlife.inspection import scratch_session

    before = fingerprint_store(store_url)
    with scratch_session(store, SESSION) as copy:
        assert copy.url.startswith("scratch+file://")

        def shown(s: Any) -> list[tuple[Any, ...]]:
            return [(r.seq, r.view, r.message, r.fingerprint, r.recorded_at) for r in s.read_records(SESSION)]

        assert shown(copy) == shown(store)
        original, copied = store.load_snapshot(SESSION), copy.load_snapshot(SESSION)
        assert original is not None and copied is not None
        assert (copied.messages, copied.raw_length, copied.meta) == (
            original.messages,
            original.raw_length,
            original.meta,
        )
        folder = Path(copy.url.removeprefix("scratch+file://"))
        assert folder.is_dir()
    assert not folder.exists()  # thrown away
    assert fingerprint_store(store_url) == before
