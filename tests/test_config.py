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
    path = write(tmp_path, 'strategies = ["truncate_last_n"]\nthreshold = 0.4\ncontext_window = 8000\nmodel = "gpt-4o"\n[truncate_last_n]\nrounds = 3\n')
    settings = ctxlife.load_settings(path)
    assert settings.strategies == ["truncate_last_n"] and settings.threshold == 0.4
    assert settings.context_window == 8000 and settings.model == "gpt-4o"
    assert settings.options_for("truncate_last_n").rounds == 3
    assert settings.source == str(path)
    assert settings.resolved()["truncate_last_n"] == {"rounds": 3, "always": False, "pin_first_user": True}


@pytest.mark.parametrize("name", ["default.toml", "example.toml", "demo.toml"])
def test_shipped_configs_are_valid(name):
    settings = load_settings(REPO / "configs" / name)
    assert settings.strategies


def test_pyproject_tool_table_and_default_search(tmp_path, monkeypatch):
    write(tmp_path, '[project]\nname = "x"\n[tool.ctxlife]\nthreshold = 0.3\n[tool.ctxlife.truncate_last_n]\nrounds = 4\n', "pyproject.toml")
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
        f"strategy 'truncate_last_n' option 'rounds' (in {path}): Input should be a valid integer, "
        "unable to parse string as an integer (got 'many')"
    )


def test_unknown_option_and_out_of_range_values(tmp_path):
    with pytest.raises(StrategyOptionsError, match="strategy 'truncate_last_n' has no option 'round'"):
        settings_from_dict({"truncate_last_n": {"round": 2}})
    with pytest.raises(StrategyOptionsError, match="option 'rounds' .*greater than or equal to 1 \\(got 0\\)"):
        settings_from_dict({"truncate_last_n": {"rounds": 0}})
    with pytest.raises(ConfigError, match="setting 'threshold' .*less than or equal to 1 \\(got 1.5\\)"):
        settings_from_dict({"threshold": 1.5})


def test_unknown_top_level_key_table_and_duplicates(tmp_path):
    with pytest.raises(ConfigError, match="unknown setting 'treshold'"):
        settings_from_dict({"treshold": 0.3})
    with pytest.raises(UnknownStrategyError, match=r"options table \[summary\] .*names no installed strategy; available: "):
        settings_from_dict({"summary": {"x": 1}})
    with pytest.raises(ConfigError, match="strategy 'truncate_last_n' is listed twice"):
        settings_from_dict({"strategies": ["truncate_last_n", "truncate_last_n"]})


def test_missing_file_and_pyproject_without_table(tmp_path):
    with pytest.raises(ConfigError, match="config file .*nope.toml does not exist"):
        load_settings(tmp_path / "nope.toml")
    path = write(tmp_path, '[project]\nname = "x"\n', "pyproject.toml")
    with pytest.raises(ConfigError, match=r"has no \[tool.ctxlife\] table"):
        load_settings(path)


def test_config_files_are_read_never_executed(tmp_path):
    marker = tmp_path / "pwned"
    path = write(tmp_path, f'model = "__import__(\'os\').system(\'touch {marker}\')"\n')
    settings = load_settings(path)
    assert settings.model.startswith("__import__") and not marker.exists()


def test_a_bad_environment_value_names_its_variable(monkeypatch):
    monkeypatch.setenv("CTXLIFE_TRUNCATE_LAST_N__ROUNDS", "many")
    with pytest.raises(StrategyOptionsError, match="option 'rounds' \\(from the environment variable CTXLIFE_TRUNCATE_LAST_N__ROUNDS\\)"):
        settings_from_dict({})
    monkeypatch.setenv("CTXLIFE_THRESHOLD", "high")
    with pytest.raises(ConfigError, match="setting 'threshold' \\(from the environment variable CTXLIFE_THRESHOLD\\)"):
        settings_from_dict({})
