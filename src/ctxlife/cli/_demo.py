"""``ctxlife demo``: a multi-turn CrewAI assistant session managed by ctxlife, offline by default.

What it shows (twelve turns of a XiaoPaw-like work assistant, a restart in a new process after turn
8, the summary table and chart): README.md; its config: ``configs/demo.toml``. The model is scripted
and offline unless ``--model`` names a real one.
"""

from __future__ import annotations

import importlib.resources
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

import ctxlife
from ctxlife.config import local_store_url, read_toml, settings_from_dict
from ctxlife.errors import CtxlifeError
from ctxlife.hookspecs import hookimpl
from ctxlife.integrations import require
from ctxlife.integrations.scripted import offline_environment, scripted_llm
from ctxlife.messages import is_recall_block, is_summary, is_system
from ctxlife.retention import Need, NeedIndex, Retention

SESSION_ID = "xiaopaw-demo"
WINDOW = 8192
RESTART_AFTER = 8
ROLE = "XiaoPaw"


# -- the sandbox files (realistic sizes: a CSV export, notes, a log, a roadmap) ---------------


def sandbox_files() -> dict[str, str]:
    regions = ["North", "South", "East", "West", "Central", "Coast"]
    csv_rows = ["date,region,sku,units,revenue_usd,channel"]
    for i in range(140):
        units = 20 + (i * 37) % 180
        csv_rows.append(
            f"2024-11-{18 + i % 7:02d},{regions[i % 6]},SKU-{300 + i % 45},{units},"
            f"{units * (19 + i % 7)}.00,{'online' if i % 3 else 'retail'}"
        )
    standup = ["# Stand-up notes, week 47", ""]
    for day, name in enumerate(["Mon", "Tue", "Wed", "Thu", "Fri"]):
        standup += [
            f"## {name} 2024-11-{18 + day}",
            f"- Shipped F-{210 + day * 3} (checkout redesign, part {day + 1}).",
            f"- Blocked: payment sandbox outage, ticket INC-{4400 + day}; owner: lin.wei@example.com.",
            f"- QA found {3 + day} regressions in the mobile build {day + 2}.{day}.0; fix ETA 2024-11-{22 + day}.",
            "",
        ]
    log = []
    for i in range(160):
        prio = "P1" if i % 23 == 0 else ("P2" if i % 5 == 0 else "P3")
        log.append(
            f"2024-11-{18 + i % 5:02d}T{8 + i % 10:02d}:{(i * 7) % 60:02d}Z ticket=TCK-{7000 + i} "
            f"prio={prio} order=ORD-{52000 + i * 3} "
            f"customer=cust_{1000 + i} status={'open' if i % 4 else 'closed'} "
            f'msg="{"refund delayed" if i % 2 else "login failure"} after update"'
        )
    roadmap = ["# Roadmap Q4", ""] + [
        f"- M{i}: {['checkout v2', 'loyalty points', 'EU tax engine', 'offline mode', 'partner API'][i % 5]} "
        f"in region {regions[i % 6]}, due 2024-12-{2 + i:02d}, budget ${40 + i * 5}k"
        for i in range(24)
    ]
    return {
        "sales_w47.csv": "\n".join(csv_rows),
        "standup_w47.md": "\n".join(standup),
        "tickets_w47.log": "\n".join(log),
        "roadmap_q4.md": "\n".join(roadmap),
    }


# -- the conversation: twelve user turns, and the scripted model's replies --------------------

TURNS = [
    "Hi XiaoPaw! I saved this week's sales export as sales_w47.csv in your sandbox. What's in it?",
    "Yes, that format is right. Which region had the most revenue?",
    "Now read the stand-up notes, standup_w47.md.",
    "Which blockers came up, and who owns them?",
    "Please look at the support log tickets_w47.log.",
    "How many P1 tickets were there, and which orders do they concern?",
    "Read the roadmap too: roadmap_q4.md.",
    "Draft the weekly report: summary first, then next week's plans. Save it as weekly_report_w47.md.",
    "I'm back. Remind me: which region led revenue, and what were the P1 orders?",
    "Add the P1 ticket numbers to the report file.",
    "What was the total revenue this week?",
    "Thanks, that's all for this week.",
]


