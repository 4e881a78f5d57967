"""Property-based tests: the DESIGN.md section 4 invariants over generated conversations.

Conversations mix plain chat, CrewAI ReAct text (Thought/Action/Action Input/Observation plus the
"Analyze the tool result..." follow-up user prompt), native tool calls with several calls per
assistant message, repeated ``tool_call_id`` values, empty and huge contents, CJK, emoji, zero-width
and bidi characters (see ``reliability_gen.py``). Every first-party strategy runs alone and in the
combinations the shipped ``configs/*.toml`` use (read from the folder at collection time, so a new
shipped config is covered automatically), plus the combinations the docs recommend.

What "the strategy claims it acted" and "under budget" mean per strategy is in docs/reliability.md
and in ``reliability_gen.check_claims``.
"""

from __future__ import annotations

import copy
import datetime
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import assume, event, example, given
from hypothesis import strategies as st
from reliability_gen import (
    REACT_PROMPT,
    REPO,
    Call,
    Chat,
    Checks,
    Driver,
    Native,
    Probe,
    React,
    User,
    canon,
    check_call,
    contents,
    crewai_task_end,
    examples,
    first_real_user,
    flatten,
    scripts,
    system_prompts,
    task_context_texts,
    texts,
    tool_results,
)

import ctxlife
from ctxlife.config import read_toml, settings_from_dict
from ctxlife.contexts import TaskContext, ToolCallContext
from ctxlife.host import Host
from ctxlife.messages import (
    apply_bootstrap,
    current_turn_index,
    is_recall_block,
    is_summary,
    is_system,
    round_starts,
    validate,
)
from ctxlife.sessions import open_store

WINDOWS = st.sampled_from([400, 1000, 2000, 4000, 12000])
BOOTSTRAP_TEXT = "House rules BOOT-7 for {agent_role} in {session_id}: be precise. 规则 🧪"


def tables(tmp: Path) -> dict[str, dict[str, Any]]:
    """Config tables by id: every strategy alone, the recommended combinations, the shipped configs."""
    store = {"store": f"file://{tmp / 'sessions'}"}
    out: dict[str, dict[str, Any]] = {
        "truncate_last_n(always)": {"strategies": ["truncate_last_n"], "truncate_last_n": {"always": True}},
        "truncate_last_n(above_threshold,rounds=1)": {
            "strategies": ["truncate_last_n"],
            "truncate_last_n": {"rounds": 1},
        },
        "llm_summary": {
            "strategies": ["llm_summary"],
            "llm_summary": {"summarizer": "extractive", "max_summary_tokens": 120, "min_gain_tokens": 20},
        },
        "llm_summary(defaults)": {"strategies": ["llm_summary"]},
        "snapshot_restore": {"strategies": ["snapshot_restore"], **store},
        "bootstrap": {"strategies": ["bootstrap"], "bootstrap": {"text": BOOTSTRAP_TEXT}},
        "tool_output": {
            "strategies": ["tool_output"],
            "tool_output": {"max_tokens": 120, "store_dir": str(tmp / "tool_outputs")},
        },
        "tool_cache": {"strategies": ["tool_cache"], "tool_cache": {"tools": ["lookup", "search", "get_order"]}},
        "task_scope": {"strategies": ["task_scope"], "task_scope": {"max_tokens": 80}},
        "summary+snapshot": {
            "strategies": ["llm_summary", "snapshot_restore"],
            "llm_summary": {"summarizer": "extractive", "max_summary_tokens": 120, "min_gain_tokens": 20},
            **store,
        },
        "truncate+snapshot": {
            "strategies": ["truncate_last_n", "snapshot_restore"],
            "truncate_last_n": {"always": True},
            **store,
        },
        "all": {
            "strategies": ["bootstrap", "tool_cache", "tool_output", "task_scope", "llm_summary", "snapshot_restore"],
            "bootstrap": {"text": BOOTSTRAP_TEXT},
            "tool_cache": {"tools": ["lookup", "search"]},
            "tool_output": {"max_tokens": 150, "store_dir": str(tmp / "tool_outputs")},
            "task_scope": {"max_tokens": 80},
            "llm_summary": {"summarizer": "extractive", "max_summary_tokens": 120, "min_gain_tokens": 20},
            **store,
        },
    }
    for path in sorted((REPO / "configs").glob("*.toml")):
        data = read_toml(path)
        # Every store goes to the temporary folder: the top-level ``store`` (relative paths in a
        # shipped config name a folder beside it), also for a recording config that names none.
        if "store" in data or "snapshot_restore" in data.get("strategies", []):
            data["store"] = store["store"]
        if "tool_output" in data.get("strategies", []):
            data.setdefault("tool_output", {})["store_dir"] = str(tmp / "tool_outputs")
        data.pop("session_id", None)
        out[f"configs/{path.name}"] = data
    return out


