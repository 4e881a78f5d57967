"""Behaviour the mutation run (docs/mutation/core.md) showed no test checked: config precedence, store URL
resolution, the bootstrap section in a prompt that already holds the text.

Each test names the user-visible promise; the mutants it kills are listed in docs/mutation/core.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from ctxlife.config import find_default_config, load_settings, resolve_store_url, settings_from_dict
from ctxlife.errors import ConfigError, StoreError
from ctxlife.host import Host
from ctxlife.messages import (
    BOOTSTRAP_START,
    OPENAI,
    apply_bootstrap,
    bootstrap_section,
    calls_of,
    content_text,
    current_turn_index,
    inserted_kind,
    inserted_text,
    is_user_turn,
    last_user_index,
    mark_inserted,
    pair_tool_calls,
    pair_tool_results,
    round_starts,
    split_units,
    strip_summary_marker,
    tool_results_by_call,
    validate,
)
from ctxlife.sessions import SessionStore, open_store
from ctxlife.sessions.file import FileStore
from ctxlife.sessions.keeper import Keeper
from ctxlife.sessions.recording import Recorder
from ctxlife.sessions.records import ADD, REMOVE, REPLACE, Event, RawRecord
from ctxlife.testing import assistant, user
from delegating_store import DelegatingStore

# -- which store a config names -----------------------------------------------------------------


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


# -- tool calls and their results, in every format ----------------------------------------------------


def _openai_call(cid: str, name: str, arguments: str) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_calls_of_reads_id_name_and_arguments_in_every_format():
    openai = {
        "role": "assistant",
        "content": None,
        "tool_calls": [_openai_call("c1", "lookup", '{"q": 1}'), _openai_call("c2", "search", "")],
    }
    legacy = {"role": "assistant", "content": None, "function_call": {"name": "old", "arguments": {"b": 2, "a": 1}}}
    anthropic = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "let me look"},
            {"type": "tool_use", "id": "toolu_1", "name": "fetch", "input": {"x": "y"}},
        ],
    }
    assert [(c.id, c.name, c.arguments) for c in calls_of(openai)] == [
        ("c1", "lookup", '{"q": 1}'),
        ("c2", "search", ""),
    ]
    assert [(c.id, c.name, c.arguments) for c in calls_of(legacy)] == [(None, "old", '{"a": 1, "b": 2}')]
    assert [(c.id, c.name, c.arguments) for c in calls_of(anthropic)] == [("toolu_1", "fetch", '{"x": "y"}')]
    assert calls_of({"role": "user", "content": "hi", "tool_calls": [_openai_call("c9", "x", "")]}) == []
    # A malformed entry still counts as a call (it must be answered), with an empty name.
    odd = {"role": "assistant", "content": None, "tool_calls": ["not a dict", {"id": "c3", "function": "nope"}]}
    assert [(c.id, c.name, c.arguments) for c in calls_of(odd)] == [(None, "", ""), ("c3", "", "")]


def test_results_are_paired_with_their_calls_by_id_and_orphans_are_named():
    messages = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [_openai_call("c1", "a", "{}"), _openai_call("c2", "b", "{}")],
        },
        {"role": "tool", "tool_call_id": "c2", "content": "result b"},
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "result a"}]},
        {"role": "tool", "tool_call_id": "zz", "content": "nobody asked"},
        {"role": "assistant", "content": "done"},
    ]
    pairs, orphans = pair_tool_calls(messages)
    assert pairs == {(1, 0): 3, (1, 1): 2}
    assert orphans == {4}
    assert tool_results_by_call(messages) == {(1, 0): "result a", (1, 1): "result b"}
    anthropic = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t1", "name": "a", "input": {}},
                {"type": "tool_use", "id": "t2", "name": "b", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t2", "content": "B"},
                {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "A"}]},
            ],
        },
    ]
    assert pair_tool_calls(anthropic) == ({(1, 0): 2, (1, 1): 2}, set())
    assert tool_results_by_call(anthropic) == {(1, 0): "A", (1, 1): "B"}


def test_a_result_answering_another_id_is_a_problem_naming_both_ids():
    openai = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [_openai_call("c1", "a", "{}")]},
        {"role": "tool", "tool_call_id": "zz", "content": "one"},
    ]
    anthropic = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "a", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "zz", "content": "one"}]},
    ]
    for messages, call_id in ((openai, "c1"), (anthropic, "t1")):
        problems = [p for p in validate(messages) if p.code == "tool_result_id_mismatch"]
        assert problems, validate(messages)
        assert "answers 'zz'" in problems[0].detail and repr([call_id]) in problems[0].detail


# -- the question being worked on ------------------------------------------------------------------------


def test_the_current_turn_is_the_last_user_message_that_does_not_repeat():
    prompt = "Analyze the tool result."
    messages = [
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "second question"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": prompt},
        {"role": "assistant", "content": "c"},
        {"role": "user", "content": [{"type": "text", "text": prompt}]},  # the same prompt, as parts
    ]
    assert current_turn_index(messages) == 2
    every_one_repeats = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": "y"},
        {"role": "user", "content": "x"},
    ]
    assert current_turn_index(every_one_repeats) == 2
    image = [{"type": "image_url", "image_url": {"url": "data:,"}}]
    two_images = [
        {"role": "user", "content": image},
        {"role": "assistant", "content": "y"},
        {"role": "user", "content": list(image)},
    ]
    assert current_turn_index(two_images) == 2  # media turns never count as repeats of each other
    assert current_turn_index([{"role": "assistant", "content": "y"}]) is None


# -- where the bootstrap section goes -------------------------------------------------------------------


def test_the_bootstrap_section_opens_the_first_user_turn_where_a_system_message_is_not_allowed():
    anthropic = [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "yo"}]},
    ]
    assert apply_bootstrap(anthropic, "RULES", fmt="anthropic") is True
    assert anthropic[0]["role"] == "user" and content_text(anthropic[0]).startswith(bootstrap_section("RULES"))
    openai = [{"role": "user", "content": "hi"}]
    assert apply_bootstrap(openai, "RULES") is True
    assert openai[0]["role"] == "system" and openai[0]["content"] == bootstrap_section("RULES")


def test_a_section_in_a_list_of_parts_is_replaced_in_place():
    messages = [{"role": "system", "content": [{"type": "text", "text": "App."}]}, {"role": "user", "content": "hi"}]
    assert apply_bootstrap(messages, "v1") is True
    assert apply_bootstrap(messages, "v1") is False
    assert apply_bootstrap(messages, "v2") is True
    parts = messages[0]["content"]
    assert [p["text"] for p in parts] == ["App.", bootstrap_section("v2")]


def test_only_the_first_user_turn_keeps_a_bootstrap_section():
    section = bootstrap_section("RULES")
    messages = [
        {"role": "user", "content": "first"},
        {"role": "user", "content": section + "\n\nsecond (restored with an old section)"},
        {"role": "assistant", "content": "ok"},
    ]
    assert apply_bootstrap(messages, "RULES", system_prompt=False) is True
    assert content_text(messages[0]).startswith(section)
    assert BOOTSTRAP_START not in content_text(messages[1]) and "second" in content_text(messages[1])


def test_summary_markers_are_stripped_wherever_they_are():
    assert strip_summary_marker(None) == ""
    assert strip_summary_marker("") == ""
    assert strip_summary_marker("History summary: History summary: the user asked.") == "the user asked."
    out = strip_summary_marker("Earlier: History summary: nested. Then more.")
    assert " ".join(out.split()) == "Earlier: nested. Then more."  # the marker gone, nothing put in its place


# -- bootstrap's options ---------------------------------------------------------------------------------


def test_empty_bootstrap_files_say_so(tmp_path):
    (tmp_path / "empty.md").write_text("   \n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        settings_from_dict({"strategies": ["bootstrap"], "bootstrap": {"files": [str(tmp_path / "empty.md")]}})
        Host(settings_from_dict({"strategies": ["bootstrap"], "bootstrap": {"files": [str(tmp_path / "empty.md")]}}))
    assert str(info.value).endswith("set text and/or files in its [bootstrap] table (the files are empty)")
    with pytest.raises(ConfigError) as info:
        Host(settings_from_dict({"strategies": ["bootstrap"], "bootstrap": {}}))
    assert str(info.value).endswith("set text and/or files in its [bootstrap] table")


def test_a_store_url_without_a_path_or_of_another_scheme_is_left_alone():
    assert resolve_store_url("file://?ttl=1h", Path("/base")) == "file://?ttl=1h"
    assert resolve_store_url("custom:///relative", Path("/base")) == "custom:///relative"


def test_where_the_store_was_set_is_named_exactly(tmp_path, monkeypatch):
    config = tmp_path / "ctxlife.toml"
    config.write_text('store = "sqlite:///db.sqlite"\n', encoding="utf-8")
    monkeypatch.delenv("CTXLIFE_STORE", raising=False)
    assert load_settings(config).store_origin() == f"setting 'store' (in {config}, key 'store')"


# -- the bootstrap section in unusual prompts ------------------------------------------------------


def test_a_system_message_without_text_gets_the_section_as_its_text():
    for content in ("", None):
        messages = [{"role": "system", "content": content}, {"role": "user", "content": "hi"}]
        assert apply_bootstrap(messages, "RULES") is True
        assert messages[0]["content"] == bootstrap_section("RULES")


def test_a_cut_off_section_gets_a_whole_new_one():
    # a framework that truncated the prompt left the start marker without its end
    messages = [{"role": "system", "content": f"App.\n\n{BOOTSTRAP_START}\nRUL"}, {"role": "user", "content": "hi"}]
    assert apply_bootstrap(messages, "RULES") is True
    assert messages[0]["content"].endswith(bootstrap_section("RULES"))
    parts = [{"type": "text", "text": f"{BOOTSTRAP_START}\nRUL"}, {"type": "text", "text": "question"}]
    turns = [{"role": "user", "content": parts}, {"role": "assistant", "content": [{"type": "text", "text": "a"}]}]
    assert apply_bootstrap(turns, "RULES", fmt="anthropic") is True
    assert turns[0]["content"][0]["text"].startswith(bootstrap_section("RULES"))


def test_an_anthropic_list_without_a_system_message_gets_none():
    # recognised as Anthropic Messages by its tool_use block, with no format given
    messages = [
        {"role": "user", "content": "find it"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "search", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "found"}]},
    ]
    assert apply_bootstrap(messages, "RULES") is True
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert content_text(messages[0]).startswith(bootstrap_section("RULES"))


def test_removing_a_stale_section_from_a_later_turn_is_a_change():
    text = "House rules: be precise."
    messages = [
        {"role": "user", "content": f"{text}\nQuestion one"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": bootstrap_section(text) + "\n\nQuestion two"},
    ]
    assert apply_bootstrap(messages, text, system_prompt=False) is True
    assert messages[2]["content"] == "Question two"


def test_the_text_of_an_inserted_message_is_the_text_without_its_mark():
    marked = mark_inserted({"role": "user", "content": "History summary: the user asked."}, "summary")
    assert content_text(marked) != "History summary: the user asked."
    assert inserted_text(content_text(marked)) == "History summary: the user asked."
    assert inserted_text("plain text -->") == "plain text -->"
    assert inserted_text("plain text") == "plain text"


def test_a_call_without_a_name_has_an_empty_name_in_every_format():
    legacy = {"role": "assistant", "content": None, "function_call": {"arguments": "{}"}}
    block = {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "input": {}}]}
    assert [c.name for c in calls_of(legacy)] == [""]
    assert [c.name for c in calls_of(block)] == [""]


def test_a_pairing_names_the_message_whose_calls_it_pairs():
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [_openai_call("c1", "search", "{}")]},
        {"role": "tool", "tool_call_id": "c1", "content": "found"},
    ]
    pairing = pair_tool_results(messages, 1)
    assert (pairing.call_index, pairing.end, pairing.results) == (1, 3, (0,))


def test_store_urls_resolve_against_the_root_folder_and_folders_ending_in_x():
    assert resolve_store_url("file://data", Path("/")) == "file:///data"
    assert resolve_store_url("sqlite:///db.sqlite", Path("/srv/BOX")) == "sqlite:////srv/BOX/db.sqlite"
    assert resolve_store_url("file://data?note=http://x", Path("/base")) == "file:///base/data?note=http://x"


def _tool_use(*ids: str) -> dict:
    return {"role": "assistant", "content": [{"type": "tool_use", "id": i, "name": "search", "input": {}} for i in ids]}


def test_a_window_opening_with_the_assistants_tool_use_still_pairs_it():
    window = [
        _tool_use("t1"),
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "found"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
    ]
    assert pair_tool_calls(window) == ({(0, 0): 1}, set())
    assert tool_results_by_call(window) == {(0, 0): "found"}


def test_a_text_block_beside_the_results_answers_no_call():
    messages = [
        {"role": "user", "content": "go"},
        _tool_use("t1", "t2"),
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "a"},
                {"type": "text", "text": "and also this"},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "x"}]},
    ]
    assert [p.code for p in validate(messages)] == ["tool_call_without_result"]


def test_a_tool_use_left_unanswered_ends_its_round_at_the_next_user_turn():
    messages = [
        {"role": "user", "content": "q1"},
        _tool_use("t1"),
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
    ]
    assert round_starts(messages) == [0, 2]


def test_a_window_opening_with_a_result_names_it_an_orphan():
    # the window was cut between a call and its result
    window = [
        {"role": "tool", "tool_call_id": "c0", "content": "late"},
        {"role": "user", "content": "next"},
        {"role": "assistant", "content": None, "tool_calls": [_openai_call("c1", "search", "{}")]},
        {"role": "tool", "tool_call_id": "c1", "content": "found"},
    ]
    assert pair_tool_calls(window) == ({(2, 0): 3}, {0})


def test_validate_names_an_unknown_message_and_a_late_system_message():
    [problem] = validate([{"role": "user", "content": "hi"}, "not a message"])
    assert (problem.index, problem.code) == (1, "unknown_format") and "not a message" in problem.detail
    late = [{"role": "user", "content": "hi"}, {"role": "system", "content": "rules"}]
    assert [(p.index, p.code, p.detail) for p in validate(late)] == [
        (1, "system_after_conversation", "system message after the conversation started")
    ]


def test_the_last_user_turn_and_the_current_one_when_every_turn_repeats():
    messages = [
        {"role": "user", "content": "continue"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "continue"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "continue"},
        {"role": "assistant", "content": "c"},
    ]
    assert last_user_index(messages) == 4
    assert last_user_index(messages[:1]) == 0
    assert last_user_index([{"role": "assistant", "content": "a"}]) is None
    assert current_turn_index(messages) == 4


def test_no_text_or_no_place_for_it_changes_nothing():
    messages = [{"role": "user", "content": "hi"}]
    assert apply_bootstrap(messages, "") is False and messages == [{"role": "user", "content": "hi"}]
    only_replies = [{"role": "assistant", "content": "hello"}]
    assert apply_bootstrap(only_replies, "RULES", system_prompt=False) is False
    assert only_replies == [{"role": "assistant", "content": "hello"}]


def test_a_system_message_ctxlife_inserted_stays_marked_as_such_when_re_rendered():
    messages = [{"role": "user", "content": "hi"}]
    assert apply_bootstrap(messages, "Today is 2099-01-01.") is True
    assert apply_bootstrap(messages, "Today is 2099-01-02.") is True
    assert inserted_kind(messages[0]) == "bootstrap"
    assert "2099-01-02" in content_text(messages[0]) and "2099-01-01" not in content_text(messages[0])
    assert messages[1] == {"role": "user", "content": "hi"}


# -- found by the mutation run of issue 26 (docs/mutation/core.md) ---------------------------------------


@pytest.mark.parametrize("system_prompt", [True, False])
def test_a_new_rendering_inside_the_old_one_still_replaces_it(system_prompt):
    """The text already in the prompt is ctxlife's own section, not the user's words: a shorter
    rendering contained in the old one replaces it."""
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    if system_prompt:
        messages.insert(0, {"role": "system", "content": "You are the app."})
    assert apply_bootstrap(messages, "Rules: be precise and brief.", system_prompt=system_prompt) is True
    assert apply_bootstrap(messages, "Rules: be precise", system_prompt=system_prompt) is True
    text = content_text(messages[0])
    assert bootstrap_section("Rules: be precise") in text and "brief" not in text


def test_a_system_message_marked_as_bootstrap_stays_marked_when_its_section_is_re_rendered():
    prompt = mark_inserted({"role": "system", "content": "Project notes."}, "bootstrap")
    messages = [prompt, {"role": "user", "content": "hi"}]
    assert apply_bootstrap(messages, "Today is 2099-01-01.") is True
    assert inserted_kind(messages[0]) == "bootstrap"
    assert bootstrap_section("Today is 2099-01-01.") in content_text(messages[0])


def test_an_openai_list_without_a_system_message_gets_one_for_the_section():
    messages = [{"role": "user", "content": "hi"}]
    assert apply_bootstrap(messages, "RULES", fmt=OPENAI) is True
    assert messages[0]["role"] == "system" and inserted_kind(messages[0]) == "bootstrap"
    assert messages[1] == {"role": "user", "content": "hi"}


def test_a_summary_ctxlife_made_a_user_message_is_no_user_turn():
    summary = mark_inserted({"role": "user", "content": "Earlier: the order shipped."}, "summary")
    assert is_user_turn(summary) is False
    assert last_user_index([{"role": "user", "content": "q"}, summary]) == 0


def test_user_turns_with_the_same_text_and_other_media_are_different_turns():
    def look(url):
        return {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": url}]}

    reply = {"role": "assistant", "content": "ok"}
    messages = [{"role": "user", "content": "q1"}, reply, look("a.png"), reply, look("b.png")]
    assert current_turn_index(messages) == 4


def test_a_call_left_unanswered_right_before_another_call_does_not_hide_it():
    messages = [
        {"role": "assistant", "content": None, "tool_calls": [_openai_call("c1", "a", "")]},
        {"role": "assistant", "content": None, "tool_calls": [_openai_call("c2", "b", "")]},
        {"role": "tool", "tool_call_id": "c2", "content": "done"},
    ]
    assert pair_tool_calls(messages) == ({(1, 0): 2}, set())


def test_units_keep_tool_results_with_their_call_only():
    unanswered = [{"role": "user", "content": "q"}, _tool_use("t1"), {"role": "user", "content": "q2"}]
    assert [(u.start, u.end) for u in split_units(unanswered)] == [(0, 1), (1, 2), (2, 3)]
    orphan = [{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "c9", "content": "x"}]
    assert [(u.start, u.end) for u in split_units(orphan)] == [(0, 1), (1, 2)]


def test_a_result_without_content_is_none_not_empty_text():
    messages = [
        {"role": "assistant", "content": None, "tool_calls": [_openai_call("c1", "a", "")]},
        {"role": "tool", "tool_call_id": "c1", "content": None},
    ]
    assert tool_results_by_call(messages) == {(0, 0): None}


def test_where_a_value_came_from_names_the_default_when_nothing_set_it():
    settings = settings_from_dict({"threshold": 0.7}, source="ctxlife.toml")
    assert settings.source_of(None, "threshold") == "in ctxlife.toml, key 'threshold'"
    assert settings.source_of(None, "model") == "the default of 'model'"
    assert settings.source_of("llm_summary", "target") == "the default of [llm_summary] 'target'"


def test_a_strategy_without_a_table_gets_its_default_options():
    settings = settings_from_dict({"strategies": []})
    options = settings.options_for("truncate_last_n")
    assert options is settings.options_for("truncate_last_n")  # built once
    assert options.model_dump() == type(options)().model_dump()


def test_a_message_with_a_lone_surrogate_can_be_marked_and_is_recognised():
    message = mark_inserted({"role": "user", "content": "broken text \ud800 from a tool"}, "summary")
    assert inserted_kind(message) == "summary"


def test_marking_again_replaces_the_mark_line():
    message = mark_inserted({"role": "user", "content": "Earlier: the order shipped."}, "summary")
    mark_inserted(message, "recall")
    assert inserted_kind(message) == "recall"
    assert message["content"].count("<!-- ctxlife:") == 1
    assert inserted_text(message["content"]) == "Earlier: the order shipped."


# -- found by the core's re-run of the recorder's files (issue 44, docs/mutation/core-recording.md) ----------


def test_a_message_removed_through_the_recorder_is_not_recorded_again_from_a_list_still_holding_it(
    tmp_path: Path,
) -> None:
    from structlog.testing import capture_logs

    from ctxlife.sessions import open_store
    from ctxlife.sessions.recording import Recorder

    with open_store(f"file://{tmp_path / 'sessions'}") as store:
        recorder = Recorder(store)
        listed = [
            {"role": "user", "content": "q1"},
            {"role": "assistant", "content": "my card is 4111"},
            {"role": "user", "content": "q2"},
        ]
        recorder.record("s", listed)
        assert [r.message["content"] for r in store.current("s", "")] == ["q1", "my card is 4111", "q2"]
        recorder.remove("s", [2])
        assert [r.message["content"] for r in store.current("s", "")] == ["q1", "q2"]
        with capture_logs() as events:
            recorder.record("s", [*listed, {"role": "assistant", "content": "r2"}])  # the caller's stale list
        assert [r.message["content"] for r in store.current("s", "")] == ["q1", "q2", "r2"]
        assert any(e["event"] == "ctxlife.removed_message_not_recorded" for e in events)


# -- the recorder after an outage, another writer, a restart (issue 44, the core-recording survivors) ------


def _contents(store: SessionStore, view: str = "") -> list[str]:
    """The view's current conversation as the store holds it: the contents of its messages."""
    return [r.message["content"] for r in store.current("s", view)]


