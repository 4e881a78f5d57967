"""The model route's calls one by one: what the model is sent, what comes back, what each failure says.

test_routes.py runs the route through llm_summary; these call ``ctxlife.models`` directly (a real
openai client against the local endpoint of fake_endpoint.py, real HTTP).
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import threading
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ctxlife import models
from ctxlife.errors import CtxlifeError, MissingDependencyError
from ctxlife.integrations.crewai_calls import in_own_model_call
from ctxlife.models import (
    ContextLengthExceeded,
    ModelError,
    as_completion,
    configured_completion,
    model_api,
    model_route_problem,
    openai_completion,
    preload_client,
)

sys.path.insert(0, str(Path(__file__).parent))
from fake_endpoint import completion, error, serve, tool_call  # noqa: E402

ASK = [{"role": "user", "content": "Summarize."}]


@dataclass
class Table:
    """A ``[model]`` table as ``ctxlife.strategy.ModelSettings`` has it."""

    name: str | None = "m"
    base_url: str | None = None
    api_key_env: str = "CTXLIFE_TEST_MODEL_KEY"
    timeout_seconds: float = 10.0
    options: dict[str, Any] = field(default_factory=dict)


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


# --- as_completion: a function, a LangChain chat model, a CrewAI LLM ---------------------------------


def test_a_function_gets_the_messages_and_max_tokens_and_its_text_is_the_reply():
    seen = []

    def model(messages, max_tokens):
        seen.append((messages, max_tokens))
        return "Goal: done."

    complete = as_completion(model)
    assert complete(ASK, 77) == "Goal: done."
    assert seen == [(ASK, 77)]
    assert complete.__qualname__ == f"as_completion({model.__qualname__})"


def test_an_async_function_is_awaited_also_inside_a_running_event_loop():
    async def model(messages, max_tokens):
        await asyncio.sleep(0)
        return f"{messages[0]['content']} in {max_tokens}"

    complete = as_completion(model)
    assert complete(ASK, 5) == "Summarize. in 5"

    async def from_a_loop():
        return complete(ASK, 6)  # sync call from a thread that runs a loop: awaited in a thread of its own

    assert asyncio.run(from_a_loop()) == "Summarize. in 6"

    async def where(messages, max_tokens):
        worker = threading.current_thread()
        return f"{worker.name} daemon={worker.daemon}"

    async def where_from_a_loop():
        return as_completion(where)(ASK, 6)

    # a named daemon thread: a hung model never keeps the process from exiting
    assert asyncio.run(where_from_a_loop()) == "ctxlife-summary-async daemon=True"

    async def failing(messages, max_tokens):
        raise ValueError("the model broke")

    async def failing_from_a_loop():
        return as_completion(failing)(ASK, 6)

    with pytest.raises(ValueError, match="the model broke"):
        asyncio.run(failing_from_a_loop())


def test_a_reply_that_is_not_text_and_a_model_that_is_not_callable_are_refused_by_name():
    with pytest.raises(ModelError, match="summary_model returned int, not text"):
        as_completion(lambda messages, max_tokens: 42)(ASK, 5)
    with pytest.raises(CtxlifeError, match="^summary_model is None; pass a function"):
        as_completion(None)
    with pytest.raises(CtxlifeError, match="got str") as refused:
        as_completion("gpt-4o-mini")
    assert not isinstance(refused.value, ModelError)


class ChatModel:
    """A LangChain chat model's surface: ``invoke``/``ainvoke``, ``bind``; replies with ``content``."""

    def __init__(self, content: object, *, bind_fails: bool = False) -> None:
        self.content, self.bind_fails = content, bind_fails
        self.bound: list[int] = []
        self.invoked: list[tuple[object, object]] = []

    def bind(self, *, max_tokens: int) -> ChatModel:
        if self.bind_fails:
            raise TypeError("no max_tokens here")
        self.bound.append(max_tokens)
        return self

    def invoke(self, messages: object) -> object:
        self.invoked.append((self, messages))
        return type("Reply", (), {"content": self.content})()

    async def ainvoke(self, messages: object) -> object:
        return self.invoke(messages)


