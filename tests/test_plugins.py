from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap

import pytest

import ctxlife
from ctxlife.config import settings_from_dict
from ctxlife.errors import PluginConflictError, PluginError
from ctxlife.host import Host
from ctxlife.plugins import StrategyRegistry, registry


def fake_distribution(root, name, version, entry_points, module=None, source=""):
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"  # as a wheel names it (the stem gives the name)
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = "\n".join(f"{k} = {v}" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[ctxlife.strategies]\n{lines}\n")
    if module:
        (root / f"{module}.py").write_text(textwrap.dedent(source))


def test_first_party_strategies_come_through_entry_points():
    entry = registry().entries["truncate_last_n"]
    assert entry.package == "ctxlife" and entry.value == "ctxlife_strategies.truncate_last_n:TruncateLastN"
    row = next(r for r in registry().describe() if r["name"] == "truncate_last_n")
    assert row["hooks"] == ["ctxlife_before_llm_call"]


def test_a_clash_fails_only_configs_that_use_the_contested_name(tmp_path, monkeypatch):
    source = """
        import ctxlife

        class Strat(ctxlife.Strategy):
            name = "truncate_last_n"
    """
    fake_distribution(tmp_path, "pkga", "1.0", {"truncate_last_n": "pkga_mod:Strat"}, "pkga_mod", source)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    registry(refresh=True)
    try:
        # Every other config still works.
        Host(settings_from_dict({"strategies": ["llm_summary"]}), context_window=1000).close()
        # A config that uses the name fails, naming both packages.
        with pytest.raises(PluginConflictError) as info:
            Host(settings_from_dict({"strategies": ["truncate_last_n"]}), context_window=1000)
        message = str(info.value)
        assert "two installed packages offer a strategy named 'truncate_last_n'" in message
        assert "ctxlife 0.1.0" in message and "pkga 1.0" in message and "uninstall one of them" in message
        with pytest.raises(PluginConflictError):
            settings_from_dict({"strategies": [], "truncate_last_n": {"rounds": 3}})
    finally:
        importlib.invalidate_caches()
        monkeypatch.undo()
        registry(refresh=True)


def test_the_strategies_command_lists_both_offers_of_a_contested_name(tmp_path):
    fake_distribution(tmp_path, "pkga", "1.0", {"truncate_last_n": "pkga_mod:Strat"}, "pkga_mod", "import ctxlife\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "COLUMNS": "200"}
    listed = subprocess.run(
        [sys.executable, "-m", "ctxlife.cli", "strategies", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    rows = [r for r in json.loads(listed.stdout) if r["name"] == "truncate_last_n"]
    assert {r["package"] for r in rows} == {"ctxlife", "pkga"}
    assert all(r["clashes_with"] for r in rows) and any("llm_summary" == r["name"] for r in json.loads(listed.stdout))
    broken = next(r for r in rows if r["package"] == "pkga")
    assert "Strat" in broken["broken"]  # listed even though it cannot be loaded
    table = subprocess.run(
        [sys.executable, "-m", "ctxlife.cli", "strategies"], env=env, capture_output=True, text=True, check=True
    )
    assert "clash: also in pkga 1.0" in table.stdout


def test_a_third_party_package_is_found_and_only_runs_when_configured(tmp_path):
    source = """
        import ctxlife

        class Shout(ctxlife.Strategy):
            name = "shout"

            class Options(ctxlife.Options):
                suffix: str = "!"

            @ctxlife.hookimpl
            def ctxlife_before_llm_call(self, ctx):
                last = ctx.messages[-1]
                ctx.messages[-1] = {**last, "content": last["content"].upper() + self.options.suffix}
                ctx.record("shouted")
    """
    fake_distribution(tmp_path, "ctxlife-shout", "2.0", {"shout": "shout_mod:Shout"}, "shout_mod", source)
    sys.path.insert(0, str(tmp_path))
    importlib.invalidate_caches()
    registry(refresh=True)
    try:
        assert registry().entries["shout"].source == "ctxlife-shout 2.0"
        installed_only = [{"role": "user", "content": "hi"}]
        ctxlife.manage(installed_only, config=settings_from_dict({"strategies": []}), context_window=1000)
        assert installed_only[0]["content"] == "hi"  # installed is not active
        active = [{"role": "user", "content": "hi"}]
        report = ctxlife.manage(
            active, config=settings_from_dict({"strategies": ["shout"], "shout": {"suffix": "?"}}), context_window=1000
        )
        assert active[0]["content"] == "HI?" and report.acted == ["shout"]
    finally:
        sys.path.remove(str(tmp_path))
        importlib.invalidate_caches()
        registry(refresh=True)
    assert "shout" not in registry().entries and "llm_summary" in registry().entries


def test_entry_point_name_must_match_strategy_name(tmp_path, monkeypatch):
    source = """
        import ctxlife

        class Mismatch(ctxlife.Strategy):
            name = "something_else"
    """
    fake_distribution(
        tmp_path,
        "mismatch",
        "1.0",
        {"mismatch": "mismatch_mod:Mismatch", "notastrategy": "mismatch_mod:ctxlife"},
        "mismatch_mod",
        source,
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = StrategyRegistry()
    with pytest.raises(PluginError, match="loads Mismatch whose name is 'something_else'; use one name everywhere"):
        reg.get("mismatch")
    with pytest.raises(PluginError, match="is not a ctxlife.Strategy subclass"):
        reg.get("notastrategy")


def test_a_misspelled_hook_is_an_error():
    class Typo:
        @ctxlife.hookimpl
        def ctxlife_before_llm_cal(self, ctx):
            pass

    with pytest.raises(PluginError, match="ctxlife_before_llm_cal.*hook names are ctxlife_bootstrap"):
        Host(settings_from_dict({"strategies": []}), plugins=[Typo()])


def test_hook_wrappers_are_refused_with_the_alternative():
    class Wrapper:
        @ctxlife.hookimpl(wrapper=True)
        def ctxlife_before_llm_call(self, ctx):
            return (yield)

    with pytest.raises(PluginError, match="as a hook wrapper; .*tryfirst=True or trylast=True"):
        Host(settings_from_dict({"strategies": []}), plugins=[Wrapper()])


def test_each_host_reads_its_plugins_hooks_as_they_are_now():
    """Hook markers are read once per class and reused: a method replaced on the class, a hook
    set on one instance, and a second instance of the class are each seen by the next host."""
    calls: list[str] = []

    class Probe:
        @ctxlife.hookimpl
        def ctxlife_before_llm_call(self, ctx):
            calls.append("original")

    def run(*plugins: object) -> list[str]:
        calls.clear()
        host = Host(settings_from_dict({"strategies": []}), context_window=8000, plugins=plugins)
        try:
            host.before_llm_call([{"role": "user", "content": "hi"}])
        finally:
            host.close()
        return list(calls)

    assert run(Probe(), Probe()) == ["original", "original"]

    @ctxlife.hookimpl
    def replaced(self, ctx):
        calls.append("replaced")

    Probe.ctxlife_before_llm_call = replaced  # type: ignore[method-assign]
    assert run(Probe()) == ["replaced"]

    def unmarked(self, ctx):
        calls.append("unmarked")

    Probe.ctxlife_before_llm_call = unmarked  # type: ignore[method-assign]
    assert run(Probe()) == []

    own = Probe()
    own.ctxlife_before_llm_call = ctxlife.hookimpl(lambda ctx: calls.append("instance"))  # type: ignore[method-assign]
    assert run(own, Probe()) == ["instance"]
