"""Plant the eight bugs of issue 44 one at a time and run the tests a developer would run for each.

Each bug is a plausible one-line change of the product code that no test caught at main 1a6302f.
For each, the checkout's tracked files are copied to a temporary folder, the bug is planted there
(the checkout is never touched), and pytest runs the listed tests against that copy. A bug is
caught when pytest fails. The table printed at the end is the one in docs/mutation.md.

    python benchmarks/planted_bugs.py            # all eight (about 3 minutes on 2 cores)
    python benchmarks/planted_bugs.py 3 7        # only bugs 3 and 7
    python benchmarks/planted_bugs.py --clean    # the tests without any bug (all must pass)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PLUGINS = ["--disable-plugin-autoload", "-p", "xdist", "-p", "hypothesispytest", "-p", "ctxlife"]


@dataclass(frozen=True)
class Bug:
    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


BUGS = [
    Bug(
        "erase_matching no longer scrubs summaries",
        "src/ctxlife/sessions/base.py",
        "            if regex is not None:\n                clean = self._scrubbed_message(message, regex)",
        "            if regex is not None and slot is not None:\n"
        "                clean = self._scrubbed_message(message, regex)",
        ("tests/sessions/test_erase_privacy.py",),
    ),
    Bug(
        "erase() leaves the full tool output a message points to",
        "src/ctxlife/sessions/base.py",
        "        self._scrub_blobs(session_id, [r.message for r in affected])",
        "        if regex is not None:\n            self._scrub_blobs(session_id, [r.message for r in affected])",
        ("tests/sessions/test_erase_privacy.py",),
    ),
    Bug(
        "a restore after Session.edit keeps the old message's token count",
        "src/ctxlife/sessions/records.py",
        "current[record.target] = dataclasses.replace(record, seq=record.target, op=ADD, target=None)",
        "current[record.target] = dataclasses.replace(\n"
        "                    record, seq=record.target, op=ADD, target=None, tokens=current[record.target].tokens\n"
        "                )",
        ("tests/sessions/test_token_counts.py", "tests/sessions/test_session_api.py"),
    ),
    Bug(
        "background compaction swaps in a summary of a list edited since",
        "strategies/ctxlife_strategies/summary_fold.py",
        # the fold (issue 39) starts again when the list's summary is not the one it last wrote (in
        # summary_fold.py since llm_summary was split)
        '        if fold is None or fold.written != (previous_text or ""):',
        "        if fold is None:",
        (
            "tests/strategies/test_llm_summary.py",
            "tests/strategies/test_compaction_pace.py",
            "tests/strategies/test_summary_fold.py",
        ),
    ),
    Bug(
        "the over-the-window guard keeps more than the latest unit",
        "strategies/ctxlife_strategies/llm_summary.py",
        # The plant (`keep_units = 1 if overflow else ...` -> `keep_units = self.options.keep_units`)
        # changes no cut any more: the `deeper` fallback goes down to the latest unit whenever keep_units
        # would not reach the target (an equivalent mutant of scope `guard`). The same symptom is planted
        # where the cut is chosen when no cut reaches the target: the earliest cut, not the latest unit.
        "        cut = found if found is not None else (cuts or deeper)[-1]",
        "        cut = found if found is not None else (cuts or deeper)[0]",
        ("tests/strategies/test_llm_summary.py",),
    ),
    Bug(
        "ctxlife_search_history returns unredacted text",
        "strategies/ctxlife_strategies/recall.py",
        '            text_filter=lambda text: ctx.filter_text(text, "recall"),\n        )\n        ctx.record("search',
        '            text_filter=None,\n        )\n        ctx.record("search',
        ("tests/recall/test_recall_strategy.py", "tests/reliability/test_redaction_paths.py"),
    ),
    Bug(
        "the HTML report inserts a summary unescaped",
        "src/ctxlife/report/html.py",
        '<pre class="summary-text">{_e(frame.summary)}</pre>',
        '<pre class="summary-text">{frame.summary}</pre>',
        ("tests/inspect/test_report.py",),
    ),
    Bug(
        "ctxlife replay --json exits 0 when a call would send an invalid list",
        "src/ctxlife/cli/replay.py",
        "        return 1 if any(r.violations for r in results) else 0",
        "        return 0",
        ("tests/test_replay.py", "tests/sessions/test_cli_exit_codes.py"),
    ),
]


def stage(where: Path) -> None:
    """The checkout's tracked files as they are in the work tree (uncommitted changes included)."""
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.split("\0")
    for name in filter(None, files):
        source = REPO / name
        if source.is_symlink() or source.is_file():
            target = where / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target, follow_symlinks=False)


def plant(where: Path, bug: Bug) -> None:
    path = where / bug.path
    text = path.read_text(encoding="utf-8")
    if text.count(bug.old) != 1:
        raise SystemExit(f"bug {bug.name!r}: the text to change is in {bug.path} {text.count(bug.old)} times, not once")
    path.write_text(text.replace(bug.old, bug.new), encoding="utf-8")


def run_tests(where: Path, tests: tuple[str, ...]) -> tuple[bool, float, str]:
    """(passed, seconds, pytest's last line) for ``tests`` against the copy in ``where``."""
    env = dict(os.environ, PYTHONPATH=f"{where / 'src'}{os.pathsep}{where / 'strategies'}")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *PLUGINS, "-p", "no:cacheprovider", "-q", "-x", *tests],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
    )
    lines = done.stdout.strip().splitlines()
    failed = [line.split()[1] for line in lines if line.startswith(("FAILED ", "ERROR "))]
    return done.returncode == 0, time.monotonic() - started, failed[0] if failed else (lines or [""])[-1]


def main(argv: list[str]) -> int:
    clean = "--clean" in argv
    picked = [int(a) for a in argv if a.isdigit()] or list(range(1, len(BUGS) + 1))
    rows = []
    for n in picked:
        bug = BUGS[n - 1]
        with tempfile.TemporaryDirectory(prefix="ctxlife-planted-") as tmp:
            where = Path(tmp)
            stage(where)
            if not clean:
                plant(where, bug)
            passed, seconds, last = run_tests(where, bug.tests)
        caught = not passed
        rows.append((n, bug.name, " ".join(bug.tests), "yes" if caught else "no", seconds, last))
        print(f"{n}. {bug.name}: {'caught' if caught else 'NOT caught'} ({seconds:.0f} s) {last}", flush=True)
    print("\n| # | bug | tests run | a test failed | seconds |\n|---|---|---|---|---|")
    for n, name, tests, failed, seconds, _ in rows:
        print(f"| {n} | {name} | {tests} | {failed} | {seconds:.0f} |")
    if clean:
        return 0 if all(r[3] == "no" for r in rows) else 1
    return 0 if all(r[3] == "yes" for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