class _Outage(DelegatingStore):
    """A real store whose writes fail (``"refused"``), whose reads fail as well (``"down"``), or whose
    write lands and is then reported failed (``"landed"``: a connection lost after the write). Counts
    the view reads (``read_slots``) a recorder makes."""

    def __init__(self, inner: SessionStore) -> None:
        super().__init__(inner)
        self.mode: str | None = None
        self.slot_reads = 0

    def append(self, session_id: str, messages: list[dict[str, Any]], **kwargs: Any) -> list[RawRecord]:
        if self.mode in ("refused", "down"):
            raise StoreError(f"{self.url}: append: No space left on device")
        records = self.inner.append(session_id, messages, **kwargs)
        if self.mode == "landed":
            raise StoreError(f"{self.url}: append: connection lost after the write was sent")
        return records

    def read_records(
        self, session_id: str, after_seq: int = 0, *, view: str | None = None, strict: bool = True
    ) -> list[RawRecord]:
        if self.mode == "down":
            raise StoreError(f"{self.url}: read_records: connection refused")
        return self.inner.read_records(session_id, after_seq, view=view, strict=strict)

    def read_slots(self, session_id: str, after_seq: int = 0, *, view: str | None = None) -> list[Any]:
        self.slot_reads += 1
        return self.inner.read_slots(session_id, after_seq, view=view)

    def read_view(self, session_id: str, view: str = "", *, messages_only: bool = False) -> Any:
        return self.inner.read_view(session_id, view, messages_only=messages_only)