def _react(tool: str, args: dict[str, Any], thought: str) -> str:
    return f"Thought: {thought}\nAction: {tool}\nAction Input: {json.dumps(args)}"


def _final(answer: str) -> str:
    return f"Thought: I can answer now.\nFinal Answer: {answer}"


def _recall_from_context(query: str) -> Callable[[list[dict[str, Any]]], str]:
    """A scripted step that reads a shortened result back, using the ref the marker gave."""

    def reply(messages: list[dict[str, Any]]) -> str:
        refs = re.findall(r"to_[0-9a-f]{16}", "\n".join(str(m.get("content") or "") for m in messages))
        if not refs:
            return _final("I could not find the full log any more.")
        return _react(
            "ctxlife_recall",
            {"ref": refs[-1], "start": "0", "query": query},
            "The log was shortened; I'll search the full text.",
        )

    return reply


def _answer_from_context(messages: list[dict[str, Any]]) -> str:
    """Turn 9 (after the restart): the scripted model answers only from what it was sent."""
    context = "\n".join(str(m.get("content") or "") for m in messages[:-1])
    region = re.search(r"(\w+) led revenue", context)
    orders = re.search(r"on orders ((?:ORD-\d+, )*ORD-\d+)", context)
    said = [f"{region.group(1)} led revenue." if region else "I no longer have which region led revenue."]
    said.append(f"The P1 orders were {orders.group(1)}." if orders else "I no longer have the P1 orders.")
    return _final(" ".join(said))


def scripted_replies() -> list[list[Any]]:
    """Per turn, the scripted model's replies (ReAct text, or a function of the messages)."""
    return [
        [
            _react(
                "read_sandbox_file",
                {"name": "sales_w47.csv"},
                "Rule: confirm the data format first. I'll read the file.",
            ),
            _final(
                "sales_w47.csv is a CSV with 140 rows and columns date, region, sku, units, "
                "revenue_usd, channel (2024-11-18 to 2024-11-24). Is this the format you expected before I "
                "analyse it?"
            ),
        ],
        [
            _final(
                "Central led revenue this week, ahead of Coast and North; online sales were about two thirds of units."
            )
        ],
        [
            _react("read_sandbox_file", {"name": "standup_w47.md"}, "I'll read the stand-up notes."),
            _final(
                "The notes cover Mon-Fri: F-210 to F-222 shipped; the payment sandbox outage blocked work all week."
            ),
        ],
        [
            _final(
                "Blockers: payment sandbox outage (INC-4400 to INC-4404), owner lin.wei@example.com; "
                "mobile regressions with fixes due 2024-11-22 to 2024-11-26."
            )
        ],
        [
            _react("read_sandbox_file", {"name": "tickets_w47.log"}, "I'll read the support log."),
            _final(
                "The log has 160 tickets from 2024-11-18 to 2024-11-22, mostly P3; it was shortened, I can search it."
            ),
        ],
        [
            _recall_from_context("prio=P1"),
            _final(
                "There were 7 P1 tickets: TCK-7000, TCK-7023, TCK-7046, TCK-7069, TCK-7092, "
                "TCK-7115, TCK-7138, on orders ORD-52000, ORD-52069, ORD-52138, ORD-52207, ORD-52276, ORD-52345, "
                "ORD-52414."
            ),
        ],
        [
            _react("read_sandbox_file", {"name": "roadmap_q4.md"}, "I'll read the roadmap."),
            _final(
                "The Q4 roadmap has 24 milestones M0-M23 due 2024-12-02 to 2024-12-25; next "
                "up: checkout v2 (M0) and loyalty points (M1)."
            ),
        ],
        [
            _react(
                "write_sandbox_file",
                {
                    "name": "weekly_report_w47.md",
                    "content": "# Weekly report W47\n## Summary\n- Revenue led by Central.\n- "
                    "F-210..F-222 shipped; payment sandbox outage (INC-4400).\n- 7 P1 tickets.\n## Next week\n- "
                    "M0 checkout v2, M1 loyalty points.\n",
                },
                "Summary first, then plans, as the user prefers.",
            ),
            _final(
                "Saved weekly_report_w47.md: summary first (revenue, shipped features, outage, "
                "7 P1 tickets), then next week's plans (M0, M1)."
            ),
        ],
        [_answer_from_context],
        [
            _react("read_sandbox_file", {"name": "weekly_report_w47.md"}, "I'll open the report first."),
            _react(
                "write_sandbox_file",
                {
                    "name": "weekly_report_w47.md",
                    "content": "# Weekly report W47\n## Summary\n- Revenue led by Central.\n- "
                    "F-210..F-222 shipped; payment sandbox outage (INC-4400).\n- 7 P1 tickets: TCK-7000, TCK-7023, "
                    "TCK-7046, TCK-7069, TCK-7092, TCK-7115, TCK-7138.\n## Next week\n- M0 checkout v2, M1 loyalty "
                    "points.\n",
                },
                "Now add the ticket numbers.",
            ),
            _final("Added the seven P1 ticket numbers (TCK-7000 ... TCK-7138) to weekly_report_w47.md."),
        ],
        [
            _react("read_sandbox_file", {"name": "sales_w47.csv"}, "I need the revenue column again."),
            _final("Total revenue for 2024-11-18 to 2024-11-24 was about $439k across 140 rows."),
        ],
        [_final("You're welcome! The report is in weekly_report_w47.md. Have a good weekend.")],
    ]


