"""``ctxlife demo``: a real CrewAI crew on a scripted offline LLM, managed by ctxlife.

The crew is an assistant like the seed notes' XiaoPaw with a sandbox file tool.
It runs two tasks; the scripted model reads several files, so the context grows,
and the table printed per model call shows tokens before and after ctxlife.
``--model NAME`` runs the same crew on a real model instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ctxlife.errors import CtxlifeError

DEMO_WINDOW = 2048
_FILES = {
    "sales_week47.csv": "region,units,revenue\n" + "\n".join(f"R{i:02d},{100 + i * 7},{(100 + i * 7) * 19.99:.2f}" for i in range(40)),
    "notes_standup.md": "# Stand-up notes\n" + "\n".join(f"- Item {i}: shipped feature F-{200 + i}, blocked on review by team T{i % 5}." for i in range(30)),
    "roadmap.md": "# Roadmap\n" + "\n".join(f"- Q{1 + i % 4} milestone M{i}: launch of module {chr(65 + i % 26)} in region R{i:02d}." for i in range(30)),
}


def default_config_path() -> Path | None:
    """``configs/demo.toml`` of a source checkout, if there is one."""
    candidates = [Path.cwd() / "configs" / "demo.toml", Path(__file__).resolve().parents[2] / "configs" / "demo.toml"]
    return next((p for p in candidates if p.is_file()), None)


def _script() -> list[str]:
    from ctxlife.testing import react_action, react_final

    return [
        react_action("read_sandbox_file", {"name": "sales_week47.csv"}, "I need the sales data first."),
        react_action("read_sandbox_file", {"name": "notes_standup.md"}, "Now the stand-up notes."),
        react_action("read_sandbox_file", {"name": "roadmap.md"}, "And the roadmap, for the plans."),
        react_final("Sales: 40 regions, revenue up; F-200..F-229 shipped; roadmap milestones M0-M29."),
        react_action("read_sandbox_file", {"name": "roadmap.md"}, "Check the roadmap again for next week's plan."),
        react_final("Weekly report. Summary: 40 regions reported, 30 features shipped. Plans: milestones M0-M3 next."),
    ]


def build_crew(llm: Any, sandbox: Path) -> Any:
    from crewai import Agent, Crew, Task
    from crewai.tools import tool

    @tool("read_sandbox_file")
    def read_sandbox_file(name: str) -> str:
        """Read a file the user sent, from the sandbox folder."""
        path = (sandbox / name).resolve()
        if sandbox.resolve() not in path.parents or not path.is_file():
            return f"No file named {name!r} in the sandbox."
        return path.read_text(encoding="utf-8")

    agent = Agent(
        role="XiaoPaw",
        goal="Help a product manager with weekly reporting",
        backstory="You are XiaoPaw, a work assistant. You read files the user saved in the sandbox.",
        llm=llm,
        tools=[read_sandbox_file],
        verbose=False,
    )
    analyse = Task(
        name="analyse",
        description="Read the sales data, the stand-up notes and the roadmap in the sandbox and summarize them.",
        expected_output="A short summary of the three files.",
        agent=agent,
    )
    report = Task(
        name="weekly_report",
        description="Write this week's report: summary first, then next week's plans.",
        expected_output="A weekly report.",
        agent=agent,
    )
    return Crew(agents=[agent], tasks=[analyse, report], verbose=False)


def run_demo(
    config: str | None = None,
    model: str | None = None,
    turns: int | None = None,
    workspace: str = "workspace",
    chart: str | None = None,
) -> int:
    from rich.console import Console
    from rich.table import Table

    from ctxlife.testing import offline_environment, scripted_llm

    console = Console()
    offline_environment()
    config_path = config or default_config_path()
    if config_path is None:
        raise CtxlifeError("no config given and configs/demo.toml not found; pass --config FILE")
    sandbox = Path(workspace) / "sandbox"
    sandbox.mkdir(parents=True, exist_ok=True)
    for name, text in _FILES.items():
        (sandbox / name).write_text(text, encoding="utf-8")

    console.print(f"[bold]ctxlife demo[/bold]: config {config_path}, " + (f"model {model}" if model else f"scripted offline LLM, window {DEMO_WINDOW} tokens"))
    with console.status("importing CrewAI..."):
        import ctxlife
        from ctxlife.integrations.crewai import host_of

        if model:
            from crewai import LLM

            llm: Any = LLM(model=model)
        else:
            llm = scripted_llm(_script(), context_window=DEMO_WINDOW)
        crew = build_crew(llm, sandbox)
    ctxlife.wrap(crew, config_path)
    host = host_of(crew)
    assert host is not None
    reports: list[Any] = []
    host.listeners.append(lambda r: reports.append(r) if r.node == "before_llm_call" else None)

    with console.status("running the crew..."):
        result = crew.kickoff()

    table = Table(title="Model calls: tokens in the live list before and after ctxlife")
    for column in ("call", "task", "before", "after", "saved", "strategies"):
        table.add_column(column, justify="right" if column in {"call", "before", "after", "saved"} else "left")
    for i, r in enumerate(reports):
        table.add_row(str(i + 1), r.task_name or "", str(r.tokens_before), str(r.tokens_after), str(r.tokens_saved), ", ".join(r.acted) or "-")
    console.print(table)
    console.print(f"[bold]Final answer:[/bold] {result.raw}")
    return 0