@pytest.fixture
def files(tmp_path: Path) -> Iterator[FileStore]:
    """A file store (no fsync, for speed); a second ``FileStore`` on its folder is another process's."""
    store = FileStore(tmp_path / "sessions", fsync=False)
    yield store
    store.close()


def _written_again(tmp_path: Path, *messages: dict[str, Any]) -> None:
    """Another process deletes the session ``s`` and writes ``messages`` as a new one."""
    with FileStore(tmp_path / "sessions", fsync=False) as other:
        other.delete("s")
        other.append("s", list(messages))


def test_a_session_deleted_and_written_again_elsewhere_gets_the_callers_whole_conversation(
    files: FileStore, tmp_path: Path
) -> None:
    # Another process deleted the session and wrote a new one as long as this recorder's (or longer):
    # the head alone does not show it, the record this recorder wrote last does. Read anew, the
    # caller's conversation is new to the session, not a continuation of what it holds.
    recorder = Recorder(files)
    recorder.record("s", [user("q1"), assistant("r1")])
    _written_again(tmp_path, user("x1"), assistant("x2"), user("x3"))
    assert _contents(files) == ["x1", "x2", "x3"]  # the precondition: the head (3) is past this recorder's (2)
    with capture_logs() as events:
        recorder.record("s", [user("q1"), assistant("r1"), user("q2")])
    assert _contents(files) == ["x1", "x2", "x3", "q1", "r1", "q2"]
    started = [e for e in events if e["event"] == "ctxlife.session_started_again"]
    assert [(e["session_id"], e["view"]) for e in started] == [("s", "")]
    recorder.record("s", [user("q1"), assistant("r1"), user("q2"), assistant("r2")])
    assert _contents(files)[3:] == ["q1", "r1", "q2", "r2"]


