"""Write a scope's report (docs/mutation/NAME.md) from a finished `mutmut run` (in build/mutate).

Reads mutmut's results (the ``.meta`` files beside the mutated sources in ``mutants/``) and every
survivor's diff in this process, with mutmut's own functions (one ``mutmut show`` process per
survivor took minutes). ``docs/mutation-equivalent.toml`` (mutant name -> reason; a scope whose mutant
names would collide with the core's has its own, ``docs/mutation/SCOPE.toml``) sorts the survivors:

- ``[equivalent]``: the mutant changes no behaviour anyone can observe; left out of the score;
- ``[accepted]``: the mutant changes behaviour, and the reason says why no test needs to see it;
  it counts as not killed;
- any other survivor is *unexplained*: listed first, so that it stands out.

Timeouts are counted as killed and listed by name after the survivors (to run them again by name).

The score is killed / (total - equivalent - mutants no test reaches). Entries of the toml that this
run did not find surviving are listed as stale (a renumbered or now killed mutant).

    python benchmarks/mutation_report.py --write docs/mutation/core.md [--equivalent docs/mutation-equivalent.toml]
        [--scope NAME]

A scope other than the core (``--scope``, see benchmarks/mutation_stage.py) gets a short heading
instead of the core's description; every report names the commit it mutated (the line
``Mutated commit: SHA``, read by ``benchmarks/mutation_scopes.py changed``).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import time
import tomllib
from pathlib import Path

from mutmut.mutation.diff_apply import get_diff_for_mutant
from mutmut.stats import status_by_exit_code

REPO = Path(__file__).resolve().parents[1]

# Where each kind of survivor is listed, in this order (unexplained first: they need a look).
SURVIVOR_KINDS = {
    "unexplained": "survived without a reason in the reasons file: kill it with a test, or say why",
    "accepted": "changes behaviour that no test needs to see (`[accepted]` says why)",
    "equivalent": "changes no behaviour anyone can observe (`[equivalent]` says why)",
}


def results(mutants: Path) -> tuple[dict[str, str], dict[str, Path]]:
    """Every mutant's status, and the source path (as mutmut names it) of the file it is in."""
    statuses: dict[str, str] = {}
    paths: dict[str, Path] = {}
    for meta in sorted(mutants.glob("**/*.py.meta")):
        source = meta.relative_to(mutants).with_suffix("")  # src/ctxlife/x.py.meta -> src/ctxlife/x.py
        for name, exit_code in json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"].items():
            statuses[name] = status_by_exit_code[exit_code]
            paths[name] = source
    return statuses, paths