CONFIG_IDS = list(tables(Path("/nonexistent")))
RESTORE_IDS = [k for k, v in tables(Path("/nonexistent")).items() if "snapshot_restore" in v.get("strategies", [])]
# The heaviest configs take about 3 s or more per property run on an idle machine: marked slow
# there (make test-fast skips them, make test runs them).
SLOW_CONFIG_IDS = {"all", "summary+snapshot"}


def heavy_marked_slow(ids: list[str]) -> list[Any]:
    return [pytest.param(i, marks=pytest.mark.slow) if i in SLOW_CONFIG_IDS else i for i in ids]


def make_settings(config_id: str, tmp: Path) -> Any:
    data = copy.deepcopy(tables(tmp)[config_id])
    source = str(REPO / config_id) if config_id.startswith("configs/") else "reliability tests"
    return settings_from_dict(data, source=source)


def tool_output_of(host: Host) -> Any:
    return next((s for s in host.strategies if s.name == "tool_output"), None)


def check_offloads(driver: Driver, host: Host) -> None:
    strategy = tool_output_of(host)
    for ref, full in driver.capped.items():
        found = strategy.load(ref, host.store, driver.session_id)
        assert found is not None and found[0] == full, "the full tool result cannot be recalled"
        driver.checks.hit("offloaded_result_kept")


# -- 1. a whole agent session, call by call ---------------------------------------------------------


@pytest.mark.parametrize("config_id", CONFIG_IDS)
def test_session_invariants(config_id, tmp_path, stats):
    """Valid output, system and latest user kept, claims hold, raw history complete, bootstrap once."""

    @examples(14)
    @given(system=system_prompts(), script=scripts(), window=WINDOWS)
    def prop(system, script, window):
        checks = Checks()
        session = f"s-{uuid.uuid4().hex[:12]}"
        host = Host(make_settings(config_id, tmp_path), context_window=window, session_id=session)
        try:
            driver = Driver(host, checks, session_id=session, system=system)
            driver.play(script)
            if host.store is not None and "snapshot_restore" in host.settings.strategies:  # it records
                driver.check_raw_history(host.store)
            if tool_output_of(host) is not None:
                check_offloads(driver, host)
        finally:
            host.close()
        stats.example(checks.counts)

    prop()


@pytest.mark.parametrize("config_id", heavy_marked_slow(["llm_summary", "summary+snapshot"]))
def test_llm_summary_reaches_its_target_when_it_can(config_id, tmp_path, stats):
    """Long sessions of short messages: every compaction reaches the target whenever the messages it may
    never evict (system, first and latest user message, last keep_units units) leave room for the summary."""
    # Windows of 2,000-3,000 tokens and 6-12 turns: at 1,500 the protected tail alone was often over the target,
    # and short scripts never compacted (reach fell to 4 of 25 in a CI run). 8 runs now: 11-22 of 25 each.
    # The floor catches a generator that stops reaching the assertion.
    stats.require("summary_reaches_target", 0.2)

    @examples(25)
    @given(
        system=system_prompts(),
        script=scripts(min_turns=6, max_turns=12, max_steps=6, short=True),
        window=st.sampled_from([2000, 2500, 3000]),
    )
    def prop(system, script, window):
        checks = Checks()
        session = f"t-{uuid.uuid4().hex[:12]}"
        host = Host(make_settings(config_id, tmp_path), context_window=window, session_id=session)
        try:
            Driver(host, checks, session_id=session, system=system).play(script)
        finally:
            host.close()
        stats.example(checks.counts)

    prop()