def test_a_langchain_chat_model_is_bound_to_max_tokens_and_its_text_blocks_joined():
    chat = ChatModel("Goal: plain.")
    assert as_completion(chat)(ASK, 128) == "Goal: plain."
    assert chat.bound == [128] and chat.invoked == [(chat, ASK)]
    blocks = ChatModel(["Goal: ", {"type": "text", "text": "blocks."}, {"type": "image"}, 7])
    assert as_completion(blocks)(ASK, 9) == "Goal: blocks."
    unbound = ChatModel("Goal: as it is.", bind_fails=True)
    assert as_completion(unbound)(ASK, 9) == "Goal: as it is." and unbound.invoked == [(unbound, ASK)]
    with pytest.raises(ModelError, match="the chat model replied with dict, not text"):
        as_completion(ChatModel({"text": "x"}))(ASK, 9)


def test_a_chat_model_without_bind_is_invoked_as_it_is_and_a_plain_reply_is_the_text():
    class Plain:
        def __init__(self):
            self.invoked = []

        def invoke(self, messages):
            self.invoked.append(messages)
            return "Goal: a plain string."

        async def ainvoke(self, messages):
            return self.invoke(messages)

    plain = Plain()
    assert as_completion(plain)(ASK, 9) == "Goal: a plain string."
    assert plain.invoked == [ASK]


def test_a_model_with_invoke_but_no_ainvoke_is_called_as_a_function():
    class Tool:
        def invoke(self, messages):
            raise AssertionError("not a chat model")

        def __call__(self, messages, max_tokens):
            return "called"

    complete = as_completion(Tool())
    assert complete(ASK, 3) == "called"
    assert complete.__qualname__ == "as_completion(Tool)"  # an instance has no __qualname__: its type's name


def test_a_crewai_llm_is_called_as_ctxlifes_own_call():
    class LLM:
        def __init__(self):
            self.calls = []

        def supports_function_calling(self):
            return True

        def call(self, messages):
            self.calls.append((messages, in_own_model_call()))
            return "Goal: crew."

    llm = LLM()
    assert as_completion(llm)(ASK, 50) == "Goal: crew."
    assert llm.calls == [(ASK, True)] and not in_own_model_call()

    class NotAnLLM:
        def call(self, messages):
            raise AssertionError("no supports_function_calling: not a CrewAI LLM")

    with pytest.raises(CtxlifeError, match="got NotAnLLM"):
        as_completion(NotAnLLM())


# --- openai_completion: what the endpoint is sent, and each failure ---------------------------------


def test_the_endpoint_gets_model_messages_max_tokens_temperature_and_the_key(monkeypatch):
    monkeypatch.setenv("CTXLIFE_TEST_MODEL_KEY", "sk-test-123")
    with serve(completion("Goal: sent.")) as server:
        complete = openai_completion("m1", base_url=server["base_url"], api_key_env="CTXLIFE_TEST_MODEL_KEY")
        assert complete(ASK, 99) == "Goal: sent."
        body, headers = server["requests"][0], server["headers"][0]
    assert body == {"model": "m1", "messages": ASK, "max_tokens": 99, "temperature": 0.2}
    assert headers["authorization"] == "Bearer sk-test-123"
    assert complete.__qualname__ == "openai_completion('m1')"


