"""A kit for testing strategies: a scripted offline LLM, message builders, a hook recorder.

Everything here is importable without CrewAI except :func:`scripted_llm`, which
builds a real ``crewai.llms.base_llm.BaseLLM`` subclass on first use::

    from ctxlife.testing import scripted_llm, react_action, react_final

    llm = scripted_llm([react_action("search", {"q": "x"}), react_final("done")])
    agent = Agent(role="r", goal="g", backstory="b", llm=llm, tools=[...])
    ...
    assert llm.calls[1][-1]["content"].startswith("Observation")  # what the model received

CrewAI's telemetry must be off before it is imported; :func:`offline_environment`
sets the variables.
"""

from __future__ import annotations

import copy
import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import ctxlife
from ctxlife.contexts import HookContext

OFFLINE_ENV = {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "OTEL_SDK_DISABLED": "true",
    "CREWAI_TRACING_ENABLED": "false",
    "CREWAI_DISABLE_TRACKING": "true",
    "CREWAI_DISABLE_VERSION_CHECK": "true",
}


def offline_environment() -> None:
    """Switch off CrewAI's telemetry, tracing and version check (call before importing crewai)."""
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)


# -- message builders -------------------------------------------------------------------


def system(content: str) -> dict[str, Any]:
    return {"role": "system", "content": content}


def user(content: str) -> dict[str, Any]:
    return {"role": "user", "content": content}