# -- 2. exact restore in a new process --------------------------------------------------------------


# A random draw that failed (closing3.md, shrunk by hand): with configs/demo.toml, recall made room for its
# block (dropping the empty user message a compaction had kept) after snapshot_restore's last hook had run;
# no snapshot held that change, so a restart brought the message back. The host now saves after every hook.
_ROW = (
    '{"\\u4e46 2024-05-17 14:30": false, "\\ud83d\\ude00 \\u4e7bt\\u4e12\\u5354\\u92da\\u5d14u\\u9dc5": '
    '1.7976931348623155e+308, "/data/invoices/ORD-48213.pdf": -5.2087271095410456e+16, '
    '"$1,284.50 \\u8ba2\\u5355\\u53f7 HAT136": 130}'
)
RECALL_MADE_ROOM = {
    "system": [],
    "script": [
        User(""),
        Native([Call("lookup", {}, "call_0", "0 " * 10)]),
        React(Call("lookup", {"q": 0, "order_id": 0}, "call_0", ("[" + ", ".join([_ROW] * 9))[:1763]), ""),
        Chat(""),
        User("", True),
        User(
            "丨N(亇暍春事丼 L与习\u200b雠乄 42 kg 9f~ 2024-05-17 14:30 /data/invoices/ORD-48213.pdf "
            "🧪 🎉 椼汌亍S互五嵋飨 亓Z 42 kg $1,284.50 👨\u200d👩\u200d👧\u200d👦 42 kg"
        ),
    ],
    "window": 2000,
    "new_user": "New question.",
    "new_system": False,
}


@pytest.mark.parametrize("config_id", heavy_marked_slow(RESTORE_IDS))
def test_restore_is_exact(config_id, tmp_path, stats):
    """After a restart, the first call sees exactly the saved context (current system prompt wins) + the new
    user turn."""

    @examples(20)
    @given(system=system_prompts(), script=scripts(), window=WINDOWS, new_user=contents(), new_system=st.booleans())
    @example(**RECALL_MADE_ROOM)
    def prop(system, script, window, new_user, new_system):
        checks = Checks()
        session = f"r-{uuid.uuid4().hex[:12]}"
        old = Host(make_settings(config_id, tmp_path), context_window=window, session_id=session)
        try:
            driver = Driver(old, checks, session_id=session, system=system)
            driver.play(script)
            saved = list(driver.live)
        finally:
            old.close()
        probe = Probe()
        with open_store(tables(tmp_path)[config_id]["store"]) as store:
            snap = store.load_snapshot(session)
        new = Host(make_settings(config_id, tmp_path), context_window=window, session_id=session, plugins=[probe])
        try:
            fresh = ([{"role": "system", "content": "New process system prompt 新"}] if new_system else []) + [
                {"role": "user", "content": new_user}
            ]
            stored = [m for m in saved if not is_system(m) and not is_summary(m)]
            # A first request sent again (a retry on another worker) is not restored in front of itself
            # (issue 20): a new turn equal to a one-message conversation reads as that retry.
            # (A cache breakpoint is a provider hint, not part of the message.)
            assume(not (len(stored) == 1 and _without_hints(stored[0]) == {"role": "user", "content": new_user}))
            live = list(fresh)
            report = new.manage(live)
            arrived = list(fresh)  # what the strategies received: bootstrap is applied first
            new.apply_bootstrap(arrived, new.bootstrap_text(session_id=session))
            current_system = [m for m in arrived if is_system(m)]
            if not current_system:
                # No current prompt: the saved one, which exists only if a snapshot was ever written
                # (snapshot_restore alone under manage() writes none: see docs/reliability.md, gaps).
                current_system = [m for m in (snap.messages if snap else []) if is_system(m) and not is_summary(m)]
            # A recall block is inserted for one call only: it is not part of the saved session.
            saved = [m for m in saved if not is_recall_block(m)]
            expected = current_system + [m for m in saved if not (is_system(m) and not is_summary(m))] + [fresh[-1]]
            assert canon(probe.seen[0]) == canon(expected), "restored context differs from the saved one"
            assert [a.what for a in report.actions if a.strategy == "snapshot_restore"][:1] == ["restored"]
            checks.hit("restore_exact")
            check_call(fresh, live, report, new, checks, session_id=session, restored=True)
        finally:
            new.close()
        stats.example(checks.counts)

    prop()