def test_the_key_is_openais_own_variable_by_default_and_a_failed_call_is_not_retried(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-default-var")
    with serve(completion("ok")) as server:
        openai_completion("m", base_url=server["base_url"])(ASK, 10)
        assert server["headers"][0]["authorization"] == "Bearer sk-default-var"
    with serve(error(503, "overloaded")) as server:
        with pytest.raises(ModelError, match="HTTP 503"):
            openai_completion("m", base_url=server["base_url"])(ASK, 10)
        assert len(server["requests"]) == 1  # the strategy falls back at once instead


def test_no_key_sends_a_placeholder_no_temperature_is_not_sent_and_extra_body_is(monkeypatch):
    monkeypatch.delenv("CTXLIFE_TEST_MODEL_KEY", raising=False)
    with serve(completion("ok")) as server:
        complete = openai_completion(
            "m2",
            base_url=server["base_url"],
            api_key_env="CTXLIFE_TEST_MODEL_KEY",
            temperature=None,
            extra_body={"top_k": 5},
        )
        complete(ASK, 10)
        body, headers = server["requests"][0], server["headers"][0]
    assert body == {"model": "m2", "messages": ASK, "max_tokens": 10, "top_k": 5}
    assert headers["authorization"] == "Bearer ctxlife-no-key"


@pytest.mark.parametrize(
    "message, window",
    [
        ("This model's maximum context length is 2048 tokens", 2048),
        ("the request (5000 tokens) is over the available context size (n_ctx: 4096)", 4096),
        ("input is longer than the context window of 32768 tokens", 32768),
        ("the prompt exceeds the context", None),
    ],
)
def test_a_400_about_the_context_is_context_length_exceeded_with_the_window_it_names(message, window):
    with serve(error(400, message, None)) as server:  # no error code: the message alone says it
        complete = openai_completion("m", base_url=server["base_url"])
        with pytest.raises(ContextLengthExceeded) as refused:
            complete(ASK, 10)
    assert refused.value.window == window
    assert str(refused.value).startswith(f"model 'm' at {server['base_url']}: the prompt is over the model's window")


def test_each_other_failure_is_a_model_error_that_names_the_model_and_what_failed():
    cases = [
        (error(400, "temperature must be at most 2", "invalid_value"), "HTTP 400: "),
        (error(400, "the context of this request is invalid", None), "HTTP 400: "),
        (error(503, "overloaded"), "HTTP 503: "),
        (lambda body: (200, "<html>not json</html>", 0.0), ""),
        (lambda body: (200, '{"choices": []}', 0.0), "the reply has no choices"),
        (tool_call("lookup", {"q": 1}, "call_1"), "the reply has no text content"),
    ]
    for reply, says in cases:
        with serve(reply) as server:
            complete = openai_completion("m", base_url=server["base_url"])
            with pytest.raises(ModelError) as failed:
                complete(ASK, 10)
        assert type(failed.value) is ModelError, (says, failed.value)
        assert str(failed.value).startswith(f"model 'm' at {server['base_url']}: {says}")


def test_an_error_text_is_cut_to_300_characters_and_kept_in_the_message():
    long = "overloaded " + "x" * 1000
    for status, says in [(503, "HTTP 503: "), (400, "HTTP 400: "), (413, "HTTP 413: ")]:
        with serve(error(status, long, None)) as server:
            with pytest.raises(ModelError) as failed:
                openai_completion("m", base_url=server["base_url"])(ASK, 10)
        prefix = f"model 'm' at {server['base_url']}: {says}"
        text = str(failed.value)
        assert text.startswith(prefix) and len(text) == len(prefix) + 300 and "overloaded" in text
    with serve(error(400, f"the context length is 2048 tokens; {long}", None)) as server:
        with pytest.raises(ContextLengthExceeded) as over:
            openai_completion("m", base_url=server["base_url"])(ASK, 10)
    prefix = f"model 'm' at {server['base_url']}: the prompt is over the model's window: "
    assert str(over.value).startswith(prefix) and len(str(over.value)) == len(prefix) + 300


def test_a_body_that_is_not_json_names_the_parse_error():
    with serve(lambda body: (200, "<html>not json</html>", 0.0)) as server:
        with pytest.raises(ModelError) as failed:
            openai_completion("m", base_url=server["base_url"])(ASK, 10)
    assert str(failed.value) == (
        f"model 'm' at {server['base_url']}: JSONDecodeError: Expecting value: line 1 column 1 (char 0)"
    )


def test_a_reply_without_choices_is_quoted_up_to_200_characters():
    reply_id = "chatcmpl-" + "7" * 300
    with serve(lambda body: (200, json.dumps({"id": reply_id}), 0.0)) as server:
        with pytest.raises(ModelError) as failed:
            openai_completion("m", base_url=server["base_url"])(ASK, 10)
    head, quoted = str(failed.value).split(": the reply has no choices (", 1)
    assert head == f"model 'm' at {server['base_url']}"
    assert quoted.startswith(f"ChatCompletion(id='{reply_id[:40]}") and len(quoted) == 200 + len(")")


def test_a_server_that_is_down_or_silent_is_named_with_the_fix():
    url = closed_port_url()
    with pytest.raises(ModelError, match=r"cannot connect \(.*\); is the server running\?") as down:
        openai_completion("m", base_url=url)(ASK, 10)
    assert "Connection refused" in str(down.value)  # the cause, not the client's generic "Connection error."
    with serve(completion("late", delay=3.0)) as server:
        with pytest.raises(ModelError, match=r"no answer within 0.5 s"):
            openai_completion("m", base_url=server["base_url"], timeout=0.5)(ASK, 10)


def test_openai_completion_refuses_a_route_without_endpoint_or_client(monkeypatch):
    monkeypatch.delenv("CTXLIFE_TEST_MODEL_KEY", raising=False)
    with pytest.raises(ModelError, match="^\\[model\\] name 'm' has no endpoint: set \\[model\\] base_url") as refused:
        openai_completion("m", api_key_env="CTXLIFE_TEST_MODEL_KEY")
    assert not isinstance(refused.value, MissingDependencyError)
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(MissingDependencyError, match="pip install 'ctxlife\\[openai\\]'"):
        openai_completion("m", base_url="http://127.0.0.1:9/v1")


# --- the [model] table: its route, its options, what `ctxlife check` says ---------------------------


def test_the_model_table_takes_the_openai_route_with_a_base_url_or_without_crewai(monkeypatch):
    assert model_api(Table(name=None, base_url="http://x/v1")) is None
    assert model_api(Table(base_url="http://x/v1")) == "openai"
    monkeypatch.setitem(sys.modules, "crewai", None)
    assert model_api(Table()) == "openai"


def test_the_model_table_takes_the_crewai_route_when_crewai_is_installed_and_no_base_url(monkeypatch):
    pytest.importorskip("crewai")
    monkeypatch.delenv("CTXLIFE_TEST_MODEL_KEY", raising=False)
    assert model_api(Table()) == "crewai"
    assert model_route_problem(Table(), connect=True) is None  # crewai.LLM is not called by check


def test_the_tables_options_are_sent_temperature_and_extra_body_as_the_client_takes_them():
    with serve(completion("ok")) as server:
        table = Table(
            name="m3",
            base_url=server["base_url"],
            options={"temperature": 0.0, "extra_body": {"top_k": 3}, "seed": 7},
        )
        configured_completion(table)(ASK, 11)
        configured_completion(Table(name="m4", base_url=server["base_url"]))(ASK, 12)
        first, second = server["requests"]
    assert first == {"model": "m3", "messages": ASK, "max_tokens": 11, "temperature": 0.0, "top_k": 3, "seed": 7}
    assert second == {"model": "m4", "messages": ASK, "max_tokens": 12, "temperature": 0.2}


def test_the_tables_timeout_and_key_are_the_calls(monkeypatch):
    monkeypatch.setenv("CTXLIFE_TEST_MODEL_KEY", "sk-table")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-this-one")
    with serve(completion("ok")) as server:
        configured_completion(Table(base_url=server["base_url"]))(ASK, 10)
        assert server["headers"][0]["authorization"] == "Bearer sk-table"
    with serve(completion("late", delay=3.0)) as server:
        complete = configured_completion(Table(base_url=server["base_url"], timeout_seconds=0.5))
        with pytest.raises(ModelError, match="no answer within 0.5 s"):
            complete(ASK, 10)
        # ctxlife check's one call waits as long as a summary would
        silent = model_route_problem(Table(base_url=server["base_url"], timeout_seconds=0.5), connect=True)
    assert silent is not None and ": no answer within 0.5 s. Fix: start the server" in silent


def test_route_problems_name_the_fix(monkeypatch):
    monkeypatch.delenv("CTXLIFE_TEST_MODEL_KEY", raising=False)
    monkeypatch.setitem(sys.modules, "crewai", None)
    assert model_route_problem(Table(name=None)) is None
    no_endpoint = model_route_problem(Table())
    assert no_endpoint == (
        "[model] name 'm' has no endpoint: set [model] base_url (an OpenAI-compatible server, e.g. "
        '"http://127.0.0.1:8080/v1") or the environment variable CTXLIFE_TEST_MODEL_KEY for api.openai.com'
    )
    monkeypatch.setenv("CTXLIFE_TEST_MODEL_KEY", "sk-x")
    assert model_route_problem(Table()) is None  # the key is set: api.openai.com, not called without connect
    monkeypatch.setitem(sys.modules, "openai", None)
    assert model_route_problem(Table()) == (
        "[model] name 'm' is called through the openai client, which is not installed: pip install "
        "'ctxlife[openai]', or pip install 'ctxlife[crewai]' to call it through crewai.LLM"
    )
    assert model_route_problem(Table(base_url="http://127.0.0.1:9/v1")) == (
        "[model] name 'm' is called through the openai client, which is not installed: pip install 'ctxlife[openai]'"
    )


def test_an_openai_module_without_a_spec_counts_as_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "openai", types.ModuleType("openai"))  # find_spec raises ValueError
    assert model_route_problem(Table(base_url="http://127.0.0.1:9/v1")) == (
        "[model] name 'm' is called through the openai client, which is not installed: pip install 'ctxlife[openai]'"
    )