def test_a_removal_from_a_list_never_removes_a_message_of_a_session_written_again_to_the_same_head(
    files: FileStore, tmp_path: Path
) -> None:
    # Another process deleted the session and wrote a new one exactly as long as this recorder's: the
    # conditional write cannot tell (the same head). The caller dropped its last reply; the message
    # now at that sequence number is the other writer's, and stays.
    recorder = Recorder(files)
    recorder.record("s", [user("q1"), assistant("r1"), user("q2"), assistant("r2")])
    _written_again(tmp_path, user("x1"), assistant("x2"), user("x3"), assistant("x4"))
    assert files.head("s") == 4  # the precondition: the head this recorder last wrote
    recorder.record("s", [user("q1"), assistant("r1"), user("q2")])
    assert _contents(files) == ["x1", "x2", "x3", "x4", "q1", "r1", "q2"]


def test_a_removal_by_number_after_the_session_was_written_again_to_the_same_head_acts_on_the_new_one(
    files: FileStore, tmp_path: Path
) -> None:
    # The caller removes the message it read as number 2 of the session as it is now (another process
    # deleted it and wrote it again, as long as before). The caller's next list, built from what it
    # read, is recorded against that session: the removed message is not written back, nothing twice.
    recorder = Recorder(files)
    recorder.record("s", [user("q1"), assistant("r1")])
    _written_again(tmp_path, user("x1"), assistant("x2"))
    assert files.head("s") == 2  # the precondition: the head this recorder last wrote
    recorder.remove("s", [2])
    assert _contents(files) == ["x1"]
    recorder.record("s", [user("x1"), assistant("x2"), user("q3")])
    assert _contents(files) == ["x1", "q3"]