def _without_hints(message: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k != "cache_breakpoint"}


# -- 3. CrewAI-shaped sessions: kickoffs, tasks with fresh lists, task nodes --------------------------

CREW_IDS = ["all", "summary+snapshot", "truncate+snapshot"]


@pytest.mark.parametrize("config_id", heavy_marked_slow(CREW_IDS))
def test_crewai_shaped_sessions(config_id, tmp_path, stats):
    """Several kickoffs of several tasks: raw history exactly once (final answers included), each
    kickoff's first call restores exactly what the store holds, the snapshot is the last task's list."""

    kickoff = st.lists(
        st.tuples(scripts(max_turns=2, max_steps=4), texts(max_words=20), task_context_texts()), min_size=1, max_size=3
    )

    @examples(8)
    @given(kickoffs=st.lists(kickoff, min_size=1, max_size=3), window=WINDOWS)
    def prop(kickoffs, window):
        checks = Checks()
        session = f"c-{uuid.uuid4().hex[:12]}"
        probe = Probe()
        host = Host(make_settings(config_id, tmp_path), context_window=window, session_id=session, plugins=[probe])
        produced: list[dict[str, Any]] = []
        tool_results: dict[str, str] = {}
        try:
            for tasks in kickoffs:
                host.start_run(session, new_lists=True)  # as the CrewAI adapter does at a kickoff
                for index, (script, answer, context_text) in enumerate(tasks):
                    name = f"task {index}"
                    start = TaskContext(task_name=name, task_index=index, description=name, context_text=context_text)
                    # Every CrewAI task builds its list anew; the adapter gives each task its own view
                    # for that, these tasks share one: say so.
                    host.new_lists(session, view="")
                    report = host.task_start(start, session_id=session)
                    assert report.failures == []
                    _check_task_scope(host, report, start, context_text, checks)
                    system = [{"role": "system", "content": "You are the crew's agent."}]
                    first_of_run = session not in host._table.sessions or host._table.sessions[session].calls == 0
                    if first_of_run:
                        snap = host.store.load_snapshot(session)
                        tail = [
                            r.message
                            for r in host.store.read_records(session, after_seq=snap.raw_length if snap else 0)
                        ]
                    driver = Driver(host, checks, session_id=session, system=system, tool_results=tool_results)
                    # CrewAI starts every task with [system, user]: one user message before the first call.
                    steps = script[1:]
                    while steps and isinstance(steps[0], User):
                        steps = steps[1:]
                    task_script = [User(f"Task {index}: " + (script[0].content if script else ""))] + steps
                    seen_before = len(probe.seen)
                    driver.play(task_script)
                    if first_of_run and (snap is not None or tail):
                        assert [a.what for a in driver.reports[0].actions if a.strategy == "snapshot_restore"][:1] == [
                            "restored"
                        ]
                        current_system = [dict(m) for m in system]
                        host.apply_bootstrap(current_system, host.bootstrap_text(session_id=session))
                        saved = [m for m in snap.messages if not (is_system(m) and not is_summary(m))] if snap else []
                        expected = current_system + saved + tail + [driver.produced[len(system)]]
                        assert canon(probe.seen[seen_before]) == canon(expected), "kickoff restore is not exact"
                        checks.hit("restore_exact")
                    driver.append({"role": "assistant", "content": answer})
                    report = crewai_task_end(
                        host, driver.live, answer, session_id=session, task_name=name, task_index=index
                    )
                    assert report.failures == [], report.failures
                    produced.extend(m for m in driver.produced if not is_system(m) and not is_summary(m))
                    snap = host.store.load_snapshot(session)
                    assert canon(snap.messages) == canon(driver.live), "task-end snapshot is not the task's final list"
                    checks.hit("snapshot_is_final_list")
            raw = [r.message for r in host.store.read_records(session)]
            assert canon(raw) == canon(produced), f"raw history: {len(raw)} messages, produced {len(produced)}"
            checks.hit("raw_exactly_once")
        finally:
            host.close()
        stats.example(checks.counts)

    prop()


