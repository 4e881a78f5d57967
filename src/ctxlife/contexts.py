"""Framework-neutral context objects handed to strategy hooks.

The adapter for a framework (CrewAI, or :func:`ctxlife.manage` for plain lists)
builds one of these per lifecycle node, the host hands it to each active
strategy in config order, and the adapter writes the edits back. Strategies
never see framework objects.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ctxlife.errors import CtxlifeError

if TYPE_CHECKING:
    from ctxlife.sessions.base import SessionStore
    from ctxlife.tokens import TokenCounter

Complete = Callable[[list[dict[str, Any]], int], str]
"""``complete(messages, max_tokens) -> text``: one model call, supplied by the adapter."""


@dataclass(frozen=True, slots=True)
class Action:
    """Something a strategy did, as recorded with :meth:`HookContext.record`."""

    strategy: str
    node: str
    what: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(eq=False)
class HookContext:
    """What every hook receives.

    Attributes:
        node: the lifecycle node being dispatched (``"before_llm_call"``, ...).
        session_id: the session this call belongs to, or None without sessions.
        agent_role: the role of the agent concerned, if the framework has agents.
        task_name: the current task's name (or description), if any.
        task_index: the 0-based position of the current task in its run, if any.
        tokens: the :class:`~ctxlife.tokens.TokenCounter` for the agent's model.
        context_window: the model's context window in tokens.
        threshold: the share of the window that counts as "too full" (config).
        state: this strategy's own scratch dict, kept for the session across
            calls and nodes. Each strategy sees only its own, and only the calls of
            this session (which run one at a time) see it; dropped when the host
            drops the idle session (past 256 sessions).
        complete: a callable that makes one call to the agent's own model
            (``complete(messages, max_tokens) -> str``), or None when the
            adapter has no model to offer (as under :func:`ctxlife.manage`).
        store: the host's session store (:class:`ctxlife.sessions.SessionStore`, the
            top-level ``store`` setting), or None when the host has none. Strategies
            use it to keep data per session (raw history, snapshots, blobs, the lock).
        view: the view (an agent's or task's lane) inside the session this call
            belongs to; ``""`` is the default view.
    """

    node: str = ""
    session_id: str | None = None
    agent_role: str | None = None
    task_name: str | None = None
    task_index: int | None = None
    context_window: int = 0
    threshold: float = 0.4
    state: dict[str, Any] = field(default_factory=dict)
    complete: Complete | None = None
    store: SessionStore | None = None
    view: str = ""
    actions: list[Action] = field(default_factory=list, repr=False)
    _text_filter: Callable[..., str] | None = field(default=None, repr=False)
    _message_filter: Callable[..., dict[str, Any]] | None = field(default=None, repr=False)
    _strategy: str = field(default="", repr=False)
    _tokens: TokenCounter | None = field(default=None, repr=False)

    @property
    def tokens(self) -> TokenCounter:
        """The token counter for the agent's model (set by the host before any hook runs)."""
        if self._tokens is None:
            raise CtxlifeError(
                f"{type(self).__name__}.tokens is set by the host when it dispatches a node; "
                "this context has not been dispatched (build it through a Host, or set ctx.tokens)"
            )
        return self._tokens

    @tokens.setter
    def tokens(self, counter: TokenCounter) -> None:
        self._tokens = counter

    @property
    def budget(self) -> int:
        """``threshold`` × ``context_window``: the token count considered too full."""
        return int(self.threshold * self.context_window)

    def filter_text(self, text: str, where: str) -> str:
        """``text`` after every ``ctxlife_filter_text`` hook (redaction plugins), for text a strategy
        takes out of the session store and shows the model (``where``: ``"recall"``, ``"restore"``, ...)."""
        if self._text_filter is None:
            return text
        return self._text_filter(text, where=where, session_id=self.session_id, view=self.view)

    def filter_message(self, message: dict[str, Any], where: str) -> dict[str, Any]:
        """``message`` with every text in it (content, text parts, tool-call arguments, ``tool_use``
        inputs) through :meth:`filter_text`: the same dict when nothing changed, else a new one."""
        if self._message_filter is None:
            return message
        return self._message_filter(message, where=where, session_id=self.session_id, view=self.view)

    def record(self, what: str, **details: Any) -> None:
        """Record that the calling strategy acted (``ctx.record("truncated", removed=12)``).

        Recorded actions appear in the host's structured event for this node and
        in the report :func:`ctxlife.manage` returns. Details should be counts and
        names, never message contents. ``ctx.record("skipped", reason=...)``
        explains a decision not to act; it does not count as acting.
        """
        self.actions.append(Action(self._strategy, self.node, what, details))


