"""The six lifecycle hookspecs (and the privacy filter). Their docstrings are the reference documentation.

Strategies implement any subset of these as methods decorated with
:data:`ctxlife.hookimpl`; an implementation may take only the arguments it uses.

How the host calls them (the same for every hook):

* Only strategies named in the config run, in config order, then the extra
  ``plugins=`` objects given to :func:`ctxlife.wrap` / :func:`ctxlife.manage`.
  Implementations marked ``@ctxlife.hookimpl(tryfirst=True)`` run before all
  others and ``trylast=True`` after all others (config order within each
  group); with ``specname=`` a strategy can implement one hook twice, e.g. a
  tryfirst part that restores a session and a trylast part. A trylast part is not
  the last word: another strategy's or plugin's trylast part may run after it, so
  the host itself saves a session's snapshot once every strategy ran.
* Each strategy edits the context object in place. Return values are ignored.
* A strategy that raises has its edit discarded (the context is restored to what
  it was before that strategy ran); the others still run, and an
  ``strategy_failed`` error event names the strategy, the node and the cause.
* ``ctx.record(what, **details)`` reports an action; ``ctx.state`` is the
  strategy's own scratch dict for the session.
* Calls for one session run one at a time; calls for different sessions may run
  at the same time on the same strategy object (one host serves every thread of
  the LangChain middleware). Keep per-session data in ``ctx.state``, which only
  that session's calls see; whatever lives on ``self`` is shared by them all and
  must be safe to use from several threads. A host drops the ``ctx.state`` of
  an idle session past its bound (256 sessions): its next call starts fresh,
  as in a new process.

Hooks only grow: arguments may be added in later versions, never renamed or
removed, so an implementation written today keeps working.
"""

from __future__ import annotations

import pluggy

from ctxlife.contexts import BootstrapContext, LLMCallContext, TaskContext, TextContext, ToolCallContext

PROJECT = "ctxlife"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# -- agent start ----------------------------------------------------------------------


@hookspec
def ctxlife_bootstrap(ctx: BootstrapContext) -> None:
    """Node 1, bootstrap: add what an agent must know from its first call on.

    When: once per agent (per role) and session, before the agent's first model
    call. Under :func:`ctxlife.wrap` it fires when the crew is wrapped, once per
    agent; under :func:`ctxlife.manage` on the first call of a session.

    Context: :class:`~ctxlife.contexts.BootstrapContext` with ``agent_role``,
    ``goal`` and ``backstory`` (read-only), ``session_id``, and ``variables``
    (``agent_role``, ``session_id``, ``date``) for rendering templates.

    Mutate: append texts to ``ctx.blocks``. The host puts the blocks into the
    agent's system message as one marked section (``<!-- ctxlife:bootstrap -->``
    ... ``<!-- /ctxlife:bootstrap -->``), exactly once: wrapping twice, kicking off
    again, or a framework resetting the prompt never duplicates or loses them, and
    a new rendering (``{date}`` after midnight, an edited profile) replaces the old
    one. An agent that sends no system message (CrewAI's ``use_system_prompt=False``,
    an Anthropic Messages list without a system prompt) gets the section at the
    start of its first user turn instead.

    Return: ignored.
    """


# -- before each model call -----------------------------------------------------------


@hookspec
def ctxlife_before_llm_call(ctx: LLMCallContext) -> None:
    """Node 2, before each model call: shape the messages the model will see.

    When: right before every model call (CrewAI's ``PRE_MODEL_CALL``; each
    :func:`ctxlife.manage` call).

    Context: :class:`~ctxlife.contexts.LLMCallContext`: ``messages`` (the live
    list that will be sent), ``tokens`` (a counter: ``ctx.count()`` counts the
    list), ``context_window``, ``threshold`` and ``budget``, ``call_index``,
    ``first_call_of_run``, ``first_call_of_view``, ``first_call_of_task``, ``complete`` (a model call,
    when available), ``session_id``, ``agent_role``, ``task_name``, ``state``.

    Mutate: edit ``ctx.messages`` in place (slice assignment or ``clear()`` +
    ``extend()``; rebinding the attribute has no effect). Replace message dicts
    rather than editing them. The result must stay provider-valid: system
    messages first, each ``tool`` result right after the assistant message
    that called it, no call without its result, and the latest user message
    kept (it may be replaced in place, e.g. redacted, but not dropped). The
    host checks this after each strategy and rolls back an edit that breaks
    it, with an ``invalid_sequence`` error event.

    Return: ignored.
    """


# -- around a tool call ---------------------------------------------------------------