def test_a_message_another_writer_removed_is_not_recorded_again_from_a_stale_list(files: FileStore) -> None:
    mine, theirs = Recorder(files), Recorder(files)
    mine.record("s", [user("q1"), assistant("my card is 4111"), user("q2")])
    theirs.remove("s", [2])  # another writer (a worker, `ctxlife session erase`) removed it
    assert _contents(files) == ["q1", "q2"]
    with capture_logs() as events:
        mine.record("s", [user("q1"), assistant("my card is 4111"), user("q2"), assistant("r2")])
    assert _contents(files) == ["q1", "q2", "r2"]
    dropped = [e for e in events if e["event"] == "ctxlife.removed_message_not_recorded"]
    assert [(e["session_id"], e["view"], e["messages"]) for e in dropped] == [("s", "", 1)]


def test_the_warning_for_a_removed_message_still_listed_names_its_view(files: FileStore) -> None:
    recorder = Recorder(files)
    listed = [user("q1"), assistant("my card is 4111")]
    recorder.record("s", listed, view="agent")
    recorder.remove("s", [2], view="agent")
    with capture_logs() as events:
        recorder.record("s", [*listed, user("q2")], view="agent")
    assert _contents(files, "agent") == ["q1", "q2"]
    dropped = [e for e in events if e["event"] == "ctxlife.removed_message_not_recorded"]
    assert [(e["session_id"], e["view"]) for e in dropped] == [("s", "agent")]


def test_a_write_reported_failed_that_landed_leaves_nothing_waiting_once_found(files: FileStore) -> None:
    store = _Outage(files)
    recorder = Recorder(store)
    recorder.record("s", [user("q1")])
    store.mode = "landed"
    with pytest.raises(StoreError, match="connection lost"):
        recorder.record("s", [user("q1"), assistant("r1")])
    assert recorder.pending("s") == 1  # the precondition: the recorder cannot know it landed
    store.mode = None
    assert recorder.record("s", [user("q1"), assistant("r1")]) == []  # found in the store: nothing to write
    assert recorder.pending("s") == 0
    assert _contents(files) == ["q1", "r1"]


def test_the_first_messages_of_a_session_wait_cover_no_record_and_land_without_a_false_alarm(
    files: FileStore,
) -> None:
    store = _Outage(files)
    recorder = Recorder(store)
    store.mode = "refused"
    for listed in ([user("q1"), assistant("r1")], [user("q1"), assistant("r1"), user("q2")]):
        with pytest.raises(StoreError, match="No space left"):
            recorder.record("s", listed)
    assert recorder.pending("s") == 3
    # Nothing is stored yet: a snapshot of the list now must cover no record (its raw_length).
    assert recorder.covered("s") == 0
    store.mode = None
    with capture_logs() as events:
        recorder.record("s", [user("q1"), assistant("r1"), user("q2"), assistant("r2")])
    assert _contents(files) == ["q1", "r1", "q2", "r2"]
    assert recorder.pending("s") == 0 and recorder.covered("s") == 4
    # The store lost nothing and no one else wrote: no "head went back", no "started again".
    assert [e["event"] for e in events if e["log_level"] != "debug"] == []


