"""Models for summaries: bring your own (a function, an OpenAI-compatible endpoint, the framework's model).

Every route ends as one ``complete(messages, max_tokens) -> str`` callable (:data:`Complete`) that a
strategy calls (``llm_summary`` from its summary thread, ``task_scope``'s ``"llm"`` summarizer). The
routes a user picks (``summary_model=``, the ``[model]`` table): docs/strategies/llm_summary.md,
"Summarizers", and docs/integrations.md, "Bring your own summary model". Here:

* :func:`as_completion` adapts a ``summary_model=`` (a function, sync or ``async``; a LangChain chat
  model's ``invoke``; a CrewAI LLM's ``call``); :func:`openai_completion` calls an OpenAI-compatible
  endpoint through the official ``openai`` client.
* :func:`model_api` says which route the ``[model]`` table takes (the openai client when ``base_url``
  is set or crewai is not installed, else ``crewai.LLM``, built by the strategy through
  ``ctxlife.completion_for_model``: only an adapter imports crewai); :func:`configured_completion`
  builds the openai one; :func:`model_route_problem` says why it cannot work (``ctxlife check``).
* :func:`preload_client` starts importing the openai client in a background thread when a strategy
  that will call it is built (the import takes seconds: never on the first compaction's clock).

Failures raise :class:`ModelError` (:class:`ContextLengthExceeded` when the endpoint says the prompt
is over its window): the strategy then falls back to the extractive summary, never to an overflow.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import os
import re
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from ctxlife.errors import CtxlifeError, MissingDependencyError
from ctxlife.integrations.crewai_calls import own_model_call

__all__ = [
    "AsyncComplete",
    "Complete",
    "ContextLengthExceeded",
    "ModelError",
    "as_completion",
    "configured_completion",
    "model_api",
    "model_route_problem",
    "openai_completion",
    "preload_client",
]

Complete = Callable[[list[dict[str, Any]], int], str]
"""``complete(messages, max_tokens) -> text``: one model call."""
AsyncComplete = Callable[[list[dict[str, Any]], int], Awaitable[str]]
"""``async complete(messages, max_tokens) -> text``."""


class _ModelTable(Protocol):
    """What this module reads of the config's ``[model]`` table (:class:`ctxlife.strategy.ModelSettings`,
    a layer above: this module does not import it)."""

    @property
    def name(self) -> str | None: ...
    @property
    def base_url(self) -> str | None: ...
    @property
    def api_key_env(self) -> str: ...
    @property
    def timeout_seconds(self) -> float: ...
    @property
    def options(self) -> dict[str, Any]: ...


#: Put where the endpoint needs no key (a local server) but the client insists on one.
_NO_KEY = "ctxlife-no-key"
#: The openai route gives up connecting after this long (a server that is down answers at once; a
#: black-holed address would otherwise take the whole timeout_seconds).
CONNECT_TIMEOUT_SECONDS = 5.0


class ModelError(CtxlifeError):
    """A summary model call failed (endpoint down, HTTP error, timeout, a reply that is not text)."""


class ContextLengthExceeded(ModelError):
    """The endpoint refused the prompt as longer than its context window (HTTP 400 context_length_exceeded).

    ``window`` is the window the endpoint named in its message ("maximum context length is 2048
    tokens"), None when it named none.
    """

    def __init__(self, message: str, *, window: int | None = None) -> None:
        super().__init__(message)
        self.window = window


_WINDOW_RE = re.compile(r"(?:context length|context size|context window|n_ctx)\D{0,40}?(\d{3,7})", re.IGNORECASE)


def _window_in(text: str) -> int | None:
    found = _WINDOW_RE.search(text)
    return int(found.group(1)) if found else None


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


_preloads: dict[str, threading.Thread] = {}
_preloads_lock = threading.Lock()


def _import_quietly(module: str) -> None:
    try:
        importlib.import_module(module)
    except Exception:  # noqa: BLE001 - the route's own import, when it is used, reports the failure
        pass


def preload_client(api: str) -> threading.Thread | None:
    """Start importing the client of route ``api`` in a daemon thread, once per process; the thread,
    or None when there is nothing to import (already imported, not installed, a route without one).

    Only ``"openai"``: ``import openai`` takes 1-20 s (a loaded machine), which the first compaction
    would otherwise wait for. A route's own import then waits for this one to finish (Python's
    import lock) instead of starting over. crewai is not preloaded: it expects the main thread.
    """
    if api != "openai" or "openai" in sys.modules or not _installed("openai"):
        return None
    with _preloads_lock:
        thread = _preloads.get("openai")
        if thread is None:
            thread = threading.Thread(
                target=_import_quietly, args=("openai",), name="ctxlife-import-openai", daemon=True
            )
            _preloads["openai"] = thread
            thread.start()
        return thread


def _run_coroutine(awaitable: Awaitable[str]) -> str:
    """Wait for ``awaitable`` from sync code, also when this thread already runs an event loop."""

    async def wait() -> str:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wait())
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = asyncio.run(wait())
        except BaseException as exc:  # noqa: BLE001 - handed back below
            box["error"] = exc

    worker = threading.Thread(target=run, name="ctxlife-summary-async", daemon=True)
    worker.start()
    worker.join()
    if "error" in box:
        raise box["error"]
    return str(box["value"])


def as_completion(model: object) -> Complete:
    """A sync :data:`Complete` over ``model``.

    ``model`` is a function ``(messages, max_tokens) -> str`` or ``async`` function returning
    ``str``; a LangChain chat model (anything with ``invoke``/``ainvoke`` taking messages, as
    LangChain's ``SummarizationMiddleware`` takes); or a CrewAI ``LLM`` (``call``). Messages are
    OpenAI chat dicts. A reply that is not text raises :class:`ModelError`.
    """
    if model is None:
        raise CtxlifeError("summary_model is None; pass a function (messages, max_tokens) -> str or a chat model")
    invoke = getattr(model, "invoke", None)
    if callable(invoke) and hasattr(model, "ainvoke"):
        return _langchain_completion(model)
    call = getattr(model, "call", None)
    if callable(call) and hasattr(model, "supports_function_calling"):
        return _crewai_completion(model)
    if not callable(model):
        raise CtxlifeError(
            f"summary_model must be a function (messages, max_tokens) -> str (sync or async), a LangChain chat "
            f"model or a CrewAI LLM; got {type(model).__name__}"
        )
    function: Callable[..., Any] = model

    def complete(messages: list[dict[str, Any]], max_tokens: int) -> str:
        reply = function(messages, max_tokens)
        if inspect.isawaitable(reply):
            reply = _run_coroutine(reply)
        if not isinstance(reply, str):
            raise ModelError(f"summary_model returned {type(reply).__name__}, not text")
        return reply

    complete.__qualname__ = f"as_completion({getattr(model, '__qualname__', type(model).__name__)})"
    return complete


def _text(content: object) -> str:
    """A chat model reply's text: a string, or the text blocks of a list of content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [b if isinstance(b, str) else b.get("text", "") for b in content if isinstance(b, (str, dict))]
        return "".join(p for p in parts if isinstance(p, str))
    raise ModelError(f"the chat model replied with {type(content).__name__}, not text")


def _langchain_completion(model: Any) -> Complete:
    """Over a LangChain chat model: it takes OpenAI-format dicts as they are; ``max_tokens`` is bound
    when the model supports ``bind(max_tokens=...)``."""

    def complete(messages: list[dict[str, Any]], max_tokens: int) -> str:
        bound = model
        bind = getattr(model, "bind", None)
        if callable(bind):
            try:
                bound = bind(max_tokens=max_tokens)
            except Exception:  # noqa: BLE001 - a model without the parameter: call it as it is
                bound = model
        reply = bound.invoke(messages)
        return _text(getattr(reply, "content", reply))

    return complete


def _crewai_completion(llm: Any) -> Complete:
    """Over a CrewAI ``LLM`` (``call(messages)``; CrewAI sets ``max_tokens`` on the LLM itself).

    The call is ctxlife's own: never managed again, and CrewAI prints no error panel for a failure
    that the strategy handles (see :func:`ctxlife.integrations.crewai.own_model_call`)."""

    def complete(messages: list[dict[str, Any]], max_tokens: int) -> str:
        with own_model_call():
            return _text(llm.call(messages))

    return complete


def openai_completion(
    model: str,
    *,
    base_url: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    timeout: float = 60.0,
    temperature: float | None = 0.2,
    extra_body: dict[str, Any] | None = None,
) -> Complete:
    """A :data:`Complete` over an OpenAI-compatible chat completions endpoint (the official client).

    ``base_url`` is the endpoint (``http://127.0.0.1:8080/v1`` for a local server; None: OpenAI);
    the key is read from the environment variable ``api_key_env`` at each call (a local endpoint
    may have none). No retries (the strategy falls back instead); ``max_tokens`` is sent with each
    call. Needs ``pip install 'ctxlife[openai]'``.
    """
    problem = _openai_problem(model, base_url, api_key_env)
    if problem is not None:
        if not _installed("openai"):
            raise MissingDependencyError(problem)
        raise ModelError(problem)
    # lazy: the openai extra (ctxlife[openai]) loads only when this route is used
    import openai

    def client() -> openai.OpenAI:
        return openai.OpenAI(
            base_url=base_url,
            api_key=os.environ.get(api_key_env) or _NO_KEY,
            # openai.Timeout is the Timeout of the HTTP client this openai version uses (httpx's in
            # openai 1-2, httpx2's in openai 3): never import either client directly (undeclared).
            timeout=openai.Timeout(timeout, connect=min(CONNECT_TIMEOUT_SECONDS, timeout)),
            max_retries=0,
        )

    made = client()
    _ = made.chat.completions  # the client builds its resources lazily: do it now, not in a timed call
    options: dict[str, Any] = {}
    if temperature is not None:
        options["temperature"] = temperature
    if extra_body:
        options["extra_body"] = extra_body

    def complete(messages: list[dict[str, Any]], max_tokens: int) -> str:
        where = f"model {model!r} at {base_url or 'api.openai.com'}"
        try:
            response = made.chat.completions.create(
                model=model,
                messages=messages,  # type: ignore[arg-type]
                max_tokens=max_tokens,
                **options,
            )
        except openai.BadRequestError as exc:
            text = str(exc)
            lowered = text.lower()
            if "context" in lowered and any(w in lowered for w in ("length", "window", "size", "exceed")):
                raise ContextLengthExceeded(
                    f"{where}: the prompt is over the model's window: {text[:300]}", window=_window_in(text)
                ) from None
            raise ModelError(f"{where}: HTTP 400: {text[:300]}") from None
        except openai.APIStatusError as exc:
            raise ModelError(f"{where}: HTTP {exc.status_code}: {str(exc)[:300]}") from None
        except openai.APITimeoutError:
            raise ModelError(f"{where}: no answer within {timeout} s") from None
        except openai.APIConnectionError as exc:
            raise ModelError(f"{where}: cannot connect ({exc.__cause__ or exc}); is the server running?") from None
        except (openai.OpenAIError, ValueError) as exc:  # a body that is not JSON, a bad shape, ...
            raise ModelError(f"{where}: {type(exc).__name__}: {str(exc)[:300]}") from None
        choices = getattr(response, "choices", None)
        if not choices:
            raise ModelError(f"{where}: the reply has no choices ({str(response)[:200]})")
        content = getattr(choices[0].message, "content", None)
        if not isinstance(content, str):
            raise ModelError(f"{where}: the reply has no text content")
        return content

    complete.__qualname__ = f"openai_completion({model!r})"
    return complete


def model_api(model: _ModelTable) -> str | None:
    """The route the ``[model]`` table's ``name`` takes: ``"openai"`` (the official client) when
    ``base_url`` is set or crewai is not installed, else ``"crewai"`` (``crewai.LLM``); None without a name."""
    if model.name is None:
        return None
    return "openai" if model.base_url is not None or not _installed("crewai") else "crewai"


def configured_completion(model: _ModelTable) -> Complete:
    """A :data:`Complete` over the ``[model]`` table's model on the openai route (:func:`model_api`
    says ``"openai"``; the ``"crewai"`` route is ``ctxlife.completion_for_model``, an adapter's).

    Of ``options``, ``temperature`` (default 0.2) and ``extra_body`` are the client's; any other key
    is sent in the request body.
    """
    extra = dict(model.options)
    temperature = extra.pop("temperature", 0.2)
    body = extra.pop("extra_body", None) or {}
    return openai_completion(
        str(model.name),
        base_url=model.base_url,
        api_key_env=model.api_key_env,
        timeout=model.timeout_seconds,
        temperature=temperature,
        extra_body={**body, **extra} or None,
    )


def model_route_problem(model: _ModelTable, *, connect: bool = False) -> str | None:
    """Why the ``[model]`` table's model cannot be called, with the fix; None if it can (or none is named).

    With ``connect``, the openai route imports the client and asks its endpoint for one token: this
    proves the endpoint, the key and the model name together, as a summary would use them."""
    api = model_api(model)
    if api is None:
        return None
    if api == "crewai":
        return None  # model_api picks crewai only when it is installed; crewai.LLM is not called here
    problem = _openai_problem(model.name, model.base_url, model.api_key_env)
    return _unreachable(model) if problem is None and connect else problem


def _openai_problem(name: str | None, base_url: str | None, api_key_env: str) -> str | None:
    """Why the openai route cannot be built (the client missing, no endpoint), with the fix; else None."""
    where = f"[model] name {name!r}"
    if not _installed("openai"):
        return f"{where} is called through the openai client, which is not installed: pip install 'ctxlife[openai]'" + (
            "" if base_url else ", or pip install 'ctxlife[crewai]' to call it through crewai.LLM"
        )
    if base_url is None and not os.environ.get(api_key_env):
        return (
            f"{where} has no endpoint: set [model] base_url (an OpenAI-compatible server, e.g. "
            f'"http://127.0.0.1:8080/v1") or the environment variable {api_key_env} for api.openai.com'
        )
    return None


def _unreachable(model: _ModelTable) -> str | None:
    """Why the openai route's endpoint does not answer one token, with the fix; None once it answered."""
    name, base_url = str(model.name), model.base_url
    where = f"[model] name {name!r} at {base_url or 'api.openai.com'}"
    try:
        complete = openai_completion(
            name, base_url=base_url, api_key_env=model.api_key_env, timeout=model.timeout_seconds
        )
    except ImportError as exc:  # an openai install that cannot load (a missing dependency of its own)
        return f"{where}: the openai client does not import ({exc}); reinstall it: pip install -U 'ctxlife[openai]'"
    except ModelError as exc:
        return str(exc)
    try:
        complete([{"role": "user", "content": "Reply with OK."}], 1)
    except ModelError as exc:
        fix = (
            "start the server, or correct [model] base_url or name"
            if base_url
            else f"check [model] name and the key in {model.api_key_env}"
        )
        return f"could not call the [model]: {exc}. Fix: {fix} (ctxlife check --no-connect skips this call)"
    return None