def _check_task_scope(host: Host, report: Any, ctx: TaskContext, original: str, checks: Checks) -> None:
    for action in report.actions:
        if action.strategy != "task_scope":
            continue
        opts = host.settings.options_for("task_scope")
        if action.what == "carried":
            assert host.counter().count_text(ctx.context_text) <= opts.max_tokens
            assert action.details["tokens_after"] <= opts.max_tokens
            checks.hit("task_scope_within_budget")
        elif action.what == "isolated":
            assert ctx.context_text == ""


# -- 4. the public entry point on whole conversations ------------------------------------------------


@pytest.mark.parametrize("config_id", CONFIG_IDS)
def test_manage_on_whole_conversations(config_id, tmp_path, stats):
    """``ctxlife.manage`` on a complete list (as a framework-neutral user calls it)."""

    @examples(10)
    @given(system=system_prompts(), script=scripts(max_turns=8), window=WINDOWS)
    def prop(system, script, window):
        checks = Checks()
        settings = make_settings(config_id, tmp_path)
        session = f"m-{uuid.uuid4().hex[:12]}"
        messages = flatten(system, script)
        before = list(messages)
        report = ctxlife.manage(messages, config=settings, context_window=window, session_id=session)
        from ctxlife.api import _hosts

        managing = next(s.host for s in _hosts.values() if s.host is not None and s.host.settings is settings)
        check_call(before, messages, report, managing, checks, session_id=session)
        stats.example(checks.counts)

    prop()


# -- 5. strategy-level properties ----------------------------------------------------------------------


@pytest.mark.parametrize("cap", [100, 160, 400])
def test_tool_output_caps_and_recall_restores_every_character(cap, tmp_path, stats):
    """A capped result is within its cap; reading the recall pages in order gives the full text back."""
    # 11, 22 and 13 of 40 examples reached it in one run (caps 100, 160, 400): a floor well below that
    stats.require("recall_pages_exact", 0.1)
    host = Host(
        settings_from_dict(
            {"strategies": ["tool_output"], "tool_output": {"max_tokens": cap, "store_dir": str(tmp_path)}}
        ),
        context_window=8000,
    )
    strategy = tool_output_of(host)
    counter = host.counter()

    @examples(40)
    @given(result=tool_results())
    def prop(result):
        checks = Checks()
        ctx = ToolCallContext(tool_name="search", tool_input={}, result=result, raw_result=result)
        report = host.after_tool_call(ctx)
        assert report.failures == []
        capped = [a for a in report.actions if a.what == "capped"]
        if not capped:
            assert ctx.result == result and counter.count_text(result) <= cap
            checks.hit("uncapped_fits")
        else:
            assert counter.count_text(ctx.result) <= cap, f"{counter.count_text(ctx.result)} tokens > cap {cap}"
            checks.hit("capped_under_cap")
            ref = capped[0].details["ref"]
            pages, start = [], 0
            for _ in range(10_000):
                page = strategy.recall(ref, str(start), "")
                assert counter.count_text(page) <= max(cap, 100), "a recall page is over the cap"
                body, _, footer = page.rpartition("\n[ctxlife_recall: characters ")
                begin, _, rest = footer.partition("-")
                end = int(rest.split(" ", 1)[0])
                assert int(begin) == start and end >= start
                pages.append(body)
                if "end of the result" in footer:
                    break
                assert end > start, "recall made no progress"
                start = end
            assert "".join(pages) == result, "recall pages do not add up to the full result"
            checks.hit("recall_pages_exact")
        stats.example(checks.counts)

    try:
        prop()
    finally:
        host.close()