@dataclass(eq=False)
class BootstrapContext(HookContext):
    """``ctxlife_bootstrap``: an agent is about to make its first model call.

    Attributes:
        goal: the agent's goal, if the framework has one (read-only).
        backstory: the agent's original backstory, if any (read-only).
        blocks: texts to add to the agent's system prompt. Append to it.
        variables: values a strategy may render into its text
            (``agent_role``, ``session_id``, ``date``).
    """

    goal: str | None = None
    backstory: str | None = None
    blocks: list[str] = field(default_factory=list)
    variables: dict[str, str] = field(default_factory=dict)


@dataclass(eq=False)
class LLMCallContext(HookContext):
    """``ctxlife_before_llm_call``: the messages about to be sent to the model.

    Attributes:
        messages: the live list of OpenAI-format message dicts. Edit it IN PLACE
            (slice assignment, ``clear()`` + ``extend()``, ``del``, ``insert``);
            rebinding ``ctx.messages`` has no effect. Treat the dicts as values:
            to change one, put a new dict in its place.
        call_index: 0-based count of model calls seen by this host in this run.
        first_call_of_run: True on the first model call of a run (a kickoff, or
            the first :func:`ctxlife.manage` call for a session).
        first_call_of_view: True on the first model call of the call's view (an agent's or a
            task's lane; the session's only one without views) in the run: every view's list may be
            built from scratch at a kickoff, not only the first one called.
        first_call_of_task: True on the first model call after a task started.
        message_format: the list's format, ``"openai"`` (OpenAI chat) or ``"anthropic"``
            (Anthropic Messages); see :mod:`ctxlife.messages`. Messages a strategy adds must be
            in it (``ctxlife.messages.summary_message`` builds a summary that is).
        recorded_by_caller: True when the caller keeps the session itself (``ctxlife.Session``):
            it restored the list and recorded this call's new messages, and saves the snapshot
            after the call. Strategies that restore, record or snapshot lists
            (``snapshot_restore``) leave this call to it.
    """

    messages: list[dict[str, Any]] = field(default_factory=list)
    message_format: str = "openai"
    call_index: int = 0
    first_call_of_run: bool = False
    first_call_of_view: bool = False
    first_call_of_task: bool = False
    recorded_by_caller: bool = False
    _count_memo: tuple[list[dict[str, Any]], int] | None = field(default=None, repr=False)

    def count(self) -> int:
        """Tokens of the current message list (free when the list has not changed since the last count)."""
        from ctxlife.messages import same_messages  # lazy: `import ctxlife` loads contexts; keep it small

        memo = self._count_memo
        if memo is not None and same_messages(memo[0], self.messages):
            return memo[1]
        total = self.tokens.count_messages(self.messages)
        self._count_memo = (list(self.messages), total)
        return total


@dataclass(eq=False)
class ToolCallContext(HookContext):
    """``ctxlife_before_tool_call`` / ``ctxlife_after_tool_call``.

    Attributes:
        tool_name: the tool's name.
        tool_input: the arguments, a dict. Before the call, edit it in place to
            change what the tool receives.
        result: None before the call. A before-hook that sets it to a string
            skips the tool: that string is what the model sees instead. After the
            call it holds what the model will see; assign a new string to change it.
        raw_result: after the call, the tool's own return value (read-only).
        skipped_by: the strategy that set ``result`` before the call, if any.
    """

    tool_name: str = ""
    tool_input: dict[str, Any] = field(default_factory=dict)
    result: str | None = None
    raw_result: Any = None
    skipped_by: str | None = None


@dataclass(eq=False)
class TaskContext(HookContext):
    """``ctxlife_task_start`` / ``ctxlife_task_end``.

    Attributes:
        description: the task's description.
        expected_output: the task's expected output, if any.
        context_text: at task start, the text the framework passes into the task
            from earlier tasks' outputs. Assign a new string to change what the
            agent receives.
        output: at task end, the task's final output text. Assign to change what
            later tasks receive.
        messages: at task end, the task's final message list, ending with the final
            answer as an assistant message (a copy; edits have no effect).
    """

    description: str = ""
    expected_output: str | None = None
    context_text: str = ""
    output: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)


@dataclass(eq=False)
class TextContext(HookContext):
    """``ctxlife_filter_text``: text about to leave the session store.

    Attributes:
        text: the text (as stored, or as the previous filter left it). Assign a
            new string to change it.
        where: which path it leaves by: ``"recall"``, ``"search"``, ``"restore"``,
            ``"show"``, ``"export"``, ``"report"``, or ``"record"`` (the write-time filter).
    """

    text: str = ""
    where: str = ""
