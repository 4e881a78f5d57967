"""The ``ctxlife`` command: every command and option is in docs/cli.md (generated from this parser).

One package holds every command's argparse and printing: this module (the parser, ``strategies``,
``check``), :mod:`~ctxlife.cli.replay`, :mod:`~ctxlife.cli.report`, :mod:`~ctxlife.cli.session`
(``session``, ``store``; ``session search`` in :mod:`~ctxlife.cli.search`) and the ``demo``
application (``cli/_demo.py``, a private module only ``ctxlife demo`` loads: no library code
imports it). Imports stay lazy so the command starts fast; CrewAI is imported only by ``demo``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from ctxlife import __version__
from ctxlife.cli.replay import add_session_replay_arguments, cmd_replay
from ctxlife.cli.report import add_report_parser
from ctxlife.cli.session import (
    add_session_parser,
    add_store_parser,
    console_on,
    run_session_command,
    run_store_command,
)
from ctxlife.errors import CtxlifeError
from ctxlife.events import redact_text, redacted


def cmd_strategies(args: argparse.Namespace) -> int:
    from ctxlife.plugins import registry  # lazy: each command loads what it needs (`ctxlife --help` stays fast)

    rows = registry().describe()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    from rich.table import Table  # lazy: rich's tables load only when a table is printed

    table = Table(title="Installed ctxlife strategies (active only when a config names them)")
    for column in ("name", "hooks", "package", "version"):
        table.add_column(column)
    for row in rows:
        hooks = ", ".join(h.removeprefix("ctxlife_") for h in row["hooks"])
        name = row["name"]
        if row["clashes_with"]:  # configs that use this name fail until one package is uninstalled
            name += f" [red](clash: also in {', '.join(row['clashes_with'])})[/red]"
        if row["broken"]:
            hooks = f"[red]broken: {row['broken']}[/red]"
        table.add_row(name, hooks, row["package"], row["version"])
    console_on(highlight=True).print(table)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from ctxlife.config import load_settings  # lazy: each command loads what it needs (`ctxlife --help` stays fast)

    settings = load_settings(args.config)
    # Printed: store URL passwords (also from CTXLIFE_STORE) and secret options (api_key) as ***.
    resolved = redacted(settings.resolved())
    # Build the strategies too: some options (files, summarizers, stores) are checked only then. Each
    # on its own first, so that one strategy's problem does not hide another's.
    built = [redact_text(p) for p in _strategy_problems(settings)]
    if built:
        listed = built[0] if len(built) == 1 else f"{len(built)} problems:\n" + "\n".join(f"  - {p}" for p in built)
        print(f"ctxlife check: error: {listed}", file=sys.stderr)
        return 1
    from ctxlife.host import Host  # lazy: each command loads what it needs (`ctxlife --help` stays fast)

    host = Host(settings, context_window=settings.context_window or 8000)
    host.close()
    # A configured summary model that cannot be called (a missing extra, no endpoint, a server that
    # does not answer): the strategy would fall back at every compaction, so the config is not OK.
    problems = []
    for strategy in host.strategies:
        route_problem = getattr(strategy, "route_problem", None)
        problem = route_problem(connect=not args.no_connect) if callable(route_problem) else None
        if problem:
            problem = redact_text(problem)
            problems.append(f"ctxlife check: {settings.source}: strategy {strategy.name!r}: {problem}")
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(resolved, indent=2))
    else:
        console = console_on(highlight=True)
        console.print(f"[green]OK[/green] {settings.source}")
        console.print_json(json.dumps(resolved))
    return 0


def _strategy_problems(settings: Any) -> list[str]:
    """What each active strategy's own checks (run when it is built) say is wrong, one message each."""
    # lazy: each command loads what it needs (`ctxlife --help` stays fast)
    from ctxlife.plugins import registry
    from ctxlife.strategy import create_strategy

    shared = settings.shared()
    problems = []
    for name in settings.strategies:
        try:
            create_strategy(registry().get(name), settings.options_for(name), shared).close()
        except CtxlifeError as exc:
            problems.append(str(exc))
    return problems


def cmd_demo(args: argparse.Namespace) -> int:
    from ctxlife.cli._demo import run_demo  # lazy: each command loads what it needs (`ctxlife --help` stays fast)

    return run_demo(config=args.config, model=args.model, turns=args.turns, workspace=args.workspace, chart=args.chart)


