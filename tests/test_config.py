from __future__ import annotations

import re
from pathlib import Path

import pytest

import ctxlife
from ctxlife.config import load_settings, settings_from_dict
from ctxlife.errors import ConfigError, StrategyOptionsError, UnknownStrategyError

REPO = Path(__file__).resolve().parents[1]


def write(tmp_path: Path, text: str, name: str = "ctxlife.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_issue_shape_loads(tmp_path):
    path = write(
        tmp_path,
        'strategies = ["truncate_last_n"]\nthreshold = 0.4\ncontext_window = 8000\nagent_model = "gpt-4o"\n'
        "[truncate_last_n]\nrounds = 3\n",
    )
    settings = ctxlife.load_settings(path)
    assert settings.strategies == ["truncate_last_n"] and settings.threshold == 0.4
    assert settings.context_window == 8000 and settings.agent_model == "gpt-4o"
    assert settings.options_for("truncate_last_n").rounds == 3
    assert settings.source == str(path)
    assert settings.resolved()["truncate_last_n"] == {"rounds": 3, "always": False, "pin_first_user": True}


@pytest.mark.parametrize("name", ["default.toml", "example.toml", "demo.toml"])
def test_shipped_configs_are_valid(name):
    settings = load_settings(REPO / "configs" / name)
    assert settings.strategies


def test_pyproject_tool_table_and_default_search(tmp_path, monkeypatch):
    write(
        tmp_path,
        '[project]\nname = "x"\n[tool.ctxlife]\nthreshold = 0.3\n[tool.ctxlife.truncate_last_n]\nrounds = 4\n',
        "pyproject.toml",
    )
    monkeypatch.chdir(tmp_path)
    settings = load_settings()
    assert settings.threshold == 0.3 and settings.options_for("truncate_last_n").rounds == 4
    write(tmp_path, "threshold = 0.2\n")  # ./ctxlife.toml wins over pyproject.toml
    assert load_settings().threshold == 0.2


def test_built_in_defaults_without_any_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = load_settings()
    assert settings.source == "built-in defaults"
    assert settings.strategies == ["truncate_last_n"] and settings.threshold == 0.4


def test_environment_overrides_file_values(tmp_path, monkeypatch):
    path = write(tmp_path, "threshold = 0.4\n[truncate_last_n]\nrounds = 2\npin_first_user = false\n")
    monkeypatch.setenv("CTXLIFE_THRESHOLD", "0.5")
    monkeypatch.setenv("CTXLIFE_TRUNCATE_LAST_N__ROUNDS", "3")
    settings = load_settings(path)
    assert settings.threshold == 0.5
    options = settings.options_for("truncate_last_n")
    assert options.rounds == 3 and options.pin_first_user is False  # the file's other keys survive


def test_malformed_toml_names_file_and_line(tmp_path):
    path = write(tmp_path, 'strategies = ["truncate_last_n"]\nthreshold = \n')
    with pytest.raises(ConfigError, match=rf"malformed TOML in {re.escape(str(path))}: line 2, column 13:"):
        load_settings(path)


def test_unknown_strategy_lists_available_names_and_sources(tmp_path):
    path = write(tmp_path, 'strategies = ["truncate_last_m"]\n')
    with pytest.raises(UnknownStrategyError) as info:
        load_settings(path)
    message = str(info.value)
    assert f"unknown strategy 'truncate_last_m' in 'strategies' (in {path})" in message
    assert "truncate_last_n (ctxlife 0.1.0)" in message


def test_wrong_option_type_names_strategy_key_and_type(tmp_path):
    path = write(tmp_path, '[truncate_last_n]\nrounds = "many"\n')
    with pytest.raises(StrategyOptionsError) as info:
        load_settings(path)
    assert str(info.value) == (
        f"strategy 'truncate_last_n' option 'rounds' (in {path}): Value error, expected a number, got the text 'many'"
    )


def test_unknown_option_and_out_of_range_values(tmp_path):
    with pytest.raises(StrategyOptionsError, match="strategy 'truncate_last_n' has no option 'round'"):
        settings_from_dict({"truncate_last_n": {"round": 2}})
    with pytest.raises(StrategyOptionsError, match="option 'rounds' .*greater than or equal to 1 \\(got 0\\)"):
        settings_from_dict({"truncate_last_n": {"rounds": 0}})
    with pytest.raises(ConfigError, match="setting 'threshold' .*less than or equal to 1 \\(got 1.5\\)"):
        settings_from_dict({"threshold": 1.5})


def test_unknown_top_level_key_table_and_duplicates(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown setting 'treshold' .*\(did you mean 'threshold'\?\)"):
        settings_from_dict({"treshold": 0.3})
    with pytest.raises(
        UnknownStrategyError,
        match=r"options table \[summary\] .*names no installed strategy \(did you mean 'llm_summary'\?\); available: ",
    ):
        settings_from_dict({"summary": {"x": 1}})
    with pytest.raises(
        UnknownStrategyError, match=r"options table \[zzz\] \(in a dict\) names no installed strategy; "
    ):
        settings_from_dict({"zzz": {"x": 1}})  # nothing close: no suggestion
    with pytest.raises(ConfigError, match="strategy 'truncate_last_n' is listed twice"):
        settings_from_dict({"strategies": ["truncate_last_n", "truncate_last_n"]})


def test_every_error_of_a_file_is_reported_at_once_with_the_names_it_meant(tmp_path):
    path = write(
        tmp_path,
        'strategies = ["llm_sumary", "truncate_last_n"]\nthreshhold = 0.5\n'
        "[truncate_last_n]\nround = 3\n[tool_ouptut]\nmax_tokens = 100\n",
    )
    with pytest.raises(UnknownStrategyError) as raised:
        load_settings(path)
    lines = str(raised.value).splitlines()
    assert lines[0] == f"4 problems in the config (in {path}):"
    assert lines[1].startswith("  - unknown strategy 'llm_sumary' in 'strategies' (in ")
    assert "(did you mean 'llm_summary'?)" in lines[1]
    assert "unknown setting 'threshhold'" in lines[2] and "(did you mean 'threshold'?)" in lines[2]
    assert lines[3] == f"  - strategy 'truncate_last_n' has no option 'round' (in {path}) (did you mean 'rounds'?)"
    assert "options table [tool_ouptut]" in lines[4] and "(did you mean 'tool_output'?)" in lines[4]
    assert len(lines) == 5


def test_missing_file_and_pyproject_without_table(tmp_path):
    with pytest.raises(ConfigError, match="config file .*nope.toml does not exist"):
        load_settings(tmp_path / "nope.toml")
    path = write(tmp_path, '[project]\nname = "x"\n', "pyproject.toml")
    with pytest.raises(ConfigError, match=r"has no \[tool.ctxlife\] table"):
        load_settings(path)


def test_config_files_are_read_never_executed(tmp_path):
    marker = tmp_path / "pwned"
    path = write(tmp_path, f"agent_model = \"__import__('os').system('touch {marker}')\"\n")
    settings = load_settings(path)
    assert str(settings.agent_model).startswith("__import__") and not marker.exists()


def test_a_bad_environment_value_names_its_variable(monkeypatch):
    monkeypatch.setenv("CTXLIFE_TRUNCATE_LAST_N__ROUNDS", "many")
    with pytest.raises(
        StrategyOptionsError,
        match="option 'rounds' \\(from the environment variable CTXLIFE_TRUNCATE_LAST_N__ROUNDS\\)",
    ):
        settings_from_dict({})
    monkeypatch.setenv("CTXLIFE_THRESHOLD", "high")
    with pytest.raises(ConfigError, match="setting 'threshold' \\(from the environment variable CTXLIFE_THRESHOLD\\)"):
        settings_from_dict({})


# -- issue 13: every bad value a clear error at the edge -------------------------------------------


@pytest.mark.parametrize(
    "toml, fragment",
    [
        (
            "[truncate_last_n]\nrounds = true\n",
            "option 'rounds' (in {path}): Value error, expected a number, got the boolean true",
        ),
        ('[truncate_last_n]\nrounds = "3"\n', "expected a number, got the text '3'; write it without quotes"),
        ("threshold = true\n", "setting 'threshold' (in {path}): Value error, expected a number, got the boolean true"),
        (
            'context_window = "128000"\n',
            "setting 'context_window' (in {path}): Value error, expected a number, got the text '128000'; "
            "write it without quotes",
        ),
        ("context_window = nan\n", "setting 'context_window' (in {path}): Input should be a finite number"),
        ("context_window = -1\n", "setting 'context_window' (in {path}): Input should be greater than 0"),
        ("context_window = 8000.0\n", "expected a whole number of tokens, got 8000.0; write 8000"),
        (
            "log_content = 1\n",
            "setting 'log_content' (in {path}): Value error, expected true or false, got the number 1",
        ),
    ],
)
def test_strict_scalars_in_a_file(tmp_path, toml, fragment):
    path = write(tmp_path, toml)
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert fragment.format(path=path) in str(info.value)


@pytest.mark.parametrize(
    "toml, fragment",
    [
        (
            'threshold = 0.3\nstrategies = ["llm_summary"]\n[llm_summary]\ntarget = 0.5\n',
            "option 'target' (0.5) must be below the threshold (0.3) (in {path}, table [llm_summary], key 'target'; "
            "threshold in {path}, key 'threshold')",
        ),
        (
            'strategies = ["llm_summary"]\n[llm_summary]\nthreshold = 0.1\ntarget = 0.2\n',
            "strategy 'llm_summary' has no option 'threshold' (in {path}): "
            "llm_summary compacts above the top-level threshold",
        ),
        (
            'strategies = ["llm_summary"]\n[llm_summary]\nsummarizer = "nope"\n',
            "option 'summarizer' (in {path}, table [llm_summary], key 'summarizer'): "
            "unknown summarizer 'nope'; available: extractive",
        ),
    ],
)
def test_cross_field_errors_name_the_file_table_and_key(tmp_path, toml, fragment):
    path = write(tmp_path, toml)
    with pytest.raises(ConfigError) as info:
        ctxlife.Host(load_settings(path), context_window=8000)
    assert fragment.format(path=path) in str(info.value)


def test_cross_field_errors_name_the_environment_variable(tmp_path, monkeypatch):
    path = write(tmp_path, 'threshold = 0.3\nstrategies = ["llm_summary"]\n')
    monkeypatch.setenv("CTXLIFE_LLM_SUMMARY__TARGET", "0.9")
    with pytest.raises(StrategyOptionsError) as info:
        ctxlife.Host(load_settings(path), context_window=8000)
    assert "(from the environment variable CTXLIFE_LLM_SUMMARY__TARGET; threshold in" in str(info.value)


def test_a_bad_strategy_variable_is_blamed_on_the_variable_not_the_file(tmp_path, monkeypatch):
    path = write(tmp_path, 'strategies = ["truncate_last_n"]\n')
    monkeypatch.setenv("CTXLIFE_TRUNCATE_LAST_N__ROUNDS", "true")
    with pytest.raises(StrategyOptionsError) as info:
        load_settings(path)
    assert str(info.value) == (
        "strategy 'truncate_last_n' option 'rounds' (from the environment variable CTXLIFE_TRUNCATE_LAST_N__ROUNDS): "
        "Value error, expected a number, got the boolean true"
    )
    monkeypatch.delenv("CTXLIFE_TRUNCATE_LAST_N__ROUNDS")
    monkeypatch.setenv("CTXLIFE_TRUNCATE_LAST__ROUNDS", "3")  # a typo in the strategy's name
    with pytest.raises(UnknownStrategyError) as info:
        load_settings(path)
    assert "options table [truncate_last] (from the environment variable CTXLIFE_TRUNCATE_LAST__ROUNDS)" in str(
        info.value
    )
    assert str(path) not in str(info.value)


def test_strategies_from_the_environment_must_be_a_json_list(monkeypatch):
    monkeypatch.setenv("CTXLIFE_STRATEGIES", "truncate_last_n")
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert str(info.value) == (
        "environment variable CTXLIFE_STRATEGIES='truncate_last_n': the value must be a JSON list, "
        """e.g. CTXLIFE_STRATEGIES='["truncate_last_n"]'"""
    )
    monkeypatch.setenv("CTXLIFE_STRATEGIES", '["truncate_last_n", "nope"]')
    with pytest.raises(
        UnknownStrategyError,
        match=r"unknown strategy 'nope' in 'strategies' \(from the environment variable CTXLIFE_STRATEGIES\)",
    ):
        load_settings()


def test_the_cli_says_it_in_one_line_not_a_traceback(tmp_path):
    import os
    import subprocess
    import sys

    config = write(tmp_path, "threshold = 0.4\n")
    env = {**os.environ, "CTXLIFE_STRATEGIES": "truncate_last_n"}
    cli = [sys.executable, "-m", "ctxlife.cli"]
    out = subprocess.run(
        [*cli, "check", str(config)], capture_output=True, text=True, env=env, cwd=tmp_path, check=False
    )
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        "ctxlife check: error: environment variable CTXLIFE_STRATEGIES='truncate_last_n': "
        "the value must be a JSON list, "
        """e.g. CTXLIFE_STRATEGIES='["truncate_last_n"]'"""
    ]


def test_environment_values_are_typed(monkeypatch):
    for key, value in {
        "CTXLIFE_THRESHOLD": "0.5",
        "CTXLIFE_CONTEXT_WINDOW": "8000",
        "CTXLIFE_LOG_CONTENT": "true",
        "CTXLIFE_AGENT_MODEL": "123",
        "CTXLIFE_SESSION_ID": "007",
    }.items():
        monkeypatch.setenv(key, value)
    settings = load_settings()
    assert (settings.threshold, settings.context_window, settings.log_content) == (0.5, 8000, True)
    assert settings.agent_model == "123" and settings.session_id == "007"  # text settings stay text
    monkeypatch.setenv("CTXLIFE_CONTEXT_WINDOW", "lots")
    with pytest.raises(
        ConfigError,
        match=r"setting 'context_window' \(from the environment variable CTXLIFE_CONTEXT_WINDOW\): "
        r"Value error, expected a number, got the text 'lots'$",
    ):
        load_settings()


@pytest.mark.parametrize(
    "window, message",
    [
        (
            "128000",
            "context_window must be a positive whole number of tokens, got the text '128000'; "
            "pass the number itself: context_window=128000",
        ),
        (float("nan"), "context_window must be a positive whole number of tokens, got nan (float)"),
        (-5, "context_window must be a positive number of tokens, got -5"),
        (True, "context_window must be a positive whole number of tokens, got True (bool)"),
        (8000.0, "context_window must be a positive whole number of tokens, got 8000.0 (float); pass 8000"),
        ([8000], "context_window must be a positive whole number of tokens, got [8000] (list)"),
    ],
)
def test_context_window_arguments_are_checked_at_the_edge(window, message):
    for call in (
        lambda: ctxlife.manage([{"role": "user", "content": "hi"}], context_window=window),
        lambda: ctxlife.Host(settings_from_dict({}), context_window=window),
        lambda: ctxlife.Host(settings_from_dict({})).manage([{"role": "user", "content": "hi"}], context_window=window),
    ):
        with pytest.raises(ConfigError) as info:
            call()
        assert str(info.value) == message


def test_manage_names_the_fix_when_config_is_a_dict():
    import ctxlife

    with pytest.raises(ctxlife.ConfigError, match="settings_from_dict"):
        ctxlife.manage([{"role": "user", "content": "hi"}], config={"strategies": ["truncate_last_n"]})


def test_the_model_table_is_one_for_every_strategy_and_typed(tmp_path, monkeypatch):
    path = write(
        tmp_path,
        'strategies = ["llm_summary", "task_scope"]\n[model]\nname = "m"\nbase_url = "http://127.0.0.1:9/v1"\n'
        'timeout_seconds = 5\n[task_scope]\nsummarizer = "llm"\n',
    )
    settings = load_settings(path)
    shared = settings.shared()
    assert (shared.model.name, shared.model.base_url, shared.model.timeout_seconds) == ("m", "http://127.0.0.1:9/v1", 5)
    assert shared.origin("model", "name") == f"in {path}, table [model], key 'name'"
    assert settings.resolved()["model"]["name"] == "m"
    monkeypatch.setenv("CTXLIFE_MODEL__TIMEOUT_SECONDS", "7")
    assert load_settings(path).model.timeout_seconds == 7.0  # typed as JSON, like a strategy's options
    assert load_settings(path).source_of("model", "timeout_seconds") == (
        "from the environment variable CTXLIFE_MODEL__TIMEOUT_SECONDS"
    )


@pytest.mark.parametrize(
    "toml, fragment",
    [
        (
            'model = "gpt-4o"\n',
            "setting 'model' (in {path}): Value error, expected the [model] table (the model ctxlife calls), got the "
            "text 'gpt-4o': for the agent's model (the tokenizer) write agent_model = 'gpt-4o'",
        ),
        ("[model]\nnam = 'm'\n", "table [model] has no key 'nam' (in {path}) (did you mean 'name'?)"),
        (
            "[model]\ntimeout_seconds = '5'\n",
            "table [model] key 'timeout_seconds' (in {path}): Value error, expected a number, got the text '5'; "
            "write it without quotes",
        ),
        (
            'strategies = ["llm_summary"]\n[llm_summary]\nmodel = "m"\n',
            "strategy 'llm_summary' has no option 'model' (in {path}): it moved to the [model] table, shared by every "
            "strategy that calls a model: write name there",
        ),
        (
            'strategies = ["llm_summary"]\n[llm_summary]\nbase_url = "http://127.0.0.1:9/v1"\n',
            "strategy 'llm_summary' has no option 'base_url' (in {path}): it moved to the [model] table",
        ),
        (
            'strategies = ["llm_summary"]\n[llm_summary]\nsummarizer_context_window = 2048\n',
            "has no option 'summarizer_context_window' (in {path}): it moved to the [model] table, shared by every "
            "strategy that calls a model: write context_window there",
        ),
        (
            'strategies = ["recall"]\n[recall]\nmin_score = 2.0\n',
            "strategy 'recall' has no option 'min_score' (in {path}): it is fixed (see docs/strategies/recall.md)",
        ),
    ],
)
def test_the_model_table_and_retired_options_say_what_to_write(tmp_path, toml, fragment):
    path = write(tmp_path, toml)
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert fragment.format(path=path) in str(info.value)


def test_a_model_environment_variable_names_the_table_and_agent_model(monkeypatch):
    monkeypatch.setenv("CTXLIFE_MODEL", "gpt-4o")
    with pytest.raises(
        ConfigError,
        match=r"CTXLIFE_MODEL='gpt-4o': \[model\] is a table; set one key \(e.g. "
        r"CTXLIFE_MODEL__NAME\) or, for the agent's model \(the tokenizer\), CTXLIFE_AGENT_MODEL",
    ):
        load_settings()
