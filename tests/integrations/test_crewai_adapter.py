"""The CrewAI adapter's translation, one CrewAI hook context at a time (mutation scope integrations-crewai,
issue 44): what the strategies are given for a model call, a tool call and a task step, what comes back to
CrewAI (the list the agent is sent, a tool's result, the task's input and output), and what is recorded in
the session, in which view. A real wrapped crew; the hook contexts are those CrewAI passes, built here."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.integrations.crewai import ADAPTER_ATTR
from ctxlife.testing import HookRecorder, react_action, react_final, scripted_llm

pytestmark = pytest.mark.imports("crewai")


class Editor:
    """A strategy that edits what the adapter hands it, so that what comes back to CrewAI can be seen."""

    name = "editor"

    def __init__(self) -> None:
        self.tool_result: str | None = None  # answer tool calls with this (the tool is not run)
        self.after: str | None = None  # replace every tool result with this
        self.context_text: str | None = None
        self.output: str | None = None

    @ctxlife.hookimpl
    def ctxlife_before_llm_call(self, ctx: Any) -> None:
        ctx.messages.append({"role": "user", "content": "added by a strategy"})

    @ctxlife.hookimpl
    def ctxlife_before_tool_call(self, ctx: Any) -> None:
        if self.tool_result is not None:
            ctx.result = self.tool_result

    @ctxlife.hookimpl
    def ctxlife_after_tool_call(self, ctx: Any) -> None:
        if self.after is not None:
            ctx.result = self.after

    @ctxlife.hookimpl
    def ctxlife_task_start(self, ctx: Any) -> None:
        if self.context_text is not None:
            ctx.context_text = self.context_text

    @ctxlife.hookimpl
    def ctxlife_task_end(self, ctx: Any) -> None:
        if self.output is not None:
            ctx.output = self.output


class Window:
    """A CrewAI LLM as the adapter reads it: a model name, a window, a call()."""

    model = "gpt-4o-mini"

    def __init__(self, window: Any = 32000) -> None:
        self.window = window

    def get_context_window_size(self) -> int:
        if isinstance(self.window, Exception):
            raise self.window
        return self.window  # type: ignore[no-any-return]

    def call(self, messages: Any) -> str:
        return "summary"


@pytest.fixture
def crew(tmp_path: Path) -> Any:
    from crewai import Agent, Crew, Task

    llm = scripted_llm()
    writer = Agent(role="Writer", goal="write", backstory="You write.", llm=llm)
    editor = Agent(role="Editor", goal="edit", backstory="You edit.", llm=llm, use_system_prompt=False)
    draft = Task(name="draft", description="Draft it.", expected_output="a draft", agent=writer)
    edit = Task(description="Edit the draft.", expected_output="an edit", agent=editor)
    return Crew(agents=[writer, editor], tasks=[draft, edit])


def _wrapped(crew: Any, tmp_path: Path, *plugins: Any, window: int | None = None) -> tuple[Any, HookRecorder]:
    recorder = HookRecorder()
    data: dict[str, Any] = {"strategies": [], "store": f"file://{tmp_path / 'sessions'}"}
    if window is not None:
        data["context_window"] = window
    settings = settings_from_dict(data)
    ctxlife.wrap(crew, settings, session_id="s", plugins=[*plugins, recorder])
    return crew.__dict__[ADAPTER_ATTR], recorder


def _model_call(crew: Any, agent: int = 0, task: Any = "own", **extra: Any) -> SimpleNamespace:
    fields: dict[str, Any] = {
        "executor": object(),
        "llm": Window(),
        "agent": crew.agents[agent],
        "task": crew.tasks[agent] if task == "own" else task,
        "messages": [{"role": "system", "content": "You write."}, {"role": "user", "content": "Draft it."}],
    }
    return SimpleNamespace(**{**fields, **extra})


def _records(adapter: Any) -> list[tuple[str, str, Any]]:
    return [(r.view, r.message["role"], r.message.get("content")) for r in adapter.host.store.read_records("s")]


def test_a_model_call_hands_the_strategies_the_agent_task_and_model_and_the_agent_is_sent_their_list(
    crew: Any, tmp_path: Path
) -> None:
    adapter, recorder = _wrapped(crew, tmp_path, Editor())
    hctx = _model_call(crew)
    adapter._on_pre_model_call(hctx)
    seen = recorder.of("ctxlife_before_llm_call")[0].snapshot
    assert {k: seen[k] for k in ("context_window", "agent_role", "view")} == {
        "context_window": 32000,  # the agent's LLM's
        "agent_role": "Writer",
        "view": "Writer.task0",
    }
    assert (seen["task_name"], seen["task_index"]) == ("draft", 0)
    assert recorder.of("ctxlife_before_llm_call")[0].ctx.complete is not None  # the agent's LLM can summarize
    assert hctx.messages[-1] == {"role": "user", "content": "added by a strategy"}  # the list CrewAI sends


def test_an_agent_without_a_system_prompt_and_a_task_named_by_its_description(crew: Any, tmp_path: Path) -> None:
    bootstrap = settings_from_dict(
        {"strategies": ["bootstrap"], "bootstrap": {"text": "PROFILE"}, "context_window": 6000}
    )
    recorder = HookRecorder()
    ctxlife.wrap(crew, bootstrap, plugins=[recorder])
    adapter = crew.__dict__[ADAPTER_ATTR]
    editing = _model_call(crew, agent=1, llm="anthropic/claude", messages=[{"role": "user", "content": "Edit."}])
    adapter._on_pre_model_call(editing)
    seen = recorder.of("ctxlife_before_llm_call")[0]
    assert seen.snapshot["view"] == "Editor.task1" and seen.snapshot["task_name"] == "Edit the draft."
    assert seen.ctx.complete is None  # a model name, not an LLM that could summarize
    # no system prompt (use_system_prompt=False): the bootstrap text opens the first user turn
    assert [m["role"] for m in editing.messages] == ["user"] and "PROFILE" in str(editing.messages[0]["content"])
    writing = _model_call(crew, messages=[{"role": "user", "content": "Draft."}])
    adapter._on_pre_model_call(writing)
    assert [m["role"] for m in writing.messages] == ["system", "user"] and "PROFILE" in writing.messages[0]["content"]


@pytest.mark.parametrize(
    ("task", "view", "name"),
    [
        (SimpleNamespace(name="draft", description="other"), "Writer.task0", "draft"),  # a copy (kickoff_for_each)
        (SimpleNamespace(name=None, description="Edit the draft."), "Writer.task1", "Edit the draft."),
        (SimpleNamespace(name="delegated", description="Ask"), "Writer", "delegated"),  # not one of the crew's
        (None, "Writer", None),
    ],
    ids=["copy-by-name", "copy-by-description", "delegated", "no-task"],
)
def test_the_view_is_the_agents_role_and_its_tasks_place_in_the_crew(
    crew: Any, tmp_path: Path, task: Any, view: str, name: str | None
) -> None:
    adapter, recorder = _wrapped(crew, tmp_path)
    adapter._on_pre_model_call(_model_call(crew, task=task))
    seen = recorder.of("ctxlife_before_llm_call")[0].snapshot
    assert (seen["view"], seen["task_name"]) == (view, name)


class NoWindow:
    model = "gpt-4o-mini"


@pytest.mark.parametrize("llm", [NoWindow(), Window(ValueError("unknown")), Window("not a number")])
def test_an_llm_without_a_usable_window_leaves_the_configs(crew: Any, tmp_path: Path, llm: Any) -> None:
    adapter, recorder = _wrapped(crew, tmp_path, window=6000)
    adapter._on_pre_model_call(_model_call(crew, llm=llm))
    assert recorder.of("ctxlife_before_llm_call")[0].snapshot["context_window"] == 6000


def test_calls_that_are_no_agents_step_are_not_managed(crew: Any, tmp_path: Path) -> None:
    from ctxlife.integrations.crewai_calls import own_model_call

    adapter, recorder = _wrapped(crew, tmp_path)
    adapter._on_pre_model_call(_model_call(crew, executor=None))
    with own_model_call():
        adapter._on_pre_model_call(_model_call(crew))
        adapter._on_post_model_call(_model_call(crew, response="Hello."))
    adapter._on_post_model_call(_model_call(crew, executor=None, response="Hello."))
    assert recorder.calls == [c for c in recorder.calls if c.hook == "ctxlife_bootstrap"]
    assert _records(adapter) == []


def test_each_reply_is_recorded_with_its_list_in_the_agents_view(crew: Any, tmp_path: Path) -> None:
    adapter, _ = _wrapped(crew, tmp_path)
    adapter._on_post_model_call(_model_call(crew, response="Here is the draft."))
    adapter._on_post_model_call(_model_call(crew, agent=1, response=react_final("The edit.")))
    adapter._on_post_model_call(_model_call(crew, response=react_action("lookup", {"item": "A1"})))  # with its result
    adapter._on_post_model_call(_model_call(crew, response=""))
    adapter._on_post_model_call(_model_call(crew, response=None))
    assert _records(adapter) == [  # (the system prompt is the config's to give, not the conversation)
        ("Writer.task0", "user", "Draft it."),
        ("Writer.task0", "assistant", "Here is the draft."),
        ("Editor.task1", "user", "Draft it."),
        ("Editor.task1", "assistant", "The edit."),
    ]


def _tool_call(crew: Any, **extra: Any) -> SimpleNamespace:
    fields: dict[str, Any] = {
        "agent": crew.agents[0],
        "task": crew.tasks[0],
        "tool": SimpleNamespace(name="查询"),
        "tool_name": "",  # CrewAI's ASCII-sanitized name of a CJK tool
        "tool_input": {"item": "A1"},
        "tool_result": "12 units",
        "raw_tool_result": {"units": 12},
    }
    return SimpleNamespace(**{**fields, **extra})


def test_a_tool_call_hands_the_strategies_the_tool_its_input_and_result(crew: Any, tmp_path: Path) -> None:
    adapter, recorder = _wrapped(crew, tmp_path)
    hctx = _tool_call(crew)
    assert adapter._on_pre_tool_call(hctx) is None  # the tool runs
    before = recorder.of("ctxlife_before_tool_call")[0]
    assert before.ctx.tool_input is hctx.tool_input  # edits reach the tool
    assert {k: before.snapshot[k] for k in ("tool_name", "tool_input", "result", "view", "agent_role")} == {
        "tool_name": "查询",
        "tool_input": {"item": "A1"},
        "result": None,
        "view": "Writer.task0",
        "agent_role": "Writer",
    }
    assert (before.snapshot["task_name"], before.snapshot["task_index"]) == ("draft", 0)
    assert before.snapshot["context_window"] == 8192  # the agent's LLM's
    assert adapter._on_post_tool_call(hctx) is None  # unchanged: CrewAI keeps its result
    after = recorder.of("ctxlife_after_tool_call")[0].snapshot
    assert (after["result"], after["raw_result"], after["tool_name"]) == ("12 units", {"units": 12}, "查询")
    assert after["context_window"] == 8192  # the agent's LLM's
    plain = _tool_call(crew, tool=None, tool_name="lookup", tool_input="A1")
    adapter._on_pre_tool_call(plain)
    assert plain.tool_input == {} and recorder.of("ctxlife_before_tool_call")[1].snapshot["tool_name"] == "lookup"


def test_a_tool_call_a_strategy_answers_is_blocked_and_the_answer_is_its_result(crew: Any, tmp_path: Path) -> None:
    editor = Editor()
    adapter, recorder = _wrapped(crew, tmp_path, editor)
    editor.tool_result = "cached: 12 units"
    hctx = _tool_call(crew, tool_result=None)
    assert adapter._on_pre_tool_call(hctx) is False  # CrewAI does not run the tool
    editor.tool_result = None
    assert adapter._on_post_tool_call(hctx) == "cached: 12 units"
    assert recorder.of("ctxlife_after_tool_call")[0].ctx.skipped_by == "editor"
    other = _tool_call(crew, tool_input={"item": "B2"})
    assert adapter._on_post_tool_call(other) is None  # nothing pending for this call
    editor.after = "capped"
    assert adapter._on_post_tool_call(_tool_call(crew)) == "capped"


def _step(crew: Any, kind: str = "task", agent: int = 0, **extra: Any) -> SimpleNamespace:
    fields: dict[str, Any] = {
        "kind": kind,
        "task": crew.tasks[agent],
        "agent": crew.agents[agent],
        "agent_role": crew.agents[agent].role,
        "payload": "The draft so far.",
    }
    return SimpleNamespace(**{**fields, **extra})


def test_a_task_start_hands_the_strategies_the_task_and_its_input_and_the_task_gets_theirs(
    crew: Any, tmp_path: Path
) -> None:
    editor = Editor()
    adapter, recorder = _wrapped(crew, tmp_path, editor)
    step = _step(crew, agent=1)
    adapter._on_pre_step(step)
    seen = recorder.of("ctxlife_task_start")[0]
    assert {k: seen.snapshot[k] for k in ("context_text", "view", "description", "expected_output", "task_index")} == {
        "context_text": "The draft so far.",
        "view": "Editor.task1",
        "description": "Edit the draft.",
        "expected_output": "an edit",
        "task_index": 1,
    }
    assert seen.snapshot["context_window"] == 8192 and seen.ctx.complete is not None
    assert step.payload == "The draft so far."
    editor.context_text = "A compact context."
    adapter._on_pre_step(step)
    assert step.payload == "A compact context."
    editor.context_text = None
    for payload, text in ((None, ""), (42, "42")):
        step = _step(crew, payload=payload)
        adapter._on_pre_step(step)
        assert recorder.of("ctxlife_task_start")[-1].snapshot["context_text"] == text
        assert step.payload == payload  # left as CrewAI gave it: no strategy changed it
    adapter._on_pre_step(_step(crew, kind="agent"))
    adapter._on_post_step(_step(crew, kind="agent"))
    assert len(recorder.of("ctxlife_task_start")) == 4 and not recorder.of("ctxlife_task_end")


def test_a_step_of_an_agent_known_by_its_role_only_is_in_that_roles_view(crew: Any, tmp_path: Path) -> None:
    adapter, recorder = _wrapped(crew, tmp_path)
    step = _step(crew, agent=1)
    step.agent = None  # CrewAI gave its role only
    adapter._on_pre_step(step)
    assert recorder.of("ctxlife_task_start")[0].snapshot["view"] == "Editor.task1"


def _output(raw: Any, messages: Any = None) -> SimpleNamespace:
    return SimpleNamespace(raw=raw, messages=messages)


def test_a_task_end_gets_the_output_and_the_conversation_with_its_final_answer(crew: Any, tmp_path: Path) -> None:
    adapter, recorder = _wrapped(crew, tmp_path)
    said = [{"role": "system", "content": "You write."}, {"role": "user", "content": "Draft it."}]
    # the model's own reply that gave the answer (recorded already) closes the conversation
    adapter._on_post_model_call(_model_call(crew, response="Thought: done.\nFinal Answer: The draft."))
    adapter._on_post_step(_step(crew, payload=_output("The draft.", [*said, "not a message"])))
    end = recorder.of("ctxlife_task_end")[0].snapshot
    assert (end["output"], end["view"], end["task_name"]) == ("The draft.", "Writer.task0", "draft")
    assert end["context_window"] == 8192  # the agent's LLM's
    assert end["messages"] == [*said, {"role": "assistant", "content": "The draft."}]
    # no reply recorded for the view: the output text closes it; a list ending with the answer is kept
    numeric = _output(42, said)
    adapter._on_post_step(_step(crew, payload=numeric))
    end = recorder.of("ctxlife_task_end")[1].snapshot
    assert end["output"] == "42" and end["messages"][-1] == {"role": "assistant", "content": "42"}
    assert numeric.raw == 42  # no strategy changed it: CrewAI's own object, untouched
    answered = [*said, {"role": "assistant", "content": "Done: the draft."}]
    adapter._on_post_step(_step(crew, payload=_output("The draft.", answered)))
    assert recorder.of("ctxlife_task_end")[2].snapshot["messages"] == answered
    # without the output's messages, the agent's last ones
    agent = SimpleNamespace(role="Writer", llm=None, last_messages=said)
    step = _step(crew, payload=_output(None))
    step.agent = agent
    adapter._on_post_step(step)
    end = recorder.of("ctxlife_task_end")[3].snapshot
    assert end["output"] is None and end["messages"] == said


def test_a_reply_that_did_not_give_the_answer_is_not_taken_for_it(crew: Any, tmp_path: Path) -> None:
    adapter, recorder = _wrapped(crew, tmp_path)
    adapter._on_post_model_call(_model_call(crew, response="Something else."))
    adapter._on_post_step(_step(crew, payload=_output("The draft.", [{"role": "user", "content": "Draft it."}])))
    assert recorder.of("ctxlife_task_end")[0].snapshot["messages"][-1] == {"role": "assistant", "content": "The draft."}
    # the reply was used up by that task end: the next one of the view has none
    adapter._on_post_step(_step(crew, payload=_output("Something else.", [])))
    assert recorder.of("ctxlife_task_end")[1].snapshot["messages"] == [
        {"role": "assistant", "content": "Something else."}
    ]


def test_an_output_a_strategy_changes_is_the_tasks_output(crew: Any, tmp_path: Path) -> None:
    editor = Editor()
    adapter, _ = _wrapped(crew, tmp_path, editor)
    output = _output("The draft.", [])
    adapter._on_post_step(_step(crew, payload=output))
    assert output.raw == "The draft."
    editor.output = "The draft, summarized."
    adapter._on_post_step(_step(crew, payload=output))
    assert output.raw == "The draft, summarized."


def test_a_tool_context_without_the_tool_object_or_results_is_read_as_none(crew: Any, tmp_path: Path) -> None:
    """CrewAI's hook context may lack the tool object and the results (before the tool ran, or an
    older CrewAI): the name it reports and no result."""
    adapter, recorder = _wrapped(crew, tmp_path)
    bare = SimpleNamespace(agent=crew.agents[0], task=crew.tasks[0], tool_name="lookup", tool_input={"item": "A1"})
    assert adapter._on_pre_tool_call(bare) is None
    assert adapter._on_post_tool_call(bare) is None
    after = recorder.of("ctxlife_after_tool_call")[0].snapshot
    assert (after["tool_name"], after["result"], after["raw_result"]) == ("lookup", None, None)


def test_a_task_end_without_an_output_or_messages_still_reaches_the_strategies(crew: Any, tmp_path: Path) -> None:
    adapter, recorder = _wrapped(crew, tmp_path)
    agent = SimpleNamespace(role="Writer", llm=None)  # no last_messages either
    for payload in (None, SimpleNamespace(raw="The draft.")):  # no output; an output without messages
        step = _step(crew, payload=payload)
        step.agent = agent
        adapter._on_post_step(step)
    ends = [c.snapshot for c in recorder.of("ctxlife_task_end")]
    assert [(e["output"], e["messages"]) for e in ends] == [
        (None, []),
        ("The draft.", [{"role": "assistant", "content": "The draft."}]),
    ]


def test_the_reply_that_gave_the_answer_closes_its_views_conversation_as_the_model_said_it(
    crew: Any, tmp_path: Path
) -> None:
    adapter, recorder = _wrapped(crew, tmp_path)
    adapter._on_post_model_call(_model_call(crew, response="Here it is: The draft."))
    adapter._on_post_model_call(_model_call(crew, agent=1, response="Edited: The draft."))  # another view's
    adapter._on_post_step(_step(crew, payload=_output("The draft.", [{"role": "user", "content": "Draft it."}])))
    assert recorder.of("ctxlife_task_end")[0].snapshot["messages"][-1] == {
        "role": "assistant",
        "content": "Here it is: The draft.",
    }
    adapter._on_post_step(_step(crew, agent=1, payload=_output("The draft.", [])))
    assert recorder.of("ctxlife_task_end")[1].snapshot["messages"] == [
        {"role": "assistant", "content": "Edited: The draft."}
    ]


def test_an_agent_first_seen_at_a_model_call_gets_its_bootstrap_from_its_role_goal_and_backstory(
    crew: Any, tmp_path: Path
) -> None:
    """An agent the crew did not list at wrap time (one a manager brought in): its first call renders the
    bootstrap text with what CrewAI says of it; without use_system_prompt, it has a system prompt."""
    recorder = HookRecorder()
    settings = settings_from_dict(
        {"strategies": ["bootstrap"], "bootstrap": {"text": "PROFILE"}, "context_window": 6000}
    )
    ctxlife.wrap(crew, settings, plugins=[recorder])
    adapter = crew.__dict__[ADAPTER_ATTR]
    reviewer = SimpleNamespace(role="Reviewer", goal="review drafts", backstory="You review.")
    hctx = _model_call(crew, messages=[{"role": "user", "content": "Review it."}])
    hctx.agent = reviewer
    adapter._on_pre_model_call(hctx)
    boot = recorder.of("ctxlife_bootstrap")[-1].snapshot
    assert (boot["agent_role"], boot["goal"], boot["backstory"]) == ("Reviewer", "review drafts", "You review.")
    assert [m["role"] for m in hctx.messages] == ["system", "user"] and "PROFILE" in hctx.messages[0]["content"]