@hookspec
def ctxlife_before_tool_call(ctx: ToolCallContext) -> None:
    """Node 3, before a tool call: change, answer or record a call.

    When: after the model asked for a tool and before the tool runs (CrewAI's
    ``PRE_TOOL_CALL``).

    Context: :class:`~ctxlife.contexts.ToolCallContext` with ``tool_name`` and
    ``tool_input``; ``result`` is None.

    Mutate: edit ``ctx.tool_input`` in place to change the arguments. Set
    ``ctx.result`` to a string to skip the tool: the model sees that string as
    the tool's result, and strategies after this one are not called for this
    node. ``ctxlife_after_tool_call`` still fires with that result.

    Return: ignored.
    """


@hookspec
def ctxlife_after_tool_call(ctx: ToolCallContext) -> None:
    """Node 4, after a tool returns: change what the model sees of the result.

    When: after a tool ran (or was skipped by a before-hook), before its result
    is appended to the messages (CrewAI's ``POST_TOOL_CALL``).

    Context: :class:`~ctxlife.contexts.ToolCallContext` with ``tool_name``,
    ``tool_input``, ``result`` (the text the model will see), ``raw_result``
    (the tool's own return value) and ``skipped_by``.

    Mutate: assign a new string to ``ctx.result`` (for example a capped version
    of a huge output). The next strategy sees the new value.

    Return: ignored.
    """


# -- task boundaries ------------------------------------------------------------------


@hookspec
def ctxlife_task_start(ctx: TaskContext) -> None:
    """Node 5, task start: decide what a task receives from earlier tasks.

    When: before a task's agent starts working on it (CrewAI's ``PRE_STEP``
    with kind ``"task"``).

    Context: :class:`~ctxlife.contexts.TaskContext` with ``task_name``,
    ``task_index``, ``description``, ``expected_output``, ``agent_role`` and
    ``context_text``: the text the framework passes in from earlier tasks'
    outputs.

    Mutate: assign a new string to ``ctx.context_text`` (shorter, empty, ...).

    Return: ignored.
    """


@hookspec
def ctxlife_task_end(ctx: TaskContext) -> None:
    """Node 6, task end: record or reshape a task's result.

    When: after a task finished, before its output is passed on (CrewAI's
    ``POST_STEP`` with kind ``"task"``).

    Context: :class:`~ctxlife.contexts.TaskContext` with the task fields,
    ``output`` (the final output text) and ``messages`` (the task's final
    message list; a copy, edits to it have no effect).

    Mutate: assign a new string to ``ctx.output`` to change what later tasks
    and the caller receive. Save snapshots or summaries here.

    Return: ignored.
    """


# -- text leaving the store -----------------------------------------------------------


@hookspec
def ctxlife_filter_text(ctx: TextContext) -> None:
    """Privacy filter: change (redact) text before it leaves the session store.

    When: every time ctxlife hands stored text to the model or to a person: a
    passage the ``recall`` strategy puts into the context, or the
    ``ctxlife_search_history`` or ``ctxlife_recall`` tool returns
    (``where="recall"``); a restored conversation (``"restore"``); what
    ``ctxlife session show`` and ``session export`` print, ``--raw`` and
    ``--all`` included (``"show"``, ``"export"``); ``ctxlife session search``
    output (``"search"``); ``ctxlife report``, ``ctxlife replay --session``
    (table, ``--json``, ``--html``) and ``session show --context``
    (``"report"``). ``tests/reliability/test_redaction_paths.py`` enumerates
    these places. A message's text is its content, text parts, tool-call
    arguments and ``tool_use`` inputs (:meth:`ctxlife.host.Host.filter_message`,
    :meth:`ctxlife.HookContext.filter_message`). ``where="record"`` is the
    optional write-time filter: a caller that records a message may pass it
    through here first so a secret never reaches disk.

    Context: :class:`~ctxlife.contexts.TextContext` with ``text`` (as stored, or
    as the previous filter left it), ``where`` (the path, see above),
    ``session_id`` and ``view`` (both may be unknown: None and ``""``).

    Mutate: assign a new string to ``ctx.text``. Filters run in dispatch order
    (config order; ``tryfirst``/``trylast`` as for every hook), each seeing what
    the previous one left. A filter that raises, or leaves something that is not
    a string, has its edit discarded (a ``strategy_failed`` error event) and the
    others still run: a redaction plugin should not raise.

    A redaction strategy implements this hook with the same rule it applies to
    the live list at node 2, so text it removes never reaches the model by any
    path (live list, restore or recall) nor an operator's terminal.

    Return: ignored.
    """


HOOK_NAMES: tuple[str, ...] = (
    "ctxlife_bootstrap",
    "ctxlife_before_llm_call",
    "ctxlife_before_tool_call",
    "ctxlife_after_tool_call",
    "ctxlife_task_start",
    "ctxlife_task_end",
    "ctxlife_filter_text",
)