def test_tool_cache_serves_only_exact_earlier_results(stats):
    """Hits are the earlier result of the identical call (argument order ignored), never a failure,
    never for a tool outside the allow-list."""
    arg = st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(0, 2), max_size=3)
    call = st.tuples(
        st.sampled_from(["lookup", "Lookup", "search", "book_flight"]),
        arg,
        st.one_of(texts(max_words=6), st.just("Error: backend down")),
    )

    @examples(60)
    @given(calls=st.lists(call, max_size=25))
    def prop(calls):
        checks = Checks()
        host = Host(
            settings_from_dict({"strategies": ["tool_cache"], "tool_cache": {"tools": ["lookup", "search"]}}),
            context_window=8000,
        )
        first: dict[tuple[str, str], str] = {}
        for tool, args, result in calls:
            shuffled = dict(reversed(list(args.items())))
            ctx = ToolCallContext(tool_name=tool, tool_input=shuffled)
            host.before_tool_call(ctx)
            key = (tool.lower(), canon(args))
            if ctx.result is not None:
                assert tool.lower() in ("lookup", "search")
                assert (
                    key in first
                    and ctx.result.endswith("\n" + first[key])
                    and ctx.result.startswith("[cached result from call ")
                )
                assert not first[key].startswith("Error")
                checks.hit("cache_hit_is_exact")
                served = ctx.result
            else:
                served = result
                ctx.result, ctx.raw_result = result, result
            host.after_tool_call(ctx)
            if ctx.skipped_by is None and not result.startswith("Error"):
                first.setdefault(key, result)
            assert ctx.result == served
        host.close()
        stats.example(checks.counts)

    prop()


def test_task_scope_stays_within_its_budget(stats):
    @examples(40)
    @given(
        text=task_context_texts(),
        policy=st.sampled_from(["carry", "isolate", "full"]),
        budget=st.sampled_from([50, 120, 500]),
    )
    def prop(text, policy, budget):
        checks = Checks()
        host = Host(
            settings_from_dict({"strategies": ["task_scope"], "task_scope": {"policy": policy, "max_tokens": budget}}),
            context_window=8000,
        )
        ctx = TaskContext(task_name="t", task_index=1, context_text=text)
        report = host.task_start(ctx)
        assert report.failures == []
        if policy == "full" or not text.strip():
            assert ctx.context_text == text
        elif policy == "isolate":
            assert ctx.context_text == ""
        else:
            assert host.counter().count_text(ctx.context_text) <= budget
            checks.hit("task_scope_within_budget")
        end = TaskContext(task_name="t", task_index=1, output=text)
        assert host.task_end(end).failures == []
        host.close()
        stats.example(checks.counts)

    prop()


def test_truncate_last_n_keeps_exactly_system_first_user_and_last_rounds(stats):
    """A model of truncate_last_n: system messages + the first user message + the question being worked
    on + the last N rounds, in order."""

    @examples(60)
    @given(system=system_prompts(), script=scripts(max_turns=8), rounds=st.integers(1, 4), pin=st.booleans())
    def prop(system, script, rounds, pin):
        checks = Checks()
        host = Host(
            settings_from_dict(
                {
                    "strategies": ["truncate_last_n"],
                    "truncate_last_n": {"rounds": rounds, "pin_first_user": pin, "always": True},
                }
            ),
            context_window=8000,
        )
        messages = flatten(system, [i if isinstance(i, User) else Chat("step") for i in script])
        before = list(messages)
        host.manage(messages)
        starts = round_starts(before)
        if len(starts) <= rounds:
            expected = before
        else:
            cut = starts[-rounds]
            turn = current_turn_index(before)  # the question being worked on always stays
            expected = [
                m for i, m in enumerate(before) if is_system(m) or i >= cut or (pin and i == starts[0]) or i == turn
            ]
        assert [id(m) for m in messages] == [id(m) for m in expected]
        checks.hit("truncate_model")
        host.close()
        stats.example(checks.counts)

    prop()