def test_check_with_connect_asks_the_endpoint_for_one_token_and_names_the_fix_when_it_fails(monkeypatch):
    with serve(completion("OK")) as server:
        assert model_route_problem(Table(base_url=server["base_url"]), connect=True) is None
        assert model_route_problem(Table(base_url=server["base_url"])) is None
        assert [(r["model"], r["max_tokens"], r["messages"]) for r in server["requests"]] == [
            ("m", 1, [{"role": "user", "content": "Reply with OK."}])
        ]
    url = closed_port_url()
    down = model_route_problem(Table(base_url=url), connect=True)
    assert down is not None and down.startswith(f"could not call the [model]: model 'm' at {url}: cannot connect")
    assert down.endswith(
        ". Fix: start the server, or correct [model] base_url or name (ctxlife check --no-connect skips this call)"
    )
    # no base_url: api.openai.com, here redirected by the client's own OPENAI_BASE_URL to a local 401
    monkeypatch.setitem(sys.modules, "crewai", None)
    monkeypatch.setenv("CTXLIFE_TEST_MODEL_KEY", "sk-wrong")
    with serve(error(401, "invalid api key", "invalid_api_key")) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server["base_url"])
        denied = model_route_problem(Table(), connect=True)
    assert denied is not None and "model 'm' at api.openai.com: HTTP 401" in denied
    assert denied.endswith(
        "Fix: check [model] name and the key in CTXLIFE_TEST_MODEL_KEY (ctxlife check --no-connect skips this call)"
    )