def assistant(content: str | None = None, tool_calls: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = list(tool_calls)
    return message


def tool_call(name: str, arguments: dict[str, Any] | None = None, call_id: str | None = None) -> dict[str, Any]:
    """An OpenAI-format tool call (also what the scripted LLM returns in native mode)."""
    return {
        "id": call_id or f"call_{name}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments or {})},
    }


def tool_result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def conversation(rounds: int, *, tools_per_round: int = 0, system_prompt: str = "You are a helpful agent.", result_size: int = 40) -> list[dict[str, Any]]:
    """A synthetic valid conversation: ``rounds`` user turns, each with tool units and an answer."""
    messages = [system(system_prompt)]
    for r in range(rounds):
        messages.append(user(f"Request {r}: please look up item R{r:04d}."))
        for t in range(tools_per_round):
            call = tool_call("lookup", {"item": f"R{r:04d}", "n": t}, call_id=f"call_{r}_{t}")
            messages.append(assistant(None, [call]))
            messages.append(tool_result(call["id"], f"item R{r:04d} part {t}: " + "data " * result_size))
        messages.append(assistant(f"Item R{r:04d} is in stock."))
    return messages


# -- ReAct text builders ----------------------------------------------------------------


def react_action(tool: str, arguments: dict[str, Any], thought: str = "I should use a tool.") -> str:
    """A ReAct step asking CrewAI to run ``tool``."""
    return f"Thought: {thought}\nAction: {tool}\nAction Input: {json.dumps(arguments)}"


def react_final(answer: str, thought: str = "I now know the final answer.") -> str:
    """A ReAct final answer."""
    return f"Thought: {thought}\nFinal Answer: {answer}"


# -- the scripted LLM -------------------------------------------------------------------

Reply = str | list[dict[str, Any]] | Callable[[list[dict[str, Any]]], Any]

_llm_class: type | None = None


def _build_llm_class() -> type:
    offline_environment()
    from crewai.llms.base_llm import BaseLLM
    from pydantic import PrivateAttr

    class ScriptedLLM(BaseLLM):
        """An offline CrewAI LLM that replies from a script and records what it receives.

        ``replies`` are consumed in order, across agents and tasks: a string (ReAct
        text or a final answer), a list of :func:`tool_call` dicts (native tool
        calling), or a callable ``f(messages) -> reply``. When the script runs out,
        ``default`` is returned.
        """

        context_window: int = 8192
        native_tools: bool = False
        default: str = react_final("Done.")
        _script: list[Any] = PrivateAttr(default_factory=list)
        _calls: list[list[dict[str, Any]]] = PrivateAttr(default_factory=list)
        _lock: Any = PrivateAttr(default_factory=threading.Lock)

        def set_script(self, replies: Iterable[Reply]) -> None:
            self._script = list(replies)

        @property
        def calls(self) -> list[list[dict[str, Any]]]:
            """Deep copies of the message lists received, one per call."""
            return self._calls

        def call(
            self,
            messages: Any,
            tools: Any = None,
            callbacks: Any = None,
            available_functions: Any = None,
            from_task: Any = None,
            from_agent: Any = None,
            response_model: Any = None,
        ) -> Any:
            if isinstance(messages, str):
                messages = [{"role": "user", "content": messages}]
            with self._lock:
                self._calls.append(copy.deepcopy(list(messages)))
                reply: Any = self._script.pop(0) if self._script else self.default
            if callable(reply):
                reply = reply(messages)
            return copy.deepcopy(reply) if isinstance(reply, list) else reply

        async def acall(self, *args: Any, **kwargs: Any) -> Any:
            return self.call(*args, **kwargs)

        def supports_function_calling(self) -> bool:
            return self.native_tools

        def supports_stop_words(self) -> bool:
            return not self.native_tools

        def get_context_window_size(self) -> int:
            return self.context_window

        def get_input_tokens_count(self, messages: Any, tools: Any = None, response_model: Any = None) -> int:
            # CrewAI's own preflight estimate (four characters a token), without its per-call warning.
            if isinstance(messages, str):
                return (len(messages) + 3) // 4
            return (sum(len(str(m.get("content") or "")) for m in messages) + 3) // 4

    return ScriptedLLM


def scripted_llm(
    replies: Iterable[Reply] = (),
    *,
    model: str = "scripted-offline",
    context_window: int = 8192,
    native_tools: bool = False,
    default: str | None = None,
) -> Any:
    """A CrewAI LLM that answers from ``replies`` offline and records every call in ``.calls``."""
    global _llm_class
    if _llm_class is None:
        _llm_class = _build_llm_class()
    kwargs: dict[str, Any] = {"model": model, "context_window": context_window, "native_tools": native_tools}
    if default is not None:
        kwargs["default"] = default
    llm = _llm_class(**kwargs)
    llm.set_script(replies)
    return llm


# -- hook recorder ----------------------------------------------------------------------


@dataclass
class HookCall:
    """One recorded hook call: which hook, and a snapshot of the context's public fields."""

    hook: str
    ctx: HookContext
    snapshot: dict[str, Any] = field(default_factory=dict)


class HookRecorder:
    """A plugin implementing all six hooks that records every call (pass it in ``plugins=``)."""

    name = "recorder"

    def __init__(self) -> None:
        self.calls: list[HookCall] = []
        self._lock = threading.Lock()

    def _record(self, hook: str, ctx: HookContext) -> None:
        snapshot = {k: copy.deepcopy(v) for k, v in vars(ctx).items() if not k.startswith("_") and k not in {"tokens", "complete", "actions", "state"}}
        with self._lock:
            self.calls.append(HookCall(hook, ctx, snapshot))

    def hooks(self) -> list[str]:
        """The hook names called, in order."""
        return [c.hook for c in self.calls]

    def of(self, hook: str) -> list[HookCall]:
        return [c for c in self.calls if c.hook == hook]

    @ctxlife.hookimpl
    def ctxlife_bootstrap(self, ctx: Any) -> None:
        self._record("ctxlife_bootstrap", ctx)

    @ctxlife.hookimpl
    def ctxlife_before_llm_call(self, ctx: Any) -> None:
        self._record("ctxlife_before_llm_call", ctx)

    @ctxlife.hookimpl
    def ctxlife_before_tool_call(self, ctx: Any) -> None:
        self._record("ctxlife_before_tool_call", ctx)

    @ctxlife.hookimpl
    def ctxlife_after_tool_call(self, ctx: Any) -> None:
        self._record("ctxlife_after_tool_call", ctx)

    @ctxlife.hookimpl
    def ctxlife_task_start(self, ctx: Any) -> None:
        self._record("ctxlife_task_start", ctx)

    @ctxlife.hookimpl
    def ctxlife_task_end(self, ctx: Any) -> None:
        self._record("ctxlife_task_end", ctx)


@contextmanager
def installed_strategy(strategy_cls: type[ctxlife.Strategy[Any]]) -> Iterator[type[ctxlife.Strategy[Any]]]:
    """Make ``strategy_cls`` findable by name in configs for the duration of a block.

    It is registered in the process-wide strategy registry ahead of installed packages,
    and what was there before is restored afterwards, so a test can write
    ``strategies = ["mine"]`` in a config.
    """
    from ctxlife.plugins import registry

    with registry().registered(strategy_cls.name, strategy_cls):
        yield strategy_cls


def synthetic_session(calls: int = 300, *, seed: int = 7, result_rows: int = 12) -> list[dict[str, Any]]:
    """A long, valid agent session with realistic tool output and facts worth keeping.

    About ``calls`` model calls: a user turn every few steps, native tool calls whose JSON
    results carry order codes, amounts, dates, emails and file paths, and assistant replies
    that refer back to earlier facts. Deterministic for a given ``seed``.
    """
    import random

    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [system("You are an operations agent. Use the tools; answer precisely.")]
    n_calls = 0
    turn = 0
    while n_calls < calls:
        customer = f"cust_{rng.randint(1000, 9999)}"
        order = f"ORD-{rng.randint(10000, 99999)}"
        messages.append(user(f"Turn {turn}: customer {customer} asks about order {order}; check stock and the invoice."))
        for step in range(rng.randint(1, 4)):
            if n_calls >= calls:
                break
            call_id = f"call_{turn}_{step}"
            name = rng.choice(["get_order", "search_inventory", "read_log", "get_invoice"])
            call = tool_call(name, {"order_id": order, "page": step}, call_id=call_id)
            messages.append(assistant(None, [call]))
            n_calls += 1
            rows = [
                {
                    "sku": f"SKU-{rng.randint(100, 999)}",
                    "qty": rng.randint(1, 50),
                    "price": f"${rng.randint(5, 500)}.{rng.randint(0, 99):02d}",
                    "updated": f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                    "note": "warehouse " + " ".join(rng.choice(["north", "south", "east", "west", "dock", "bay"]) for _ in range(6)),
                }
                for _ in range(rng.randint(result_rows // 2, result_rows))
            ]
            result = {"order_id": order, "customer": customer, "contact": f"{customer}@example.com", "invoice": f"/data/invoices/{order}.pdf", "rows": rows}
            messages.append(tool_result(call_id, json.dumps(result)))
        messages.append(assistant(f"Order {order} for {customer}: checked; invoice at /data/invoices/{order}.pdf."))
        n_calls += 1
        turn += 1
    return messages


# -- a throw-away redis-server ----------------------------------------------------------


def redis_server_binary() -> str | None:
    """Path of ``redis-server`` (Debian's package installs it in /usr/bin), or None."""
    import shutil

    found = shutil.which("redis-server")
    if found:
        return found
    return "/usr/bin/redis-server" if os.access("/usr/bin/redis-server", os.X_OK) else None


@contextmanager
def redis_server(workdir: Any, *extra_args: str, tries: int = 3) -> Iterator[str]:
    """Run a real ``redis-server`` on a free 127.0.0.1 port for a block; yields its URL.

    No persistence unless ``extra_args`` ask for it. Raises RuntimeError (with the end of the
    server's log) if it cannot be started, FileNotFoundError if the binary is absent.
    """
    import socket
    import subprocess
    import time
    from pathlib import Path

    import redis

    binary = redis_server_binary()
    if binary is None:
        raise FileNotFoundError("redis-server is not installed: apt-get install redis-server")
    workdir = Path(workdir)
    last_log = ""
    for _ in range(tries):  # the free port can be taken between probing and binding
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        log_file = workdir / f"redis-{port}.log"
        args = ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(workdir),
                "--logfile", str(log_file), "--daemonize", "no", *extra_args]
        proc = subprocess.Popen([binary, *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1)
        deadline = time.monotonic() + 10
        ready = False
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                ready = bool(client.ping())
                break
            except redis.RedisError:
                time.sleep(0.02)
        client.close()
        if ready:
            try:
                yield f"redis://127.0.0.1:{port}/0"
            finally:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            return
        proc.kill()
        proc.wait()
        last_log = log_file.read_text(errors="replace")[-2000:] if log_file.exists() else ""
    raise RuntimeError(f"redis-server did not answer PING on a free port after {tries} tries; log:\n{last_log}")