def test_lone_surrogates_and_control_characters_round_trip(tmp_path, stats):
    """Contents with lone surrogates (legal in JSON, not in UTF-8) and NUL survive the whole pipeline:
    counted, summarized, stored and restored exactly."""

    @examples(15)
    @given(parts=st.lists(contents(surrogates=True), min_size=4, max_size=16))
    def prop(parts):
        checks = Checks()
        session = f"u-{uuid.uuid4().hex[:12]}"
        host = Host(make_settings("summary+snapshot", tmp_path), context_window=400, session_id=session)
        try:
            script: list[Any] = []
            for i, part in enumerate(parts):
                script.append(User(part) if i % 3 == 0 else React(Call("lookup", {"q": i}, "call_0", part), part[:40]))
            driver = Driver(host, checks, session_id=session, system=[{"role": "system", "content": "sys \ud800 \x00"}])
            driver.play(script)
            driver.check_raw_history(host.store)
        finally:
            host.close()
        stats.example(checks.counts)

    prop()


# -- 6. known gaps, as failing properties ---------------------------------------------------------------


def test_react_current_question_survives_truncation(stats):
    @examples(30)
    @given(
        history=st.lists(texts(max_words=6).filter(bool), min_size=1, max_size=3),
        question=texts(max_words=8).filter(bool),
        steps=st.integers(2, 5),
    )
    def prop(history, question, steps):
        assume(question != REACT_PROMPT)
        host = Host(
            settings_from_dict({"strategies": ["truncate_last_n"], "truncate_last_n": {"always": True}}),
            context_window=8000,
        )
        messages: list[dict[str, Any]] = [{"role": "system", "content": "sys"}]
        for h in history:
            messages += [{"role": "user", "content": h}, {"role": "assistant", "content": "ok"}]
        current = {"role": "user", "content": "Q: " + question}
        messages.append(current)
        for i in range(steps):
            messages.append(
                {"role": "assistant", "content": f"Thought: t\nAction: lookup\nAction Input: {{}}\nObservation: r{i}"}
            )
            messages.append({"role": "user", "content": REACT_PROMPT})
        host.manage(messages)
        assert first_real_user(messages) is current, "the question being worked on was dropped"
        host.close()

    prop()


def test_bootstrap_block_is_replaced_not_duplicated_when_its_text_changes(monkeypatch):
    settings = settings_from_dict(
        {"strategies": ["bootstrap"], "bootstrap": {"text": "Today is {date}. Rules: be precise."}}
    )
    messages = [{"role": "system", "content": "You are XiaoPaw."}, {"role": "user", "content": "hi"}]
    Host(settings, context_window=8000, session_id="s1").manage(messages)

    class Tomorrow(datetime.date):
        @classmethod
        def today(cls):
            return datetime.date(2099, 1, 2)

    import ctxlife.host

    monkeypatch.setattr(ctxlife.host, "_dt", SimpleNamespace(date=Tomorrow))
    messages.append({"role": "user", "content": "next day"})
    Host(settings, context_window=8000, session_id="s1").manage(messages)  # a restart the next day
    assert messages[0]["content"].count("Rules: be precise.") == 1, messages[0]["content"]


PREFILLS = ["none", "system_holds_text", "system_is_text", "previous_section", "stale_section"]