def test_recording_while_the_store_cannot_be_read_either_fails_with_the_stores_error(files: FileStore) -> None:
    store = _Outage(files)
    recorder = Recorder(store)
    recorder.record("s", [user("q1")])
    store.mode = "down"
    with pytest.raises(StoreError, match="No space left"):
        recorder.record("s", [user("q1"), assistant("r1")])
    assert recorder.pending("s") == 1
    # Messages wait: the next call first looks whether the failed write landed; that read fails
    # too, and the error the caller gets is still the store's.
    with pytest.raises(StoreError, match="No space left"):
        recorder.record("s", [user("q1"), assistant("r1"), user("q2")])
    store.mode = None
    recorder.record("s", [user("q1"), assistant("r1"), user("q2")])
    assert _contents(files) == ["q1", "r1", "q2"]


def test_edits_after_learning_that_another_writer_wrote_reach_its_messages_too(files: FileStore) -> None:
    mine, theirs = Recorder(files), Recorder(files)
    mine.record("s", [user("q1")])
    mine.record("s", [user("w1")], view="w")
    theirs.record("s", [user("q1"), assistant("r1")])  # r1 at 3
    mine.record("s", [user("w1"), assistant("w2")], view="w")  # a conflict: mine learns the head moved
    assert [(r.op, r.target) for r in mine.remove("s", [1])] == [(REMOVE, 1)]  # its own message first
    assert [(r.op, r.target) for r in mine.remove("s", [3])] == [(REMOVE, 3)]  # then theirs
    assert _contents(files) == [] and _contents(files, "w") == ["w1", "w2"]


def test_a_message_another_writer_just_wrote_in_another_view_cannot_be_removed_from_this_one(
    files: FileStore,
) -> None:
    mine, theirs = Recorder(files), Recorder(files)
    mine.record("s", [user("q1")])
    theirs.record("s", [user("w1")], view="w")  # at 2, in view w; mine does not know of it yet
    with pytest.raises(StoreError, match=r"view '' has no message at sequence number\(s\) \[2\]"):
        mine.remove("s", [2])
    assert _contents(files) == ["q1"] and _contents(files, "w") == ["w1"]
    assert [r.op for r in files.read_records("s")] == [ADD, ADD]  # nothing written


@pytest.fixture
def sqlite(tmp_path: Path) -> Iterator[SessionStore]:
    """A SQLite store: its restore of a never-edited view hands the recorder slots and fingerprints
    (``read_view``), which the recorder keeps as they are until the view is used."""
    store = open_store(f"sqlite:///{tmp_path / 'sessions.db'}")
    yield store
    store.close()


def test_a_restored_view_sees_what_another_writer_added_to_it_after_a_write_in_another_view(
    sqlite: SessionStore,
) -> None:
    theirs = Recorder(sqlite)
    theirs.record("s", [user("q1")])
    theirs.record("s", [user("w1")], view="w")  # at 2: the session's head is past the view's last record
    keeper = Keeper(sqlite)
    assert keeper.restore("s", "w").plain  # the precondition: the view is primed with its slots (top 2)
    keeper.recorder.record("s", [user("q1"), assistant("r1")])  # at 3
    theirs.record("s", [user("w1"), assistant("w2")], view="w")  # at 4, after the restore
    keeper.recorder.record("s", [user("q1"), assistant("r1"), user("q2")])  # at 5
    keeper.recorder.record("s", [user("w1"), assistant("w2"), user("w3")], view="w")
    assert _contents(sqlite, "w") == ["w1", "w2", "w3"]
    assert _contents(sqlite) == ["q1", "r1", "q2"]
    keeper.recorder.remove("s", [4], view="w")  # theirs: known to this recorder by its slot
    assert _contents(sqlite, "w") == ["w1", "w3"]


def test_a_write_in_one_session_leaves_another_sessions_restored_view_to_be_read_again(
    sqlite: SessionStore,
) -> None:
    theirs = Recorder(sqlite)
    for sid in ("s", "t"):
        theirs.record(sid, [user(f"{sid}1")])
    keeper = Keeper(sqlite)
    assert keeper.restore("t").plain  # primed at 1, which is also s's head
    theirs.record("t", [user("t1"), assistant("t2")])  # t's head moves on: 2
    keeper.recorder.record("s", [user("s1"), assistant("s2")])  # s's head 1 -> 2
    keeper.recorder.record("t", [user("t1"), assistant("t2"), user("t3")])
    assert [r.message["content"] for r in sqlite.current("t", "")] == ["t1", "t2", "t3"]
    keeper.recorder.remove("t", [2])  # theirs: known to this recorder by its slot
    assert [r.message["content"] for r in sqlite.current("t", "")] == ["t1", "t3"]


def test_a_restored_view_is_not_read_again_after_a_write_in_another_view(sqlite: SessionStore) -> None:
    store = _Outage(sqlite)
    Recorder(sqlite).record("s", [user("w1")], view="w")
    keeper = Keeper(store)
    assert keeper.restore("s", "w").plain  # primed from the columns it read
    keeper.recorder.record("s", [user("q1")])  # its own write in another view: the head moves, no one else wrote
    reads = store.slot_reads
    keeper.recorder.record("s", [user("w1"), assistant("w2")], view="w")
    assert store.slot_reads == reads  # what moved the head was its own write: nothing to read again
    assert _contents(sqlite, "w") == ["w1", "w2"]


# The caller's list after an outage: what it held when the write was refused, then messages that
# repeat the end of what waits. Each message the caller sent is a record, repeats included (as
# without an outage: two equal messages at different places stay two records).
def _said(words: str) -> list[dict[str, Any]]:
    """q1, r1, then ``words``: ``done`` and ``r3`` are the assistant's, the others the user's."""
    return [user("q1"), assistant("r1")] + [assistant(w) if w in ("done", "r3") else user(w) for w in words.split()]


REPEATS_AFTER_AN_OUTAGE = {
    "the last two messages said again": ("yes done", "yes done yes done"),
    "the last message said again, then a reply": ("q2 go", "q2 go go r3"),
}


@pytest.mark.parametrize("name", list(REPEATS_AFTER_AN_OUTAGE))
def test_messages_repeating_the_waiting_ones_after_an_outage_are_recorded_too(files: FileStore, name: str) -> None:
    waiting, after = REPEATS_AFTER_AN_OUTAGE[name]
    store = _Outage(files)
    recorder = Recorder(store)
    recorder.record("s", _said(""))
    store.mode = "refused"
    with pytest.raises(StoreError, match="No space left"):
        recorder.record("s", _said(waiting))
    assert recorder.pending("s") == 2
    store.mode = None
    recorder.record("s", _said(after))
    assert _contents(files) == [m["content"] for m in _said(after)]