def first_change(name: str, path: Path) -> tuple[str, str]:
    """The first removed and the first added line of the mutant's diff (mutmut runs in the stage,
    so the paths are relative to the working directory)."""
    diff = get_diff_for_mutant(name, path=path).splitlines()
    changed = [line for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---")) and line[1:].strip()]
    minus = next((d[1:].strip() for d in changed if d.startswith("-")), "")
    plus = next((d[1:].strip() for d in changed if d.startswith("+")), "")
    return minus, plus


def module_of(name: str) -> str:
    return name.rpartition(".")[0]


def number_of(name: str) -> str:
    return name.rpartition("__mutmut_")[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, required=True)
    parser.add_argument(
        "--equivalent",
        type=Path,
        default=None,
        help="the reasons of the survivors (default: docs/mutation/SCOPE.toml when the scope has its own, else "
        "docs/mutation-equivalent.toml)",
    )
    parser.add_argument("--started", type=float, default=None, help="when make mutate started (epoch seconds)")
    parser.add_argument("--mutmut-seconds", type=float, default=None, help="how long `mutmut run` took")
    parser.add_argument("--scope", default="core", help="the scope mutated (benchmarks/mutation_stage.py)")
    args = parser.parse_args()

    if args.equivalent is None:
        # A scope mutating a function the core mutates too (llm_summary's _compact: other lines) numbers
        # its mutants anew: their names would collide with the core's entries, so it keeps its own file.
        own = REPO / "docs" / "mutation" / f"{args.scope}.toml"
        args.equivalent = own if own.is_file() else REPO / "docs" / "mutation-equivalent.toml"
    equivalent = args.equivalent.resolve()
    reasons_file = equivalent.relative_to(REPO) if equivalent.is_relative_to(REPO) else equivalent
    statuses, paths = results(Path("mutants"))
    reasons: dict[str, dict[str, str]] = {"equivalent": {}, "accepted": {}}
    if args.equivalent.exists():
        tables = tomllib.loads(args.equivalent.read_text(encoding="utf-8"))
        reasons = {kind: tables.get(kind, {}) for kind in reasons}

    def kind_of(name: str, status: str) -> str:
        if status != "survived":
            return status
        return next((kind for kind, table in reasons.items() if name in table), "unexplained")

    by_module: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    survivors: dict[str, list[str]] = {kind: [] for kind in SURVIVOR_KINDS}
    timeouts: list[str] = []
    for name, status in sorted(statuses.items()):
        kind = kind_of(name, status)
        by_module[module_of(name)][kind] += 1
        by_module["all"][kind] += 1
        if kind in survivors:
            survivors[kind].append(name)
        elif kind == "timeout":
            timeouts.append(name)

    def score(c: collections.Counter[str]) -> str:
        total = sum(c.values())
        judged = total - c["equivalent"] - c["no tests"] - c["not checked"]
        return f"{c['killed'] + c['timeout']}/{judged} ({100 * (c['killed'] + c['timeout']) / max(judged, 1):.1f}%)"

    took = ""
    if args.started is not None:
        # mutmut keeps 2 children busy: a 15-minute load average well above 2 means others shared the cores.
        load = os.getloadavg()[2]
        took = (
            f"; `make mutate` took {(time.time() - args.started) / 60:.1f} minutes on 2 cores (niced; 15-minute"
            f" load average {load:.1f} at the end)"
        )
        if args.mutmut_seconds is not None:
            took += f", `mutmut run` {args.mutmut_seconds / 60:.1f} of them"
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(REPO), "status", "--porcelain", "--", "src", "strategies", "tests"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    mutated = f"Mutated commit: {commit or 'unknown'}" + (" (with uncommitted changes)" if dirty else "")
    if args.scope != "core":
        config = tomllib.loads((Path.cwd() / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mutmut"]
        intro = [
            f"# Mutation testing: scope `{args.scope}`",
            "",
            f"`make mutate MUTATE_SCOPE={args.scope}` runs [mutmut](https://mutmut.readthedocs.io) 3 over "
            + ", ".join(f"`{f}`" for f in config["only_mutate"])
            + " (the functions `[tool.ctxlife-mutate.scopes]` in pyproject.toml names) with "
            + ", ".join(f"`{t}`" for t in config["tests_dir"])
            + ". A mutant is one small plausible bug; it is *killed* when a test fails.",
            "",
            f"Generated by `benchmarks/mutation_report.py` on {time.strftime('%Y-%m-%d')}{took}.",
            mutated + ".",
        ]
    else:
        intro = [
            "# Mutation testing of the core",
            "",
            "`make mutate` runs [mutmut](https://mutmut.readthedocs.io) 3 over the core modules (message pairing",
            "and validation and bootstrap application in `src/ctxlife/messages/`, config precedence in",
            "`src/ctxlife/config.py`, the recorder's edit script in `src/ctxlife/sessions/diff.py`, token",
            "accounting in `src/ctxlife/tokens.py`, the `bootstrap` and `truncate_last_n` strategies,",
            "`llm_summary`'s fallback when its summarizer fails, `recall`'s filtering of what it may show (nothing",
            "in view, nothing deleted, within the block's budget), and sessions recording and stores: the",
            "recorder's write path in `src/ctxlife/sessions/recording.py` (which messages are new, the messages",
            "kept waiting after a failed write and their retry, edits and removals) and the file and SQLite",
            "stores' append, record reads and their validation, and snapshot loads) with only the test files",
            "that cover them (`[tool.mutmut]` in pyproject.toml says which functions and tests; the stores'",
            "bulk-decode fast paths, whose fallback reads the same records, are left out). A mutant is one",
            "small plausible bug (an operator, a constant, a condition, a call argument changed); it is",
            "*killed* when a test fails.",
            "",
            f"Generated by `benchmarks/mutation_report.py` on {time.strftime('%Y-%m-%d')}{took}.",
            mutated + ".",
        ]
    lines = [
        *intro,
        f"Every survivor is listed below with its reason from `{reasons_file}`: *equivalent*",
        "mutants change no observable behaviour and are left out of the score; *accepted* ones change",
        "behaviour no test needs to see and count as not killed; *unexplained* ones have no reason yet.",
        "*No tests* are mutants in code no selected test reaches.",
        "",
        "| module | mutants | killed | timeout | unexplained | accepted | equivalent | no tests | not checked "
        "| score (killed / judged) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for module in sorted(m for m in by_module if m != "all") + ["all"]:
        c = by_module[module]
        lines.append(
            f"| {module if module != 'all' else '**all**'} | {sum(c.values())} | {c['killed']} | {c['timeout']} | "
            f"{c['unexplained']} | {c['accepted']} | {c['equivalent']} | {c['no tests']} | {c['not checked']} | "
            f"{score(c)} |"
        )
    for kind, meaning in SURVIVOR_KINDS.items():
        names = survivors[kind]
        lines += ["", f"## {kind.capitalize()} survivors ({len(names)})", ""]
        if not names:
            lines.append("None.")
            continue
        lines += [
            f"Each {meaning}. The first changed line is shown (`mutmut show NAME` in build/mutate gives the",
            "whole diff).",
            "",
        ]
        grouped: dict[str, list[str]] = collections.defaultdict(list)
        for name in names:
            grouped[name.partition("__mutmut_")[0]].append(name)
        for function, members in sorted(grouped.items()):
            lines.append(f"- `{function}` ({len(members)})")
            for name in sorted(members, key=lambda n: int(number_of(n))):
                minus, plus = first_change(name, paths[name])
                reason = reasons.get(kind, {}).get(name)
                why = f": {reason}" if reason else ""
                lines.append(f"  - `{number_of(name)}`: `{minus[:110]}` → `{plus[:110]}`{why}")
    if timeouts:
        # counted as killed in the score; named so that they can be run again by name, with a larger
        # timeout_constant and one child, to tell a mutant that never ends from a test slowed by load
        lines += ["", f"## Timeouts ({len(timeouts)})", ""]
        lines.append("Stopped by mutmut's time limit, not by a failing test (counted as killed above):")
        lines.append("")
        for name in timeouts:
            minus, plus = first_change(name, paths[name])
            lines.append(f"- `{name}`: `{minus[:110]}` → `{plus[:110]}`")
    stale = sorted(  # of the modules this run mutated (another scope's entries are not stale here)
        (name, kind)
        for kind, table in reasons.items()
        for name in table
        if module_of(name) in by_module and statuses.get(name) != "survived"
    )
    if stale:
        lines += ["", f"## Stale entries ({len(stale)})", ""]
        lines.append(f"Named in `{reasons_file}` but not a survivor of this run (renumbered or killed):")
        lines.append("")
        lines += [f"- `{name}` ([{kind}], {statuses.get(name, 'not in this run')})" for name, kind in stale]
    args.write.write_text("\n".join(lines) + "\n", encoding="utf-8")
    counts = ", ".join(f"{len(survivors[kind])} {kind}" for kind in SURVIVOR_KINDS)
    print(f"wrote {args.write}: {score(by_module['all'])} judged mutants killed; survivors: {counts}")


if __name__ == "__main__":
    main()
