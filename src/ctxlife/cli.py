"""The ``ctxlife`` command.

    ctxlife strategies [--json]       installed strategies: name, hooks, package, version
    ctxlife check CONFIG              validate a config and print the resolved settings
    ctxlife demo [--config] [--model] a real CrewAI crew on a scripted offline LLM, managed by ctxlife

Imports stay lazy so the command starts fast; CrewAI is imported only by ``demo``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from ctxlife.errors import CtxlifeError


def _console() -> Any:
    from rich.console import Console

    return Console()


def cmd_strategies(args: argparse.Namespace) -> int:
    from ctxlife.plugins import registry

    rows = registry().describe()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    from rich.table import Table

    table = Table(title="Installed ctxlife strategies (active only when a config names them)")
    for column in ("name", "hooks", "package", "version"):
        table.add_column(column)
    for row in rows:
        hooks = ", ".join(h.removeprefix("ctxlife_") for h in row["hooks"])
        table.add_row(row["name"], hooks, row["package"], row["version"])
    _console().print(table)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from ctxlife.config import load_settings

    settings = load_settings(args.config)
    resolved = settings.resolved()
    if args.json:
        print(json.dumps(resolved, indent=2))
    else:
        console = _console()
        console.print(f"[green]OK[/green] {settings.source}")
        console.print_json(json.dumps(resolved))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from ctxlife.demo import run_demo

    return run_demo(config=args.config, model=args.model, turns=args.turns, workspace=args.workspace, chart=args.chart)


def cmd_session(args: argparse.Namespace) -> int:
    from ctxlife.config import find_default_config, load_settings
    from ctxlife.sessions.cli import run_session_command

    default_store = None
    if args.store is None and (args.config is not None or find_default_config() is not None):
        settings = load_settings(args.config)
        table = settings.strategy_tables().get("snapshot_restore", {})
        default_store = table.get("store") if isinstance(table, dict) else None
    counter = None
    if getattr(args, "session_command", None) == "show":
        from ctxlife.tokens import TokenCounter

        counter = TokenCounter()
    return run_session_command(args, default_store, count_tokens=counter.count_messages if counter else None)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ctxlife", description="Manage an LLM agent's context over its whole lifecycle.")
    parser.add_argument("--version", action="version", version=f"ctxlife {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("strategies", help="list installed strategies")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_strategies)

    p = sub.add_parser("check", help="validate a config and print the resolved settings")
    p.add_argument("config", help="a ctxlife TOML file or a pyproject.toml with [tool.ctxlife]")
    p.add_argument("--json", action="store_true", help="print only the resolved settings as JSON")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("demo", help="run a real CrewAI crew on a scripted offline LLM, managed by ctxlife")
    p.add_argument("--config", default=None, help="config file (default: configs/demo.toml shipped with ctxlife)")
    p.add_argument("--model", default=None, help="run on a real model instead (any name crewai.LLM accepts; needs its API key)")
    p.add_argument("--turns", type=int, default=None, help="how many user turns to run")
    p.add_argument("--workspace", default="workspace", help="folder for sessions, sandbox and chart (default: ./workspace)")
    p.add_argument("--chart", default=None, help="where to write the PNG chart (default: WORKSPACE/demo_context.png)")
    p.set_defaults(func=cmd_demo)

    from ctxlife.sessions.cli import add_session_parser

    session = add_session_parser(sub)
    session.add_argument("--config", default=None, help="config whose [snapshot_restore] store to use (default: ./ctxlife.toml)")
    session.set_defaults(func=cmd_session)
    return parser


def _version() -> str:
    from ctxlife import __version__

    return __version__


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except CtxlifeError as exc:
        print(f"ctxlife {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
