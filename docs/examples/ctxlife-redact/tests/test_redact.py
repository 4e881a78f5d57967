"""The example plugin's own tests, using ctxlife's pytest fixtures (loaded automatically)."""

import pytest

import ctxlife

KEY = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0" * 2


def test_redacts_tool_results_and_messages(make_host):
    host = make_host(["redact"], context_window=8000)
    ctx = ctxlife.ToolCallContext(tool_name="read_env", result=f"OPENAI_API_KEY={KEY}\nDEBUG=1")
    host.after_tool_call(ctx)
    assert KEY not in ctx.result and "[REDACTED:" in ctx.result and "DEBUG=1" in ctx.result

    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": f"my key is {KEY}"}]
    report = host.manage(messages)
    assert messages[1]["content"] == "my key is [REDACTED:openai_key]"
    assert report.actions[-1].details == {"where": "messages", "openai_key": 1}


def test_bad_options_are_clear():
    from ctxlife.config import settings_from_dict

    with pytest.raises(ctxlife.StrategyOptionsError, match="unknown kinds \\['nope'\\]"):
        settings_from_dict({"strategies": ["redact"], "redact": {"kinds": ["nope"]}})
