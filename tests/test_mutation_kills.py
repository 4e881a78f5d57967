"""Behaviour the mutation run (docs/mutation.md) showed no test checked: config precedence, store URL
resolution, the bootstrap section in a prompt that already holds the text.

Each test names the user-visible promise; the mutants it kills are listed in docs/mutation.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxlife.config import find_default_config, load_settings, resolve_store_url, settings_from_dict
from ctxlife.messages import BOOTSTRAP_START, apply_bootstrap, bootstrap_section, content_text

# -- which store a config names -----------------------------------------------------------------


def test_the_top_level_store_wins_over_the_deprecated_snapshot_restore_store(tmp_path):
    settings = settings_from_dict(
        {
            "store": "sqlite:////data/top.db",
            "strategies": ["snapshot_restore"],
            "snapshot_restore": {"store": "file:///data/legacy"},
        }
    )
    assert settings.store_url() == "sqlite:////data/top.db"
    assert settings.store_configured
    assert settings.store_origin().startswith("setting 'store'")


def test_the_deprecated_store_is_used_only_when_the_top_level_one_is_unset():
    settings = settings_from_dict(
        {"strategies": ["snapshot_restore"], "snapshot_restore": {"store": "file:///data/legacy"}}
    )
    assert settings.store_url() == "file:///data/legacy"
    assert settings.store_configured
    assert settings.store_origin().startswith("strategy 'snapshot_restore' option 'store'")


def test_without_any_store_the_default_is_used_and_nothing_is_configured():
    settings = settings_from_dict({"strategies": ["truncate_last_n"]})
    assert settings.store_url() == "file://workspace/sessions"
    assert not settings.store_configured


def test_the_environment_store_wins_over_the_files(tmp_path, monkeypatch):
    config = tmp_path / "ctxlife.toml"
    config.write_text('store = "file://from-file"\n', encoding="utf-8")
    monkeypatch.setenv("CTXLIFE_STORE", "redis://127.0.0.1:6379/2")
    settings = load_settings(config)
    assert settings.store_url() == "redis://127.0.0.1:6379/2"
    assert "CTXLIFE_STORE" in settings.store_origin()


def test_a_relative_store_in_a_file_resolves_against_the_files_folder(tmp_path, monkeypatch):
    folder = tmp_path / "conf"
    folder.mkdir()
    (folder / "ctxlife.toml").write_text('store = "sqlite:///db/s.db?ttl=30d"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert load_settings(folder / "ctxlife.toml").store_url() == f"sqlite:///{folder.resolve()}/db/s.db?ttl=30d"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("file://sessions", "file:///base/sessions"),
        ("FILE://sessions?ttl=1h", "file:///base/sessions?ttl=1h"),
        ("sqlite:///s.db", "sqlite:////base/s.db"),
        ("file:///abs/sessions", "file:///abs/sessions"),
        ("sqlite:////abs/s.db", "sqlite:////abs/s.db"),
        ("sqlite:///:memory:", "sqlite:///:memory:"),
        ("file://~/sessions", "file://~/sessions"),
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("file://", "file://"),
    ],
)
def test_store_urls_resolve_only_relative_file_and_sqlite_paths(url, expected):
    assert resolve_store_url(url, Path("/base")) == expected
    assert resolve_store_url(url, None) == url


# -- which file is the config --------------------------------------------------------------------


def test_ctxlife_toml_wins_over_pyproject_and_a_pyproject_needs_its_table(tmp_path):
    assert find_default_config(tmp_path) is None
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n', encoding="utf-8")
    assert find_default_config(tmp_path) is None
    (tmp_path / "pyproject.toml").write_text("[tool.ctxlife]\nthreshold = 0.3\n", encoding="utf-8")
    assert find_default_config(tmp_path) == tmp_path / "pyproject.toml"
    (tmp_path / "ctxlife.toml").write_text("threshold = 0.2\n", encoding="utf-8")
    assert find_default_config(tmp_path) == tmp_path / "ctxlife.toml"


def test_a_malformed_pyproject_is_not_a_config(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.ctxlife\n", encoding="utf-8")
    assert find_default_config(tmp_path) is None


def test_an_environment_option_wins_over_the_files_table(tmp_path, monkeypatch):
    config = tmp_path / "ctxlife.toml"
    config.write_text('strategies = ["truncate_last_n"]\nthreshold = 0.3\n[truncate_last_n]\nrounds = 4\n')
    monkeypatch.setenv("CTXLIFE_TRUNCATE_LAST_N__ROUNDS", "7")
    monkeypatch.setenv("CTXLIFE_THRESHOLD", "0.6")
    settings = load_settings(config)
    assert settings.options_for("truncate_last_n").rounds == 7
    assert settings.threshold == 0.6
    assert (
        settings.source_of("truncate_last_n", "rounds")
        == "from the environment variable CTXLIFE_TRUNCATE_LAST_N__ROUNDS"
    )
    monkeypatch.delenv("CTXLIFE_TRUNCATE_LAST_N__ROUNDS")
    assert (
        load_settings(config).source_of("truncate_last_n", "rounds")
        == f"in {config}, table [truncate_last_n], key 'rounds'"
    )


# -- the bootstrap text in a prompt that already holds it ------------------------------------------


def test_a_system_prompt_that_already_holds_the_text_is_left_alone():
    text = "House rules: be precise."
    prompt = {"role": "system", "content": f"You are the app.\n{text}\nAnswer briefly."}
    messages = [prompt, {"role": "user", "content": "hi"}]
    assert apply_bootstrap(messages, text) is False
    assert messages[0] is prompt and content_text(messages[0]).count(text) == 1


def test_a_user_turn_that_already_holds_the_text_is_left_alone():
    text = "House rules: be precise."
    first = {"role": "user", "content": f"{text}\nQuestion one"}
    messages = [first, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "two"}]
    assert apply_bootstrap(messages, text, system_prompt=False) is False
    assert messages[0] is first and BOOTSTRAP_START not in content_text(messages[0])


def test_a_new_rendering_replaces_the_section_in_the_system_prompt():
    messages = [{"role": "system", "content": "You are the app."}, {"role": "user", "content": "hi"}]
    assert apply_bootstrap(messages, "Today is 2099-01-01.") is True
    assert apply_bootstrap(messages, "Today is 2099-01-01.") is False  # the same text: no change
    assert apply_bootstrap(messages, "Today is 2099-01-02.") is True
    assert messages[0]["content"] == "You are the app.\n\n" + bootstrap_section("Today is 2099-01-02.")