def test_a_waiting_message_is_recorded_once_after_a_removed_one_the_list_still_holds(files: FileStore) -> None:
    # Issue 44 (after_pending's overlap): the caller removed "gone" but its list still holds it, and
    # after an outage the list goes on with only the last of the waiting messages (a compaction evicted
    # "p1"). "gone" keeps the list from anchoring on a waiting message, so it anchors on "r1"; the new
    # messages after "r1" lose "gone" (not recorded again: removed) and start with the waiting "p2":
    # it is written once, after "p1", then "x".
    store = _Outage(files)
    keeper = Keeper(store)
    keeper.record_list("s", [user("q1"), assistant("r1")])
    keeper.record_list("s", [user("q1"), assistant("r1"), user("gone")])
    keeper.remove("s", [3])
    store.mode = "refused"
    with pytest.raises(StoreError, match="No space left"):
        keeper.record_list("s", [user("q1"), assistant("r1"), user("p1"), assistant("p2")])
    assert keeper.recorder.pending("s") == 2
    store.mode = None
    with capture_logs() as logs:
        keeper.record_list("s", [user("q1"), assistant("r1"), user("gone"), assistant("p2"), user("x")])
    assert _contents(files) == ["q1", "r1", "p1", "p2", "x"]
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["ctxlife.removed_message_not_recorded"]


@pytest.mark.parametrize("name", list(REPEATS_AFTER_AN_OUTAGE))
def test_messages_repeating_earlier_ones_are_recorded_when_no_write_fails(files: FileStore, name: str) -> None:
    recorder = Recorder(files)
    for words in ("", *REPEATS_AFTER_AN_OUTAGE[name]):
        recorder.record("s", _said(words))
    assert _contents(files) == [m["content"] for m in _said(REPEATS_AFTER_AN_OUTAGE[name][1])]


# -- the SQLite store's records that are not plain additions (issue 44, the core's re-run of the stores) ---


@pytest.mark.parametrize("view", ["", "w"])
def test_sqlite_edit_records_read_back_as_written(sqlite: SessionStore, view: str) -> None:
    # An edit, a removal and a message recorded in its JSON-safe form are read one by one (not by the
    # plain-addition fast path): each must come back as append_events returned it: its view, its time,
    # why it was quarantined, its token count and encoding (compaction and the window check use it).
    sqlite.append("s", [user("q1"), assistant("r1")], view=view)
    written = sqlite.append_events(
        "s",
        [
            Event(REPLACE, user("q1, edited"), 1),
            Event(REMOVE, {}, 2),
            Event(ADD, {"role": "user", "content": "a set", "extra": {1, 2}}, None),
            Event(REPLACE, {"role": "user", "content": "q1, a set", "extra": {3}}, 1),
        ],
        view=view,
    )
    assert [r.op for r in written] == [REPLACE, REMOVE, ADD, REPLACE]
    assert written[0].tokens is not None and written[0].token_encoding  # the precondition: counts were stored
    assert written[2].quarantined and written[3].quarantined and written[0].recorded_at is not None
    assert sqlite.read_records("s", 2, view=view) == written
    assert [r.view for r in sqlite.read_records("s", 2)] == [view] * 4


def test_sqlite_a_damaged_token_count_is_not_used(sqlite: SessionStore, tmp_path: Path) -> None:
    import sqlite3

    sqlite.append("s", [user("q1")])
    sqlite.append_events("s", [Event(REPLACE, user("q1, edited"), 1), Event(REPLACE, user("q1, again"), 1)])
    assert all(r.tokens is not None for r in sqlite.read_records("s", 1))  # the precondition
    with sqlite3.connect(tmp_path / "sessions.db") as conn:
        conn.execute("UPDATE ctxlife_raw SET tokens = -1 WHERE seq = 2")
        conn.execute("UPDATE ctxlife_raw SET token_encoding = NULL WHERE seq = 3")
    conn.close()
    # The count is made again from the message when it is needed, never taken from a damaged row.
    assert [(r.tokens, r.token_encoding) for r in sqlite.read_records("s", 1)] == [(None, None), (None, None)]


def test_a_skipped_record_is_logged_under_the_ctxlife_logger(
    files: FileStore, caplog: pytest.LogCaptureFixture
) -> None:
    # docs/getting-started.md: without a structlog configuration, events go to the standard-library
    # logger `ctxlife` (an application routes or silences ctxlife's events there).
    import logging

    import structlog

    files.append("s", [user("q1"), user("q2"), user("q3")])
    path = Path(files.directory) / "s_raw.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text(lines[0] + "garbage\n" + lines[2], encoding="utf-8")
    assert not structlog.is_configured()  # the precondition: events go to the standard library's logging
    with caplog.at_level(logging.ERROR, logger="ctxlife"):
        assert [r.message["content"] for r in files.read_records("s", strict=False)] == ["q1", "q3"]
    skipped = [r for r in caplog.records if "raw_record_skipped" in r.getMessage()]
    assert len(skipped) == 1
    assert skipped[0].name.split(".")[0] == "ctxlife" and skipped[0].levelno == logging.ERROR


# -- the text a model reads, the mark secrets (issue 44, the core's re-run of the messages' changed code) ---