def cmd_session(args: argparse.Namespace) -> int:
    from ctxlife.config import load_settings  # lazy: each command loads what it needs (`ctxlife --help` stays fast)

    # The config's top-level store (CTXLIFE_STORE, relative paths against the config's folder).
    # A config that is missing or invalid is a usage error (2): exit code 1 means "no such session".
    try:
        settings = load_settings(args.config) if args.store is None or args.config is not None else None
        default_store = settings.store_url() if settings is not None and args.store is None else None
    except (CtxlifeError, OSError) as exc:
        print(f"ctxlife session: error: {redact_text(str(exc))}", file=sys.stderr)
        return 2
    index_dirs = []
    if settings is not None and args.session_command in ("rm", "erase"):
        from ctxlife.recall import configured_index_dir  # lazy: as above

        folder = configured_index_dir(settings)
        index_dirs = [folder] if folder is not None else []
    counter = None
    if getattr(args, "session_command", None) == "show":
        from ctxlife.tokens import TokenCounter  # lazy: tiktoken loads only for the commands that count

        counter = TokenCounter()
    return run_session_command(
        args, default_store, count_tokens=counter.count_messages if counter else None, index_dirs=index_dirs
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ctxlife", description="Manage an LLM agent's context over its whole lifecycle."
    )
    parser.add_argument("--version", action="version", version=f"ctxlife {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("strategies", help="list installed strategies")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_strategies)

    p = sub.add_parser("check", help="validate a config and print the resolved settings")
    p.add_argument("config", help="a ctxlife TOML file or a pyproject.toml with [tool.ctxlife]")
    p.add_argument("--json", action="store_true", help="print only the resolved settings as JSON")
    p.add_argument(
        "--no-connect",
        action="store_true",
        help="do not call a configured summary model's endpoint (by default it is asked for one token)",
    )
    p.set_defaults(func=cmd_check)

    p = sub.add_parser(
        "replay", help="dry-run a recorded conversation through a config, call by call, without any model"
    )
    p.add_argument(
        "file",
        nargs="?",
        default=None,
        help="a JSON list of messages (OpenAI chat or Anthropic Messages), a _raw.jsonl session history, "
        "or tau-bench trajectories (.json/.json.gz); or --session ID instead",
    )
    add_session_replay_arguments(p)  # --session ID, --ask, --html, --store, --view
    p.add_argument(
        "--config",
        default=None,
        help="config to replay with (default: ./ctxlife.toml, [tool.ctxlife], built-in defaults)",
    )
    p.add_argument(
        "--window",
        type=int,
        default=None,
        help="context window in tokens; beats CTXLIFE_CONTEXT_WINDOW and the config's context_window",
    )
    p.add_argument(
        "--model",
        default=None,
        help="model name for the tokenizer; beats CTXLIFE_AGENT_MODEL and the config's agent_model",
    )
    p.add_argument(
        "--conversation",
        type=int,
        default=None,
        metavar="N",
        help="for files with several conversations: the 0-based index of the one to show call by call",
    )
    p.add_argument("--json", action="store_true", help="print machine-readable JSON instead of tables")
    p.add_argument(
        "--plot",
        default=None,
        metavar="PNG",
        help="draw tokens per call, managed vs unmanaged, with the threshold line",
    )
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("demo", help="run a real CrewAI crew on a scripted offline LLM, managed by ctxlife")
    p.add_argument("--config", default=None, help="config file (default: configs/demo.toml shipped with ctxlife)")
    p.add_argument(
        "--model", default=None, help="run on a real model instead (any name crewai.LLM accepts; needs its API key)"
    )
    p.add_argument("--turns", type=int, default=None, help="how many user turns to run")
    p.add_argument(
        "--workspace", default="workspace", help="folder for sessions, sandbox and chart (default: ./workspace)"
    )
    p.add_argument("--chart", default=None, help="where to write the PNG chart (default: WORKSPACE/demo_context.png)")
    p.set_defaults(func=cmd_demo)

    add_report_parser(sub)  # ctxlife report ID -o report.html
    session = add_session_parser(sub)  # with --config, before or after the subcommand
    session.set_defaults(func=cmd_session)
    add_store_parser(sub).set_defaults(func=lambda args: run_store_command(args))  # ctxlife store migrate URL
    return parser


def _version() -> str:
    return __version__


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # (a reader that stopped early is told here, not at exit)
        return code
    except CtxlifeError as exc:
        print(f"ctxlife {args.command}: error: {redact_text(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader stopped early (`ctxlife session search ... | head`): quiet, as a process SIGPIPE ends.
        # What is left in stdout's buffer goes nowhere (else Python prints an error at exit).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
