"""Secrets are never printed (issue 38): store URL passwords and API keys in ``ctxlife check``, the
CLI's errors and every log event; with ``log_content = false`` an error that echoes the prompt in
any escaping is withheld."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxlife.cli import main
from ctxlife.config import settings_from_dict
from ctxlife.events import describe_error, emit, redact_url, redacted
from ctxlife.host import Host
from ctxlife.summarizers import register_summarizer, unregister_summarizer

PASSWORD = "s3cret-Pa55word"
API_KEY = "sk-live-0123456789abcdef"


def config(tmp_path: Path, store: str) -> Path:
    path = tmp_path / "ctxlife.toml"
    path.write_text(
        f'strategies = ["snapshot_restore", "llm_summary"]\nstore = "{store}"\n'
        '[llm_summary]\nsummarizer = "extractive"\n[model]\n'
        f'options = {{ api_key = "{API_KEY}", temperature = 0 }}\n'
    )
    return path


@pytest.mark.parametrize("from_env", [False, True])
def test_check_prints_no_password_and_no_api_key(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch, from_env: bool, redis_server: Any
) -> None:
    server = redis_server("--requirepass", PASSWORD)
    url = server.url(password=PASSWORD, query="prefix=app:")
    path = config(tmp_path, "file:///unused" if from_env else url)
    if from_env:
        monkeypatch.setenv("CTXLIFE_STORE", url)
    for extra in ([], ["--json"]):
        assert main(["check", str(path), *extra]) == 0
        out = capsys.readouterr()
        assert PASSWORD not in out.out + out.err and API_KEY not in out.out + out.err
    printed = json.loads(out.out)
    assert printed["store"] == redact_url(url) and ":***@" in printed["store"]
    assert printed["model"]["options"] == {"api_key": "***", "temperature": 0}
    assert printed["model"]["api_key_env"] == "OPENAI_API_KEY"  # a variable's name, not a secret


def test_store_urls_lose_their_passwords_in_every_spelling() -> None:
    assert redact_url(f"redis://:{PASSWORD}@h:6379/0") == "redis://:***@h:6379/0"
    assert redact_url(f"rediss://u:{PASSWORD}@[::1]:6380/0") == "rediss://u:***@[::1]:6380/0"
    assert redact_url(f"redis://h/0?prefix=a:&password={PASSWORD}") == "redis://h/0?prefix=a:&password=***"
    assert redact_url("sqlite:///tmp/sessions.db") == "sqlite:///tmp/sessions.db"
    assert redacted({"x": [f"failed: redis://:{PASSWORD}@h/0 is down"]}) == {"x": ["failed: redis://:***@h/0 is down"]}


def test_cli_errors_and_log_events_redact_urls(tmp_path: Path, capsys: Any) -> None:
    from structlog.testing import capture_logs

    unreachable = f"redis://:{PASSWORD}@127.0.0.1:1/0"
    assert main(["session", "list", "--store", unreachable]) == 2
    err = capsys.readouterr().err
    assert "127.0.0.1:1" in err and PASSWORD not in err
    with capture_logs() as logs:
        emit("warning", "ctxlife.test", url=f"redis://:{PASSWORD}@h/0")
    assert logs and PASSWORD not in repr(logs)


# Escapes every few characters: an echo of it in JSON or as a repr shares no long raw run with it.
PROMPT = 'card:\t"4111 1111"\n"1111 1111"\nZoë: «call» +49\t170\n1234567 "ok"\nmy pin\t"9876"\n' * 2


@pytest.mark.parametrize(
    "echo",
    [
        json.dumps({"messages": [{"role": "user", "content": PROMPT}]}),  # JSON, ASCII-escaped
        json.dumps({"messages": [{"role": "user", "content": PROMPT}]}, ensure_ascii=False),
        repr({"content": PROMPT}),
    ],
)
def test_an_error_echoing_the_prompt_escaped_is_withheld(echo: str) -> None:
    error, safe = describe_error(RuntimeError(f"400 Bad Request: {echo}"), [PROMPT], log_content=False)
    assert not safe and "withheld" in error and "4111" not in error


def test_a_summary_model_error_echoing_the_prompt_is_not_logged(tmp_path: Path) -> None:
    from structlog.testing import capture_logs

    class Echoing:
        def summarize(self, request: Any) -> str:
            body = json.dumps({"messages": request.messages})
            raise RuntimeError(f"400 invalid request: {body}")

    register_summarizer("echoing", lambda **kw: Echoing(), replace=True)
    try:
        host = Host(
            settings_from_dict(
                {"strategies": ["llm_summary"], "llm_summary": {"summarizer": "echoing", "min_gain_tokens": 0}}
            ),
            context_window=600,
        )
        with capture_logs() as logs:
            host.manage([{"role": "user", "content": PROMPT * 4}, {"role": "assistant", "content": "ok " * 60}] * 3)
    finally:
        unregister_summarizer("echoing")
    assert any(e["event"] == "ctxlife.summary_failed" for e in logs)
    assert not [e for e in logs if "4111" in repr(e)]