def test_check_with_connect_reports_an_openai_client_that_does_not_import(monkeypatch, tmp_path):
    broken = tmp_path / "openai"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise ImportError(\"No module named 'httpx'\")\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "openai")  # an install that is found but does not load
    problem = model_route_problem(Table(base_url="http://127.0.0.1:9/v1"), connect=True)
    assert problem == (
        "[model] name 'm' at http://127.0.0.1:9/v1: the openai client does not import (No module named 'httpx'); "
        "reinstall it: pip install -U 'ctxlife[openai]'"
    )
    monkeypatch.setitem(sys.modules, "crewai", None)
    monkeypatch.setenv("CTXLIFE_TEST_MODEL_KEY", "sk-x")
    assert model_route_problem(Table(), connect=True) == (
        "[model] name 'm' at api.openai.com: the openai client does not import (No module named 'httpx'); "
        "reinstall it: pip install -U 'ctxlife[openai]'"
    )


# --- preload_client ---------------------------------------------------------------------------------


def test_the_openai_client_is_preloaded_once_in_a_daemon_thread(monkeypatch):
    assert preload_client("crewai") is None
    assert preload_client("openai") is None  # already imported in this process
    monkeypatch.setattr(models, "_preloads", {})
    monkeypatch.delitem(sys.modules, "openai")
    thread = preload_client("openai")
    assert thread is not None and thread.daemon and thread.name == "ctxlife-import-openai"
    thread.join()
    assert "openai" in sys.modules and models._preloads == {"openai": thread}
    monkeypatch.delitem(sys.modules, "openai")
    assert preload_client("openai") is thread  # once per process: not started again
    monkeypatch.setitem(sys.modules, "openai", None)
    assert preload_client("openai") is None