def test_bootstrap_is_idempotent_across_hosts_calls_and_prefilled_prompts(stats):
    """Wrapping twice, calling again, a new process, a prompt that already holds the text: once.

    ``prefill`` is what the list holds before the first call: nothing; an app system prompt that
    already contains the rendered text (with other instructions around it, or as all of it); the
    section an earlier process inserted; or a section of an older rendering (replaced, not added).
    """

    @examples(60)
    @given(
        system=system_prompts(),
        hosts=st.integers(1, 3),
        calls=st.integers(1, 3),
        role=st.sampled_from([None, "Analyst", "写手"]),
        prefill=st.sampled_from(PREFILLS),
    )
    def prop(system, hosts, calls, role, prefill):
        checks = Checks()
        event(f"prefill: {prefill}")
        checks.hit(f"bootstrap_prefill_{prefill}")
        settings = settings_from_dict({"strategies": ["bootstrap"], "bootstrap": {"text": BOOTSTRAP_TEXT}})
        probe = Host(settings, context_window=8000, session_id="same-session")
        text = probe.bootstrap_text(agent_role=role)
        probe.close()
        messages = [dict(m) for m in system] + [{"role": "user", "content": "hello"}]
        if prefill == "system_holds_text":
            messages.insert(0, {"role": "system", "content": f"You are the app.\n{text}\nAnswer briefly."})
        elif prefill == "system_is_text":
            messages.insert(0, {"role": "system", "content": text})
        elif prefill == "previous_section":
            apply_bootstrap(messages, text)
        elif prefill == "stale_section":
            apply_bootstrap(messages, "House rules of an older release: be terse.")
        app_prompt = messages[0]["content"] if prefill.startswith("system_") else None
        for _ in range(hosts):
            host = Host(settings, context_window=8000, session_id="same-session")
            for _ in range(calls):
                host.before_llm_call(messages, agent_role=role)
                assert host.bootstrap_text(agent_role=role) == text
                joined = "\n".join(str(m.get("content")) for m in messages)
                assert joined.count(text) == 1, f"the bootstrap text is in the list {joined.count(text)} times"
                assert "older release" not in joined, "a stale bootstrap section was kept beside the new one"
                if app_prompt is not None:
                    assert messages[0]["content"] == app_prompt, "the app's own prompt holding the text was changed"
                assert validate(messages) == []
                checks.hit("bootstrap_once")
            host.close()
        stats.example(checks.counts)

    prop()


def test_a_user_message_that_looks_like_a_summary_is_still_recorded(tmp_path):
    host = Host(make_settings("snapshot_restore", tmp_path), context_window=8000, session_id="lookalike")
    checks = Checks()
    driver = Driver(host, checks, session_id="lookalike", system=[{"role": "system", "content": "sys"}])
    driver.play([User("History summary: here is what we did last week; please continue."), Chat("ok"), User("next")])
    raw = [r.message for r in host.store.read_records("lookalike")]
    assert [m["content"] for m in raw][:1] == ["History summary: here is what we did last week; please continue."]


def test_restore_keeps_every_message_of_the_new_list(tmp_path):
    settings = make_settings("snapshot_restore", tmp_path)
    old = Host(settings, context_window=8000, session_id="multi")
    old.manage([{"role": "system", "content": "sys"}, {"role": "user", "content": "first session turn"}])
    old.close()
    new = Host(make_settings("snapshot_restore", tmp_path), context_window=8000, session_id="multi")
    live = [
        {"role": "system", "content": "sys"},
        {"role": "assistant", "content": "Welcome back! (greeting added by the app)"},
        {"role": "user", "content": "two questions:"},
        {"role": "user", "content": "what did we discuss?"},
    ]
    new.manage(live)
    contents = [m["content"] for m in live]
    raw = [m["content"] for m in [r.message for r in new.store.read_records("multi")]]
    assert "two questions:" in contents and "Welcome back! (greeting added by the app)" in contents
    assert "two questions:" in raw


@pytest.mark.parametrize(
    "messages",
    [
        [
            {"role": "user", "content": "task"},
            {"role": "user", "content": "0 0 " * 150},
            {"role": "assistant", "content": ""},
        ],
        [
            {"role": "user", "content": ""},
            {"role": "assistant", "content": "0"},
            {"role": "user", "content": ""},
            {"role": "user", "content": "0 0 " * 100},
        ],
    ],
    ids=["nothing_to_evict", "summary_larger_than_span"],
)
def test_llm_summary_over_the_window_claims_only_real_gains(messages):
    from reliability_gen import captured_events

    host = Host(
        settings_from_dict({"strategies": ["llm_summary"], "llm_summary": {"summarizer": "extractive"}}),
        context_window=400,
    )
    with captured_events() as events:
        report = host.manage(messages)
    assert report.tokens_before > report.context_window
    claims = [(a.what, a.details) for a in report.actions if a.what in ("truncated", "compacted")]
    assert not claims or report.tokens_after < report.tokens_before, (
        f"claims {claims}, tokens {report.tokens_before} -> {report.tokens_after}"
    )
    assert not [e for e in events if e["event"] == "ctxlife.summary_failed" and e["evicted_messages"] == 0]