# -- what "facts kept" means here -----------------------------------------------------------

#: Answer keys, written with the sandbox data and the script (never by ctxlife's extractor): for a
#: (turn, model call within the turn), the values the agent states there that it can only know
#: from earlier in the session. Each is kept when it is in the context sent at that call.
ANSWER_KEYS: dict[tuple[int, int], list[str]] = {
    (3, 0): ["INC-4400", "lin.wei@example.com"],  # turn 4: the blockers, read in turn 3
    (8, 0): [
        "Central",
        "ORD-52000",
        "ORD-52069",
        "ORD-52138",
        "ORD-52207",
        "ORD-52276",
        "ORD-52345",
        "ORD-52414",
    ],  # turn 9, after the restart
    (9, 1): [
        "TCK-7000",
        "TCK-7023",
        "TCK-7046",
        "TCK-7069",
        "TCK-7092",
        "TCK-7115",
        "TCK-7138",
    ],  # turn 10: written into the report
}
#: The question of turn 9 (after the restart) about turn 2 (before the first compaction), and the
#: sentence of turn 2 that answers it: where was it in the context sent?
RECALL_SHOWCASE = ((8, 0), "Central led revenue")

FACTS_KEPT_DEFINITION = (
    "facts kept = values the agent's answers state that it could only know from earlier in the session "
    "(answer keys written with the demo's data), found in the context sent at the call that states them"
)
LEGEND = (
    "Each model call: tokens in the list CrewAI built -> tokens ctxlife sent (share of the window). "
    "They go down at a compaction; they go UP at a restore: every kickoff (each user turn, and the "
    "restarted process) starts CrewAI from a fresh [system, user] list, and snapshot_restore puts the "
    "saved session back into it."
)


# -- the crew -----------------------------------------------------------------------------


def build_crew(llm: Any, sandbox: Path) -> Any:
    # lazy: crewai is an optional extra (ctxlife[crewai]), and slow to import
    from crewai import Agent, Crew, Task
    from crewai.tools import tool

    root = sandbox.resolve()

    def inside(name: str) -> Path | None:
        path = (root / name).resolve()
        return path if root in path.parents else None

    @tool("read_sandbox_file")
    def read_sandbox_file(name: str) -> str:
        """Read a file the user saved in the sandbox folder."""
        path = inside(name)
        if path is None or not path.is_file():
            return f"No file named {name!r} in the sandbox."
        return path.read_text(encoding="utf-8")

    @tool("write_sandbox_file")
    def write_sandbox_file(name: str, content: str) -> str:
        """Save a file in the sandbox folder (replacing it if it exists)."""
        path = inside(name)
        if path is None:
            return f"Refused: {name!r} is outside the sandbox."
        path.write_text(content, encoding="utf-8")
        return f"Saved {name} ({len(content)} characters)."

    agent = Agent(
        role=ROLE,
        goal="Help the product manager with files, analysis and weekly reports",
        backstory="You are XiaoPaw, a Feishu work assistant. You work with files the user saves in your sandbox.",
        llm=llm,
        tools=[read_sandbox_file, write_sandbox_file],
        verbose=False,
    )
    task = Task(
        description="The user says: {message}", expected_output="A helpful, precise reply to the user.", agent=agent
    )
    return Crew(agents=[agent], tasks=[task], verbose=False)


