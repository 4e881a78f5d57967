"""The ``ctxlife`` command.

    ctxlife strategies [--json]       installed strategies: name, hooks, package, version
    ctxlife check CONFIG              validate a config (every error at once; calls a configured model once)
    ctxlife replay FILE --config CFG  dry-run a recorded conversation through a config
    ctxlife replay --session ID       the same for a stored session (on a copy), recall included
    ctxlife report ID -o FILE         a self-contained HTML report of a stored session, call by call
    ctxlife session list|show|export|rm   inspect stored sessions
    ctxlife store migrate URL         bring a store's schema to this version (a deploy step)
    ctxlife demo [--config] [--model] a real CrewAI crew on a scripted offline LLM, managed by ctxlife

Imports stay lazy so the command starts fast; CrewAI is imported only by ``demo``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from ctxlife import __version__
from ctxlife.errors import ConfigError, CtxlifeError
from ctxlife.events import redact_text, redacted
from ctxlife.inspection import add_session_replay_arguments
from ctxlife.report.cli import add_report_parser
from ctxlife.sessions.cli import add_session_parser, add_store_parser, run_session_command, run_store_command


def _console() -> Any:
    from rich.console import Console  # lazy: rich's console loads only when something is printed

    return Console()


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
    _console().print(table)
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
        console = _console()
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


def cmd_replay(args: argparse.Namespace) -> int:
    # lazy: each command loads what it needs (`ctxlife --help` stays fast)
    from ctxlife.config import load_settings
    from ctxlife.replay import FACTS_KEPT_DEFINITION, load_conversations, replay, run_session_replay

    if (args.file is None) == (args.session is None):
        raise ConfigError("replay takes a recording FILE or --session ID (a stored session), one of the two")
    if args.session is not None:
        return run_session_replay(args)
    settings = load_settings(args.config)
    if not (args.window or settings.context_window):
        raise ConfigError("replay needs a context window: pass --window N or set context_window in the config")
    conversations = load_conversations(args.file)
    if args.conversation is not None:
        if not 0 <= args.conversation < len(conversations):
            raise ConfigError(
                f"no conversation {args.conversation} in {args.file}; it holds {len(conversations)} "
                f"(0..{len(conversations) - 1})"
            )
        conversations = [conversations[args.conversation]]
    # Explicit --window/--model beat the environment and the config (one precedence everywhere).
    results = [replay(c, settings, context_window=args.window, model=args.model) for c in conversations]
    window, encoding, source = results[0].context_window, results[0].encoding, results[0].window_source
    if args.plot:
        _plot_replay(results[0], args.plot)
    if args.json:
        print(
            json.dumps(
                {
                    "config": settings.source,
                    "context_window": window,
                    "window_source": source,
                    "threshold": settings.threshold,
                    "encoding": encoding,
                    "facts_kept_definition": FACTS_KEPT_DEFINITION,
                    "conversations": [r.to_dict() for r in results],
                },
                indent=2,
            )
        )
        return 1 if any(r.violations for r in results) else 0
    from rich.table import Table  # lazy: rich's tables load only when a table is printed

    console = _console()
    console.print(
        f"window {window:,} tokens (from {source}); "
        f"threshold {settings.threshold:.0%} = {int(settings.threshold * window):,} tokens; "
        f"tokens counted with {encoding}; config {settings.source}"
    )
    if len(results) == 1:
        result = results[0]
        table = Table(
            title=f"{result.name}: what the model would have received, call by call (window "
            f"{window:,}, threshold line {int(settings.threshold * window):,})"
        )
        for column in (
            "call",
            "msgs",
            "unmanaged",
            "managed",
            "saved",
            "facts kept",
            "what the strategies did",
            "valid",
        ):
            table.add_column(column, justify="left" if column == "what the strategies did" else "right")
        for row in result.rows:
            actions = ", ".join(a for a in row.actions if not a.endswith(":skipped")) or "-"
            table.add_row(
                str(row.index + 1),
                str(row.messages),
                f"{row.unmanaged_tokens:,}",
                f"{row.managed_tokens:,}",
                f"{row.unmanaged_tokens - row.managed_tokens:,}",
                f"{row.facts_kept}/{row.facts_needed}" if row.facts_needed else "-",
                actions,
                "yes" if not row.problems else "NO: " + row.problems[0],
            )
        console.print(table)
    else:
        table = Table(
            title=f"{len(results)} conversations (window {window:,}); --conversation N shows one call by call"
        )
        for column in (
            "#",
            "name",
            "calls",
            "unmanaged",
            "managed",
            "saved",
            "peak",
            "compactions",
            "facts kept",
            "invalid",
        ):
            table.add_column(column, justify="left" if column == "name" else "right")
        for i, r in enumerate(results):
            table.add_row(
                str(i),
                r.name,
                str(len(r.rows)),
                f"{r.unmanaged_total:,}",
                f"{r.managed_total:,}",
                f"{r.unmanaged_total - r.managed_total:,}",
                f"{r.peak_managed:,}",
                str(r.compactions),
                f"{r.facts_kept}/{r.facts_total}" if r.facts_total else "-",
                str(r.violations),
            )
        console.print(table)
    unmanaged = sum(r.unmanaged_total for r in results)
    managed = sum(r.managed_total for r in results)
    calls = sum(len(r.rows) for r in results)
    invalid = sum(r.violations for r in results)
    facts_total = sum(r.facts_total for r in results)
    facts_kept = sum(r.facts_kept for r in results)
    share = 1 - managed / unmanaged if unmanaged else 0.0
    console.print(
        f"[bold]Totals[/bold]: {calls} calls; prompt tokens {unmanaged:,} unmanaged -> {managed:,} "
        f"managed ({share:.1%} saved); "
        f"peak {max(r.peak_unmanaged for r in results):,} -> {max(r.peak_managed for r in results):,}; "
        f"compactions {sum(r.compactions for r in results)}; facts kept {facts_kept}/{facts_total}"
        + (f" ({facts_kept / facts_total:.0%})" if facts_total else "")
    )
    console.print(
        f"[dim]{FACTS_KEPT_DEFINITION} (ctxlife.retention; independent of ctxlife's own fact extractor)[/dim]"
    )
    if invalid:
        console.print(f"[red]Validity: {invalid} call(s) would have sent a provider-invalid message list[/red]")
        return 1
    console.print("[green]Validity: every call's message list is provider-valid[/green]")
    return 0


def _plot_replay(result: Any, path: str) -> None:
    try:
        import matplotlib  # lazy: an optional extra (ctxlife[plot]), and slow to import

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # lazy: as above, once the backend is set
    except ImportError:
        raise CtxlifeError("--plot needs matplotlib: pip install 'ctxlife[plot]'") from None
    calls = [r.index + 1 for r in result.rows]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    ax.plot(calls, [r.unmanaged_tokens for r in result.rows], label="unmanaged", color="#999999")
    ax.plot(calls, [r.managed_tokens for r in result.rows], label="managed by ctxlife", color="#1f77b4")
    ax.axhline(
        result.context_window,
        linestyle="-",
        color="#444444",
        linewidth=1,
        label=f"context window ({result.context_window:,}, {result.window_source or 'as used'})",
    )
    ax.axhline(
        result.threshold * result.context_window,
        linestyle="--",
        color="#d62728",
        label=f"threshold ({result.threshold:.0%} of {result.context_window:,})",
    )
    ax.set_xlabel("model call")
    ax.set_ylabel("context tokens")
    ax.set_title(f"{result.name}: context tokens per call")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def cmd_demo(args: argparse.Namespace) -> int:
    from ctxlife.demo import run_demo  # lazy: each command loads what it needs (`ctxlife --help` stays fast)

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
        "--model", default=None, help="model name for the tokenizer; beats CTXLIFE_MODEL and the config's model"
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
        return int(args.func(args) or 0)
    except CtxlifeError as exc:
        print(f"ctxlife {args.command}: error: {redact_text(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
