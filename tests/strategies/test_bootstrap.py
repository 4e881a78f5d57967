"""``bootstrap``: inject text and files into agents' system prompts, exactly once."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.host import Host
from ctxlife.messages import bootstrap_section
from ctxlife_strategies.bootstrap import Bootstrap, render

REPO = Path(__file__).resolve().parents[2]
TODAY = dt.date.today().isoformat()


def host_for(options: dict, **kwargs) -> Host:
    return Host(settings_from_dict({"strategies": ["bootstrap"], "bootstrap": options}), context_window=8192, **kwargs)


def test_render_fills_known_variables_and_leaves_other_braces_alone():
    variables = {"agent_role": "Writer", "session_id": "s1", "date": "2024-05-15"}
    text = 'Hi {agent_role} ({session_id}, {date}). Keep {unknown}, {{x}}, {"json": 1}, {0} and { agent_role }.'
    assert render(text, variables) == (
        'Hi Writer (s1, 2024-05-15). Keep {unknown}, {{x}}, {"json": 1}, {0} and { agent_role }.'
    )


def test_text_and_files_are_rendered_per_agent(tmp_path):
    (tmp_path / "profile.md").write_text('# Profile\nThe user is a product manager. {"lang": "en"}\n', encoding="utf-8")
    config = tmp_path / "ctxlife.toml"
    config.write_text(
        'strategies = ["bootstrap"]\n[bootstrap]\ntext = "You are {agent_role}; session {session_id}; {date}."\n'
        'files = ["profile.md"]\n',
        encoding="utf-8",
    )
    host = Host(ctxlife.load_settings(config), context_window=8192, session_id="u42")
    text = host.bootstrap_text(agent_role="Writer")
    assert text == (
        f'You are Writer; session u42; {TODAY}.\n\n# Profile\nThe user is a product manager. {{"lang": "en"}}'
    )


def test_relative_files_are_found_next_to_the_config_not_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "rules.md").write_text("Rule 1: save files to the sandbox first.", encoding="utf-8")
    config = tmp_path / "conf" / "ctxlife.toml"
    config.write_text('strategies = ["bootstrap"]\n[bootstrap]\nfiles = ["rules.md"]\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    (strategy,) = Host(ctxlife.load_settings(config)).strategies
    assert strategy.paths == [tmp_path / "conf" / "rules.md"]
    # Without a config file, relative paths are relative to the working directory.
    with pytest.raises(ctxlife.ConfigError) as info:
        host_for({"files": ["rules.md"]})
    assert str(info.value) == (
        f"strategy 'bootstrap': file 'rules.md' does not exist (looked for {tmp_path / 'rules.md'}, relative to "
        f"the working directory {tmp_path} (the settings do not come from a file)); fix the path in files or "
        "create the file"
    )


def test_a_missing_file_is_an_error_when_the_strategy_is_built(tmp_path):
    config = tmp_path / "ctxlife.toml"
    config.write_text('strategies = ["bootstrap"]\n[bootstrap]\nfiles = ["missing.md"]\n', encoding="utf-8")
    settings = ctxlife.load_settings(config)
    with pytest.raises(ctxlife.ConfigError) as info:
        Host(settings)
    assert str(info.value) == (
        f"strategy 'bootstrap': file 'missing.md' does not exist (looked for {tmp_path / 'missing.md'}, relative "
        f"to the config file's directory {tmp_path}); fix the path in files or create the file"
    )


def test_a_file_that_is_not_utf8_text_is_an_error_naming_it(tmp_path):
    (tmp_path / "profile.md").write_bytes(b"caf\xe9 in Latin-1")
    config = tmp_path / "ctxlife.toml"
    config.write_text('strategies = ["bootstrap"]\n[bootstrap]\nfiles = ["profile.md"]\n', encoding="utf-8")
    with pytest.raises(ctxlife.ConfigError) as info:
        Host(ctxlife.load_settings(config))
    assert str(info.value).startswith(f"strategy 'bootstrap': cannot read file {tmp_path / 'profile.md'}: ")
    assert "can't decode" in str(info.value)


def test_nothing_to_inject_is_an_error():
    with pytest.raises(ctxlife.ConfigError) as info:
        host_for({"text": "  "})
    assert str(info.value) == (
        "strategy 'bootstrap' has nothing to inject: set text and/or files in its [bootstrap] table"
    )
    with pytest.raises(ctxlife.ConfigError, match="nothing to inject"):
        Host(settings_from_dict({"strategies": ["bootstrap"]}))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"text": "x", "files": "profile.md"},
            "strategy 'bootstrap' option 'files' (in a dict): Input should be a valid list (got 'profile.md')",
        ),
        (
            {"text": "x", "agents": ["writer", ""]},
            "strategy 'bootstrap' option 'agents.1' (in a dict): Value error, must be a non-empty string (got '')",
        ),
        ({"text": 42}, "strategy 'bootstrap' option 'text' (in a dict): Input should be a valid string (got 42)"),
        ({"txt": "x"}, "strategy 'bootstrap' has no option 'txt' (in a dict) (did you mean 'text'?)"),
    ],
)
def test_bad_options_give_clear_errors(options, message):
    with pytest.raises(ctxlife.StrategyOptionsError) as info:
        settings_from_dict({"strategies": ["bootstrap"], "bootstrap": options})
    assert str(info.value) == message


def test_agents_selects_roles_case_insensitively():
    strategy = Bootstrap(Bootstrap.Options(text="x", agents=["Writer"]))
    assert strategy.applies_to("writer") and strategy.applies_to(" WRITER ")
    assert not strategy.applies_to("Researcher") and not strategy.applies_to(None)
    assert Bootstrap(Bootstrap.Options(text="x")).applies_to(None)


def test_manage_injects_once_into_the_system_message():
    settings = settings_from_dict({"strategies": ["bootstrap"], "bootstrap": {"text": "PROFILE: product manager."}})
    messages = [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "hi"}]
    report = ctxlife.manage(messages, config=settings, context_window=8192)
    assert messages[0]["content"] == "You are helpful.\n\n" + bootstrap_section("PROFILE: product manager.")
    assert report.tokens_after > report.tokens_before
    messages.append({"role": "assistant", "content": "hello"})
    messages.append({"role": "user", "content": "again"})
    ctxlife.manage(messages, config=settings, context_window=8192)
    assert messages[0]["content"].count("PROFILE") == 1


def test_xiaopaw_config_loads_and_renders(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXLIFE_STORE", f"file://{tmp_path / 'sessions'}")
    settings = ctxlife.load_settings(REPO / "configs" / "xiaopaw.toml")
    assert settings.strategies == ["bootstrap", "snapshot_restore", "truncate_last_n", "recall"]
    text = Host(settings).bootstrap_text(agent_role="Assistant")
    assert text.startswith("You are XiaoPaw, a work assistant in Feishu.")
    assert "- Position: product manager" in text
    assert "weekly reports give the summary first, then list the plans" in text
    assert "1. When you receive a file, save it to the sandbox first." in text
    assert "2. Before analysing data, confirm its format first." in text
    assert text.endswith(f"Today is {TODAY}.")


def test_the_docs_examples_are_valid_configs(doc_examples):
    for example in doc_examples("bootstrap"):
        settings = settings_from_dict(example, source="docs/strategies/bootstrap.md")
        assert "bootstrap" in settings.strategies


def test_a_system_prompt_made_of_parts_keeps_its_instructions():
    settings = settings_from_dict({"strategies": ["bootstrap"], "bootstrap": {"text": "PROFILE: tea."}})
    parts = [
        {"type": "text", "text": "You are XiaoPaw."},
        {"type": "text", "text": "Answer briefly.", "cache_control": {"type": "ephemeral"}},
    ]
    messages = [{"role": "system", "content": parts}, {"role": "user", "content": "hi"}]
    Host(settings, context_window=8000).manage(messages)
    Host(settings, context_window=8000).manage(messages)  # a second host: still once
    content = messages[0]["content"]
    assert content[:2] == parts  # the original instructions (and their cache marker) are kept
    assert [p["text"] for p in content[2:]] == [bootstrap_section("PROFILE: tea.")]


def test_an_anthropic_list_gets_the_text_in_its_first_user_turn_not_a_system_message():
    settings = settings_from_dict({"strategies": ["bootstrap"], "bootstrap": {"text": "PROFILE: tea."}})
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "look this up"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "found"}]},
    ]
    Host(settings, context_window=8000).manage(messages)
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[0]["content"][0] == {"type": "text", "text": bootstrap_section("PROFILE: tea.")}
    assert messages[0]["content"][1] == {"type": "text", "text": "look this up"}


def test_agents_not_listed_get_no_text_and_listed_ones_do():
    host = host_for({"text": "PROFILE for {agent_role}.", "agents": ["Writer"]})
    assert host.bootstrap_text(agent_role="Researcher") == ""
    assert "PROFILE for Writer." in host.bootstrap_text(agent_role="Writer")


def test_the_report_says_the_text_was_injected_with_its_tokens_and_files(tmp_path):
    (tmp_path / "a.md").write_text("Profile A.", encoding="utf-8")
    (tmp_path / "b.md").write_text("Profile B.", encoding="utf-8")
    config = tmp_path / "ctxlife.toml"
    config.write_text('strategies = ["bootstrap"]\n[bootstrap]\nfiles = ["a.md", "b.md"]\n', encoding="utf-8")
    messages = [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "hi"}]
    report = ctxlife.manage(messages, config=ctxlife.load_settings(config), context_window=8192)
    injected = [a for a in report.actions if a.strategy == "bootstrap" and a.what == "injected"]
    assert len(injected) == 1
    assert injected[0].details == {"tokens": ctxlife.TokenCounter().count_text("Profile A.\n\nProfile B."), "files": 2}