# -- what we measure per model call ---------------------------------------------------------


@dataclass
class CallRecord:
    turn: int
    sent_tokens: int
    unmanaged_tokens: int
    actions: list[str]
    details: dict[str, Any] = field(default_factory=dict)
    context_window: int = WINDOW
    budget: int = int(0.4 * WINDOW)
    facts_needed: int = 0
    facts_kept: int = 0
    missing: list[str] = field(default_factory=list)
    recalled: int = 0  # passages recall brought back at this call
    showcase: str = ""  # for the RECALL_SHOWCASE call: where its answer was in the context


class Tracker:
    """Measures every model call: what ctxlife sent, and what a naive session would have sent.

    "Without ctxlife" means a naive session: under the same system prompt, the full transcript
    (the session's raw history, every tool result in full) on every call. It is a ctxlife plugin
    (its hooks run after the strategies) plus a listener for the host's reports.
    """

    name = "demo_tracker"

    def __init__(self, console: Any, calls_before: int = 0, crossed: bool = False, tool_extra: int = 0) -> None:
        self.console = console
        self.host: Any = None
        self.turn = 0
        self.calls_before = calls_before
        self.records: list[CallRecord] = []
        self.tool_extra = tool_extra  # tokens tool_output kept out of the context so far
        self.system_tokens = 0
        self.crossed = crossed
        self.turn_calls: dict[int, int] = {}
        self.kept = Retention()
        self.missing: list[str] = []
        self.showcase = ""

    @hookimpl(trylast=True)
    def ctxlife_before_llm_call(self, ctx: Any) -> None:
        # After the strategies (recall's block included): the system prompt as sent (bootstrap
        # included, summaries excluded).
        self.system_tokens = ctx.tokens.count_messages([m for m in ctx.messages if is_system(m) and not is_summary(m)])
        # Facts kept: the answer keys of this call, searched in exactly what is sent.
        at = self.turn_calls.get(self.turn, 0)
        self.turn_calls[self.turn] = at + 1
        values = ANSWER_KEYS.get((self.turn, at), [])
        self.missing = [
            v for v in values if not NeedIndex([Need((v,), 0, kind="answer")]).score_call(0, ctx.messages).kept
        ]
        self.kept = Retention(needs=len(values), kept=len(values) - len(self.missing))
        self.showcase = ""
        if (self.turn, at) == RECALL_SHOWCASE[0]:
            holding = [m for m in ctx.messages[:-1] if RECALL_SHOWCASE[1] in str(m.get("content") or "")]
            self.showcase = (
                "not in the context"
                if not holding
                else "recalled from the history"
                if all(is_recall_block(m) for m in holding)
                else "in the context"
            )

    @hookimpl
    def ctxlife_after_tool_call(self, ctx: Any) -> None:
        if ctx.tool_name == "ctxlife_recall" and ctx.result is not None:
            self.console.print(
                f"   [cyan]ctxlife_recall[/cyan]: the agent read back {ctx.tokens.count_text(ctx.result):,} "
                "tokens of a shortened result"
            )
            return
        raw = ctx.raw_result if isinstance(ctx.raw_result, str) else None
        if raw is None or ctx.result is None or ctx.skipped_by is not None:
            return
        full, shown = ctx.tokens.count_text(raw), ctx.tokens.count_text(ctx.result)
        if shown < full:
            self.tool_extra += full - shown
            self.console.print(
                f"   [cyan]tool_output[/cyan]: {ctx.tool_name} result capped {full:,} -> {shown:,} "
                "tokens (the full text stays readable with ctxlife_recall)"
            )

    def on_report(self, report: Any) -> None:
        if report.node != "before_llm_call":
            return
        store = self.host.store
        raw = [r.message for r in store.read_records(SESSION_ID)] if store is not None else []
        unmanaged = max(
            report.tokens_before, self.system_tokens + self.host.counter().count_messages(raw) + self.tool_extra
        )
        record = CallRecord(
            self.turn,
            report.tokens_after,
            unmanaged,
            [f"{a.strategy}:{a.what}" for a in report.actions if a.what != "skipped"],
            context_window=report.context_window,
            budget=report.budget,
            facts_needed=self.kept.needs,
            facts_kept=self.kept.kept,
            missing=list(self.missing),
            showcase=self.showcase,
        )
        number = self.calls_before + len(self.records) + 1
        if number == 1:
            self.console.print(f"   [dim]{LEGEND}[/dim]")
        lines = [
            f"   call {number:>2}: {report.tokens_before:>6,} -> {report.tokens_after:>6,} tokens "
            f"sent ({report.tokens_after / report.context_window:.0%} of the window)"
        ]
        if record.facts_needed:
            lines[0] += f"; facts kept {record.facts_kept}/{record.facts_needed}" + (
                f" (missing {', '.join(record.missing)})" if record.missing else ""
            )
        if report.tokens_before > report.budget and not self.crossed:
            self.crossed = True
            lines.append(
                f"   [yellow]the context crossed the {self.host.settings.threshold:.0%} line "
                f"({report.budget:,} tokens)[/yellow]"
            )
        for action in report.actions:
            d = action.details
            if action.what == "compacted":
                record.details = {
                    "before": d["tokens_before"],
                    "after": d["tokens_after"],
                    "facts_found": d["facts_found"],
                    "facts_kept": d["facts_kept"],
                }
                lines.append(
                    f"   [magenta]llm_summary[/magenta]: compacted {d['tokens_before']:,} -> "
                    f"{d['tokens_after']:,} tokens; "
                    f"{d['evicted_messages']} messages summarized"
                )
            elif action.what == "recalled":
                record.recalled = d["passages"]
                lines.append(
                    f"   [blue]recall[/blue]: brought back {d['passages']} passage(s) "
                    f"({d['tokens']:,} tokens) "
                    "from earlier in the session, right before the question"
                )
            elif action.what == "restored":
                lines.append(
                    f"   [green]snapshot_restore[/green]: restored {d['messages']} messages of the session "
                    "into the kickoff's fresh list"
                )
            elif action.what == "snapshot_saved":
                lines.append(f"   [green]snapshot_restore[/green]: snapshot written ({d['messages']} messages)")
        self.console.print("\n".join(lines))
        self.records.append(record)


