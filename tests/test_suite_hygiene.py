"""The suite's own guard: a run fails when a test leaves files outside pytest's tmp_path."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parent / "conftest.py"

STRAY_TESTS = """
import tempfile
from pathlib import Path


def test_writes_into_the_checkout():
    (Path(__file__).resolve().parents[1] / "stray-in-checkout.txt").write_text("left behind")


def test_writes_into_the_temp_folder():
    (Path(tempfile.gettempdir()) / "stray-in-temp.txt").write_text("left behind")


def test_cleans_up_after_itself(tmp_path):
    (tmp_path / "fine.txt").write_text("pytest removes it")
"""


def test_a_run_that_leaves_files_outside_tmp_path_fails(pytester: pytest.Pytester, monkeypatch) -> None:
    """The session check of tests/conftest.py names the files a test left in the checkout and in the
    system temp folder (with the test after which each was first seen), and turns the run red; what a
    test writes under tmp_path is fine."""
    for variable in ("CI", "CTXLIFE_STRICT_TMP"):  # the strict /tmp check: not under test here
        monkeypatch.delenv(variable, raising=False)
    checkout = pytester.path / "checkout"  # a git checkout of its own; pytest's basetemp lies beside it
    (checkout / "tests").mkdir(parents=True)
    conftest = CONFTEST.read_text(encoding="utf-8").replace('pytest_plugins = ["pytester"]', "")
    (checkout / "tests" / "conftest.py").write_text(conftest, encoding="utf-8")
    (checkout / "tests" / "test_stray.py").write_text(STRAY_TESTS, encoding="utf-8")
    subprocess.run(["git", "init", "--quiet", str(checkout)], check=True)

    result = pytester.runpytest_subprocess(str(checkout / "tests"), "-p", "no:cacheprovider")

    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*wrote into the checkout*stray-in-checkout.txt*left files in the system temp folder*"
            "stray-in-temp.txt (first seen after *test_stray.py::test_writes_into_the_temp_folder)*"
        ]
    )
    assert "fine.txt" not in result.stdout.str()


@pytest.mark.xdist_group("hygiene")
def test_an_xdist_group_keeps_its_tests_on_one_worker(request: pytest.FixtureRequest) -> None:
    """`make test` runs `--dist loadgroup`: the modules marked with an ``xdist_group`` (the wheel
    install, the type checkers, the soak) set up their expensive session fixtures once, on one worker.
    pytest-xdist applies the group by suffixing the node id (pytest 9.2's node ids dropped the
    attribute it sets, and then every worker set them up again, minutes each)."""
    if not getattr(request.config.option, "loadgroup", False):  # set on the workers of --dist loadgroup
        pytest.skip("runs under `pytest -n N --dist loadgroup` (make test)")
    assert request.node.nodeid.endswith("@hygiene"), request.node.nodeid


@pytest.mark.imports("pytest")  # any installed package: the mark, not the package, is under test
def test_the_tests_that_import_a_heavy_package_share_one_worker(request: pytest.FixtureRequest) -> None:
    """``@pytest.mark.imports(package)`` (tests/conftest.py) puts the test in the package's xdist group,
    so only one worker imports CrewAI; the mark must be turned into a group before pytest-xdist reads
    the groups."""
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("runs under `pytest -n N --dist loadgroup` (make test)")
    assert request.node.nodeid.endswith("@imports-pytest"), request.node.nodeid


def test_the_loop_witness_tells_a_blocked_loop_from_a_free_one(loop_witness) -> None:
    """tests/conftest.py LoopWitness, which the event-loop tests rely on: a slow step on the loop's
    own thread is counted blocked; in a worker thread, served; steps queued one by one never overlap."""
    import asyncio

    async def main() -> None:
        loop_witness.wait_for_the_loop()  # on the loop: it blocks it
        await asyncio.to_thread(loop_witness.wait_for_the_loop)  # in a worker: the loop runs meanwhile

    loop_witness.run(main)
    assert (loop_witness.blocked, loop_witness.served) == (1, 1)

    async def queued() -> None:
        loop_witness.overlapping(2, timeout=0.5)  # how long the first waits for a second that never comes
        for _ in range(2):  # one after the other: the first never meets the second
            await asyncio.to_thread(loop_witness.wait_for_the_loop)

    loop_witness.run(queued)
    assert loop_witness.not_overlapping == 2 and loop_witness.blocked == 1


def test_every_mutation_scope_names_files_and_tests_that_exist() -> None:
    """`make mutate MUTATE_SCOPE=NAME` mutates the files its scope names with the tests it names: a
    file moved away (src/ctxlife/cli.py became the package src/ctxlife/cli/) is mutated by no run."""
    import tomllib

    root = CONFTEST.parents[1]
    scopes = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ctxlife-mutate"]["scopes"]
    assert len(scopes) >= 10
    missing = []
    for name, scope in scopes.items():
        for path in scope["only_mutate"]:  # the staged copy keeps the strategies beside src/ctxlife
            real = path.replace("src/ctxlife_strategies/", "strategies/ctxlife_strategies/")
            if not (root / real).is_file():
                missing.append(f"{name}: {path}")
        missing += [f"{name}: {test}" for test in scope["tests_dir"] if not (root / test.split("::")[0]).is_file()]
    assert not missing, f"mutation scopes in pyproject.toml name files that do not exist: {missing}"


def test_every_function_a_mutation_run_picks_is_defined_where_it_is_named() -> None:
    """A function moved to another module (llm_summary's background fold went to summary_fold.py) would
    silently leave its mutation scope with nothing to mutate."""
    import re
    import tomllib

    root = CONFTEST.parents[1]
    mutate = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ctxlife-mutate"]
    picks = [("core", mutate.get("only_functions", {}))]
    picks += [(name, scope.get("only_functions", {})) for name, scope in mutate["scopes"].items()]
    missing = []
    for name, functions in picks:
        for path, names in functions.items():
            real = root / path.replace("src/ctxlife_strategies/", "strategies/ctxlife_strategies/")
            source = real.read_text(encoding="utf-8") if real.is_file() else ""
            missing += [f"{name}: {path}::{fn}" for fn in names if not re.search(rf"^\s*def {fn}\(", source, re.M)]
    assert not missing, f"mutation scopes in pyproject.toml pick functions their files do not define: {missing}"


def test_every_planted_bug_of_issue_44_still_finds_the_line_it_plants_into(monkeypatch: pytest.MonkeyPatch) -> None:
    """`benchmarks/planted_bugs.py` plants each bug by replacing one exact text; code moved away (the
    fold went from llm_summary.py to summary_fold.py) leaves the bug unplantable, and the script stops."""
    import importlib

    root = CONFTEST.parents[1]
    monkeypatch.syspath_prepend(str(root / "benchmarks"))
    planted = importlib.import_module("planted_bugs")
    assert len(planted.BUGS) == 8
    stale = [
        f"{bug.name}: {bug.path} holds its text {count} times"
        for bug in planted.BUGS
        if (count := (root / bug.path).read_text(encoding="utf-8").count(bug.old)) != 1
    ]
    stale += [f"{bug.name}: {test}" for bug in planted.BUGS for test in bug.tests if not (root / test).is_file()]
    assert not stale, f"benchmarks/planted_bugs.py cannot plant: {stale}"


def test_make_mutate_changed_reruns_a_scope_for_its_own_configuration_not_another_scopes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`make mutate-changed` compares each scope's configuration with the one at its report's commit: an
    edit of another scope's table (or a pin) leaves it current; a test added to its own table does not."""
    import importlib
    import tomllib

    root = CONFTEST.parents[1]
    monkeypatch.syspath_prepend(str(root / "benchmarks"))
    scopes = importlib.import_module("mutation_scopes")
    stage = importlib.import_module("mutation_stage")
    text = (root / "pyproject.toml").read_text(encoding="utf-8")
    now = stage.scope_config(tomllib.loads(text), "ids")
    others_edited = text.replace("[tool.ctxlife-mutate.scopes.erase]", "[tool.ctxlife-mutate.scopes.erase]\nnew = 1")
    assert others_edited != text
    assert scopes.config_at(others_edited, "ids") == now
    own = "[tool.ctxlife-mutate.scopes.ids]\n"
    assert own in text
    edited = text.replace(own, own + "timeout_constant = 99\n")
    assert scopes.config_at(edited, "ids") != now
    assert scopes.config_at(text.replace("[tool.ctxlife-mutate.scopes.ids]", "[tool.other]"), "ids") is None


def test_make_mutate_changed_reruns_a_scope_for_the_core_defaults_that_reach_it_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A scope inherits the core's `do_not_mutate_patterns` and `pytest_add_cli_args`: an edit of them that
    names only other files' functions or other tests (the core's own) leaves the scope current; a pattern
    matching one of its functions, or a deselect of one of its tests, makes it stale."""
    import importlib
    import tomllib

    root = CONFTEST.parents[1]
    monkeypatch.syspath_prepend(str(root / "benchmarks"))
    scopes = importlib.import_module("mutation_scopes")
    text = (root / "pyproject.toml").read_text(encoding="utf-8")
    now = scopes.effective(scopes.config_at(text, "ids"))
    core = tomllib.loads(text)["tool"]["mutmut"]
    assert "do_not_mutate_patterns = [\n" in text and "pytest_add_cli_args = [\n" in text
    assert "validate_session_id" not in str(core["do_not_mutate_patterns"])

    def edited(pattern: str, deselect: str) -> str:
        return text.replace(
            "do_not_mutate_patterns = [\n", f"do_not_mutate_patterns = [\n    {pattern!r},\n", 1
        ).replace("pytest_add_cli_args = [\n", f"pytest_add_cli_args = [\n    '--deselect', {deselect!r},\n", 1)

    others = edited("^def (truncate_somewhere)[(]", "tests/test_messages.py::test_x")
    assert scopes.config_at(others, "ids") != scopes.config_at(text, "ids")  # the raw configuration differs
    assert scopes.effective(scopes.config_at(others, "ids")) == now
    assert scopes.effective(scopes.config_at(others, "core")) != scopes.effective(scopes.config_at(text, "core"))
    own_function = edited("^def (validate_session_id)[(]", "tests/test_messages.py::test_x")
    assert scopes.effective(scopes.config_at(own_function, "ids")) != now
    own_test = edited("^def (truncate_somewhere)[(]", "tests/sessions/test_ids_mapping.py::test_x")
    assert scopes.effective(scopes.config_at(own_test, "ids")) != now


def test_make_mutate_changed_ignores_an_edit_of_docstrings_and_comments_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """mutmut mutates no docstring or comment, and names a mutant by its function and its count there: a file
    whose code is unchanged leaves its scopes' reports true; any change of code (a string, a default) does not."""
    import importlib

    monkeypatch.syspath_prepend(str(CONFTEST.parents[1] / "benchmarks"))
    scopes = importlib.import_module("mutation_scopes")
    source = '"""Module."""\n\nclass A:\n    """A."""\n\n'
    source += '    def f(self, x=1):\n        """F."""\n        return "y"  # why\n'
    reworded = source.replace('"""Module."""', '"""Module, said at length.\n\nMore."""').replace("# why", "")
    assert scopes._code_of(reworded) == scopes._code_of(source)
    assert scopes._code_of(source.replace('"""F."""\n', "")) == scopes._code_of(source)
    assert scopes._code_of(source.replace('"y"', '"z"')) != scopes._code_of(source)
    assert scopes._code_of(source.replace("x=1", "x=2")) != scopes._code_of(source)
    assert scopes._code_of(source.replace('"""A."""', "B = 1")) != scopes._code_of(source)


def test_mutation_scopes_reach_at_least_the_share_of_the_product_they_reached_when_it_was_measured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`benchmarks/mutation_scopes.py coverage`: the lines of functions some scope mutates, over the product's
    (41% before the scopes of 2026-12-07, 62% with them, 71% with the stores' and the recorder's). Code added outside
    every scope lowers it; a ratchet."""
    import importlib

    root = CONFTEST.parents[1]
    monkeypatch.syspath_prepend(str(root / "benchmarks"))
    scopes = importlib.import_module("mutation_scopes")
    files = scopes.mutated_lines()
    assert "src/ctxlife/host.py" in files and "strategies/ctxlife_strategies/recall.py" in files
    total = sum(t for t, _ in files.values())
    covered = sum(c for _, c in files.values())
    assert covered / total >= 0.7, scopes.coverage_table()