def test_the_text_of_a_message_holds_its_words_its_calls_and_the_results_it_carries() -> None:
    # What the recall index searches and `ctxlife session show` / replay print (text_of).
    from ctxlife.messages import text_of

    openai = {
        "role": "assistant",
        "content": "Let me check.",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "find", "arguments": '{"q": "Zürich"}'}},
            {"id": "c2", "type": "function", "function": {"arguments": "{}"}},
        ],
    }
    assert text_of(openai) == 'Let me check.\nfind({"q": "Zürich"})\ntool({})'
    anthropic = {
        "role": "user",
        "content": [
            {"type": "tool_use", "id": "t1", "name": "book", "input": {"when": "Mo", "city": "Zürich"}},
            {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "booked"}]},
            {"type": "tool_result", "tool_use_id": "t2", "content": "room 12"},
        ],
    }
    # Arguments as JSON with sorted keys and their own characters: the same call reads the same.
    assert text_of(anthropic) == 'book({"city": "Zürich", "when": "Mo"})\nbooked\nroom 12'
    # Content lists may hold bare strings (LangChain's do), in a result too.
    mixed = {
        "role": "user",
        "content": [
            "Here:",
            {"type": "tool_result", "tool_use_id": "t3", "content": ["line 1", {"type": "text", "text": "line 2"}]},
        ],
    }
    assert text_of(mixed) == "Here:\nline 1\nline 2"
    legacy = {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": {1j: 2}}}
    assert text_of(legacy) == "f({1j: 2})"  # not JSON: as Python shows it


def test_mark_lines_are_stripped_wherever_they_are_and_other_text_is_left_alone() -> None:
    from ctxlife.messages import strip_inserted_marks

    marked = mark_inserted({"role": "user", "content": "Earlier: the order shipped."}, "recall")["content"]
    text = f"Before.\n{marked}\nAfter.\n{BOOTSTRAP_START}\nrules\n<!-- /ctxlife:bootstrap -->"
    assert strip_inserted_marks(text) == "Before.\nEarlier: the order shipped.\nAfter.\nrules"
    plain = "No marks here: <!-- an html comment -->"
    assert strip_inserted_marks(plain) is plain


class _Keeps:
    """A store's secret (``mark_key``, as the stores have it), made on the first ``create``."""

    def __init__(self, key: bytes | None = None, *, broken: bool = False) -> None:
        self.key, self.broken, self.asked = key, broken, []

    def mark_key(self, create: bool = False) -> bytes | None:
        self.asked.append(create)
        if self.broken:
            raise StoreError("the store is down")
        if self.key is None and create:
            self.key = bytes(range(32))
        return self.key


def test_mark_secrets_are_found_in_the_stores_known_and_reading_never_creates_one() -> None:
    from ctxlife.messages.inserted import MarkKeys

    keys = MarkKeys()
    secret = b"s" * 32
    kid = keys.key_id(secret)
    assert len(kid) == 10 and kid.isdigit()
    assert keys.find(kid) is None  # no store known
    empty, other_worker = _Keeps(), _Keeps()
    for store in (empty, other_worker, object()):  # an object without a secret is ignored
        keys.add_source(store)
    assert keys.find(kid) is None and empty.key is None  # looked up: no secret made by reading
    other_worker.key = secret  # another worker created the store's secret since
    assert keys.find(kid) == secret
    assert keys.find(keys.key_id(b"never seen" * 4)) is None
    own = keys.add(b"k" * 32)
    assert keys.find(own) == b"k" * 32  # known without a store


def test_marks_use_the_stores_secret_or_one_of_the_process_never_a_weaker_one() -> None:
    from ctxlife.messages.inserted import MarkKeys

    class Slotted:  # a store object without weak references: not registered, not an error
        __slots__ = ()

        def mark_key(self, create: bool = False) -> bytes | None:
            return None

    keys = MarkKeys()
    keys.add_source(Slotted())
    kid, key = keys.for_marking()  # outside any store: this process's secret
    assert len(key) == 32 and keys.for_marking() == (kid, key) and keys.find(kid) == key
    store = _Keeps()
    with keys.marking_with(store):
        assert keys.for_marking() == (keys.key_id(bytes(range(32))), bytes(range(32)))  # made on the first mark
    assert store.asked[0] is True
    with keys.marking_with(_Keeps(broken=True)):
        assert keys.for_marking() == (kid, key)  # the store cannot give it now: the process's
    assert keys.for_marking() == (kid, key)


# -- the [model] table's errors (issue 44, the core's re-run of config.py's changed functions) ------------


def _config_error(make: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        make()
    return str(caught.value)


def test_a_model_table_error_names_the_key_where_it_was_set_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def given(model: dict[str, Any]) -> str:
        return _config_error(lambda: settings_from_dict({"strategies": ["truncate_last_n"], "model": model}))

    assert given({"nmae": "gpt-4o"}) == "table [model] has no key 'nmae' (in a dict) (did you mean 'name'?)"
    assert given({"zzz": 1}) == (
        "table [model] has no key 'zzz' (in a dict); its keys are name, base_url, api_key_env, timeout_seconds, "
        "context_window, options"
    )
    config = tmp_path / "ctxlife.toml"
    config.write_text('strategies = ["truncate_last_n"]\n[model]\ntimeout_seconds = "30"\n', encoding="utf-8")
    in_file = _config_error(lambda: load_settings(config))
    assert in_file.startswith("table [model] key 'timeout_seconds' (in ") and in_file.endswith(
        ": Value error, expected a number, got the text '30'; write it without quotes"
    )
    # Set in the environment (a JSON string there): named as such, and no advice about quotes in a file.
    monkeypatch.setenv("CTXLIFE_MODEL__TIMEOUT_SECONDS", '"30"')
    assert _config_error(lambda: settings_from_dict({"strategies": ["truncate_last_n"]})) == (
        "table [model] key 'timeout_seconds' (from the environment variable CTXLIFE_MODEL__TIMEOUT_SECONDS): "
        "Value error, expected a number, got the text '30'"
    )


def test_a_model_key_left_unset_is_named_as_its_default() -> None:
    settings = settings_from_dict({"strategies": ["truncate_last_n"], "model": {"name": "gpt-4o"}})
    assert settings.source_of("model", "name") == "in a dict, table [model], key 'name'"
    assert settings.source_of("model", "timeout_seconds") == "the default of [model] 'timeout_seconds'"


def test_a_misspelled_name_close_to_two_known_ones_names_both() -> None:
    from ctxlife.config import did_you_mean

    assert did_you_mean("thresold", ["threshold", "thresholds", "window"]) == (
        " (did you mean 'threshold' or 'thresholds'?)"
    )
    assert did_you_mean("zzz", ["threshold"]) == ""