# -- running turns --------------------------------------------------------------------------


def _settings(config_path: Path, workspace: Path) -> Any:
    """The demo config, with its session store and tool-output folder inside the workspace."""
    data = read_toml(config_path)
    data["store"] = local_store_url("file", (workspace / "sessions").resolve())
    if "tool_output" in data.get("strategies", []):
        data.setdefault("tool_output", {})["store_dir"] = str((workspace / "tool_outputs").resolve())
    return settings_from_dict(data, source=str(config_path))


def run_turns(
    config_path: Path, workspace: Path, model: str | None, first: int, last: int, console: Any, tracker: Tracker
) -> list[CallRecord]:
    """Run user turns ``first..last-1`` in this process, with a new crew; return the call records."""
    offline_environment()
    from ctxlife.integrations.crewai import host_of  # lazy: crewai reads the environment set just above

    if model:
        from crewai import LLM  # lazy: crewai is an optional extra, and slow to import

        llm: Any = LLM(model=model)
    else:
        replies = [reply for turn in scripted_replies()[first:last] for reply in turn]
        llm = scripted_llm(replies, context_window=WINDOW)
    crew = build_crew(llm, workspace / "sandbox")
    ctxlife.wrap(crew, _settings(config_path, workspace), session_id=SESSION_ID, plugins=[tracker])
    host = host_of(crew)
    assert host is not None
    tracker.host = host
    host.listeners.append(tracker.on_report)
    if first == 0:
        text = host.bootstrap_text(agent_role=ROLE)
        console.print(
            f"[bold]bootstrap[/bold]: {host.counter().count_text(text)} tokens of profile and "
            "rules go into XiaoPaw's system prompt:"
        )
        console.print("   [dim]" + text.replace("\n", "\n   ") + "[/dim]")
    for turn in range(first, last):
        tracker.turn = turn
        console.rule(f"turn {turn + 1}/{len(TURNS)}", style="dim")
        console.print(f"[bold]user[/bold]: {TURNS[turn]}")
        result = crew.kickoff(inputs={"message": TURNS[turn]})
        console.print(f"[bold]XiaoPaw[/bold]: {result.raw}")
    ctxlife.unwrap(crew)
    return tracker.records


# -- the command ----------------------------------------------------------------------------


def default_config_path() -> Path:
    """The demo's config, shipped inside the package (``ctxlife/configs/demo.toml``; the checkout's
    ``configs/demo.toml`` is a symlink to it), so ``ctxlife demo`` works from any folder."""
    resource = importlib.resources.files("ctxlife") / "configs" / "demo.toml"
    return Path(str(resource))


def run_demo(
    config: str | None = None,
    model: str | None = None,
    turns: int | None = None,
    workspace: str = "workspace",
    chart: str | None = None,
) -> int:
    require("crewai", "crewai,plot", "ctxlife demo")
    console = Console()
    config_path = Path(config) if config else default_config_path()
    if not config_path.is_file():
        raise CtxlifeError(f"config file {config_path} does not exist; pass --config FILE")
    total = min(turns or len(TURNS), len(TURNS))
    ws = Path(workspace)
    _fresh_workspace(ws)
    started = time.perf_counter()
    console.print(
        f"[bold]ctxlife demo[/bold]: XiaoPaw, {total} user turns, config {config_path}; "
        + (f"model {model}" if model else f"scripted offline model, window {WINDOW:,} tokens")
    )
    with console.status("importing CrewAI ..."):
        import crewai  # noqa: F401  # lazy: the import is the slow part; show it as such

    phase_one = min(RESTART_AFTER, total)
    tracker = Tracker(console)
    records = run_turns(config_path, ws, model, 0, phase_one, console, tracker)
    if total > phase_one:
        console.rule(
            "[bold]simulated restart[/bold]: a new process, a new crew, the same session id", style="bold yellow"
        )
        out = ws / "phase2.json"
        cmd = [
            sys.executable,
            "-m",
            "ctxlife.cli._demo",
            "--phase2",
            str(config_path),
            str(ws),
            str(phase_one),
            str(total),
            model or "",
            str(out),
            str(len(records)),
            "1" if tracker.crossed else "0",
            str(tracker.tool_extra),
        ]
        done = subprocess.run(cmd, env={**os.environ, "COLUMNS": str(console.width)})
        if done.returncode != 0:
            raise CtxlifeError(f"the restarted demo process failed with exit code {done.returncode}")
        records += [CallRecord(**r) for r in json.loads(out.read_text(encoding="utf-8"))]
    _summary(console, records, phase_one)
    chart_path = Path(chart) if chart else ws / "demo_context.png"
    if _chart(records, chart_path, phase_one):
        console.print(f"chart: {chart_path}")
    console.print(f"[dim]{time.perf_counter() - started:.1f} s; session files in {ws / 'sessions'}[/dim]")
    return 0


def _fresh_workspace(ws: Path) -> None:
    for sub in ("sessions", "sandbox", "tool_outputs"):
        shutil.rmtree(ws / sub, ignore_errors=True)
    (ws / "sandbox").mkdir(parents=True, exist_ok=True)
    for name, text in sandbox_files().items():
        (ws / "sandbox" / name).write_text(text, encoding="utf-8")


def _summary(console: Any, records: list[CallRecord], restart_at: int) -> None:
    sent = sum(r.sent_tokens for r in records)
    naive = sum(r.unmanaged_tokens for r in records)
    compactions = [r for r in records if r.details]
    table = Table(title="Session summary")
    table.add_column("")
    table.add_column("value", justify="right")
    table.add_row("user turns", str(len({r.turn for r in records})))
    table.add_row("model calls", str(len(records)))
    table.add_row("tokens sent without ctxlife (naive full history)", f"{naive:,}")
    table.add_row("tokens sent with ctxlife", f"{sent:,}")
    table.add_row("saved", f"{naive - sent:,} ({1 - sent / naive:.0%})" if naive else "-")
    table.add_row(
        "peak context without / with",
        f"{max(r.unmanaged_tokens for r in records):,} / {max(r.sent_tokens for r in records):,}",
    )
    table.add_row("compactions", str(len(compactions)))
    recalled = [r for r in records if r.recalled]
    if recalled:
        passages = sum(r.recalled for r in recalled)
        table.add_row("recalled from the history", f"{passages} passages at {len(recalled)} calls")
    showcase = next((r.showcase for r in records if r.showcase), None)
    if showcase:
        table.add_row("turn 9 asks about turn 2 (before the first compaction)", f"its answer: {showcase}")
    needed = sum(r.facts_needed for r in records)
    kept = sum(r.facts_kept for r in records)
    if needed:
        table.add_row("facts kept (see below)", f"{kept}/{needed} ({kept / needed:.0%})")
    table.add_row("restart", f"after turn {restart_at}, restored in a new process")
    console.print(table)
    console.print(
        f"[dim]{FACTS_KEPT_DEFINITION}. Without ctxlife the full history holds all of them, "
        "at the token cost above.[/dim]"
    )


def _chart(records: list[CallRecord], path: Path, restart_at: int) -> bool:
    try:
        import matplotlib  # lazy: an optional extra (ctxlife[plot]), and slow to import

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # lazy: as above, once the backend is set
    except ImportError:
        print("matplotlib is not installed: no chart (pip install 'ctxlife[plot]')")
        return False
    calls = list(range(1, len(records) + 1))
    fig, ax = plt.subplots(figsize=(10, 4.8))
    ax.plot(calls, [r.unmanaged_tokens for r in records], color="#999999", label="without ctxlife (naive full history)")
    ax.plot(calls, [r.sent_tokens for r in records], color="#1f77b4", marker=".", label="sent with ctxlife")
    window, budget = records[0].context_window, records[0].budget
    ax.axhline(window, color="#333333", linestyle="-", linewidth=1, label=f"context window ({window:,} tokens)")
    ax.axhline(budget, color="#d62728", linestyle="--", label=f"{budget / window:.0%} line ({budget:,} tokens)")
    for i, r in enumerate(records, 1):
        if r.details:
            ax.annotate(
                "compacted",
                (i, r.sent_tokens),
                textcoords="offset points",
                xytext=(0, 8),
                fontsize=7,
                ha="center",
                color="#9467bd",
            )
    restart = next((i for i, r in enumerate(records, 1) if r.turn >= restart_at), None)
    if restart is not None:
        ax.axvline(restart - 0.5, color="#2ca02c", linestyle=":", label="restart (new process)")
    ax.set_xlabel("model call")
    ax.set_ylabel("context tokens")
    ax.xaxis.get_major_locator().set_params(integer=True)  # type: ignore[call-arg]  # MaxNLocator takes it
    ax.set_title("ctxlife demo: context tokens per model call")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _phase_two(argv: list[str]) -> int:
    """Entry of the restarted process: run the remaining turns and write their records."""
    config, ws, first, last, model, out, calls_before, crossed, tool_extra = argv
    console = Console()
    tracker = Tracker(console, int(calls_before), crossed == "1", int(tool_extra))
    records = run_turns(Path(config), Path(ws), model or None, int(first), int(last), console, tracker)
    Path(out).write_text(json.dumps([asdict(r) for r in records]), encoding="utf-8")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--phase2":
        sys.exit(_phase_two(sys.argv[2:]))
    sys.exit(run_demo())
