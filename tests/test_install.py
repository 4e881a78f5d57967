"""The package as users get it: a wheel installed into fresh virtual environments, outside the checkout.

1. The core (``pip install ctxlife``): no CrewAI, no LangChain; ``manage()`` and ``ctxlife check``
   work, ``wrap()`` names the extra to install. Its size and package count are printed (``-s``)
   and bounded.
2. The install matrix: every extra (openai, langchain, redis, otel, plot, agents, crewai) in a fresh
   venv with the newest versions pip resolves within the declared bounds; in each, every module of
   ctxlife imports (or names an extra not installed there) and a smoke test of each extra runs
   through the public API (tests/install/smoke.py): the model route against a local fake
   OpenAI-compatible server with no fallback, on openai 3 and on openai 2 (the agents venv), and
   ``ctxlife check`` failing once the server is down; the middleware across a restart; a Redis
   session; an Agents SDK run; ``ctxlife demo`` (a crew) from an empty folder. The resolved
   versions and install times are printed (``-s``).

Everything installs from the package index pip is configured with. These are marked slow; CI runs
them as part of ``make test``. ``--no-compile``: what is installed is the same, and only the
modules a test imports get compiled.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

import pytest

# One worker under xdist, and the expensive fixture is session-scoped: the worker may run other
# modules' tests between these, and a module-scoped fixture would then be set up again.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_install")]

REPO = Path(__file__).resolve().parents[1]
SKIP_COPY = {
    ".venv",
    ".git",
    "workspace",
    ".pytest_cache",
    ".mypy_cache",
    ".hypothesis",
    "build",
    "dist",
    "__pycache__",
}


def _run(cmd: list[str], cwd: Path, timeout: int = 900, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {
        k: v for k, v in os.environ.items() if not k.startswith("CTXLIFE_") and k not in {"PYTHONPATH", "VIRTUAL_ENV"}
    }
    full_env.update(env)
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=full_env)
    assert done.returncode == 0, (
        f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of the working tree, built from a copy (nothing generated lands in the checkout)."""
    source = tmp_path_factory.mktemp("source") / "ctxlife"
    shutil.copytree(
        REPO,
        source,
        symlinks=True,
        ignore=lambda _dir, names: [n for n in names if n in SKIP_COPY or n.endswith(".egg-info")],
    )
    out = tmp_path_factory.mktemp("wheel")
    _run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(source)], cwd=source
    )
    [built] = out.glob("ctxlife-*.whl")
    return built


def _fresh_venv(path: Path) -> Path:
    # Without pip of its own: this environment's pip installs into it (``pip --python``), as pip
    # would from inside it. Bootstrapping pip into each new environment (ensurepip) took 5 s each.
    venv.EnvBuilder(with_pip=False, clear=True).create(path)
    return path / "bin"


def _pip(bin_dir: Path, *args: str) -> list[str]:
    """A pip command that acts on the environment of ``bin_dir``."""
    return [sys.executable, "-m", "pip", "--python", str(bin_dir / "python"), *args]


def _site_packages(bin_dir: Path) -> Path:
    out = subprocess.run(
        [str(bin_dir / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


def _size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink()) / 1e6


def test_the_wheel_ships_the_demo_config_and_the_strategies(wheel: Path) -> None:
    import zipfile

    names = set(zipfile.ZipFile(wheel).namelist())
    assert {
        "ctxlife/configs/demo.toml",
        "ctxlife/py.typed",
        "ctxlife_strategies/llm_summary.py",
        "ctxlife/integrations/langchain.py",
    } <= names
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))).decode()
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    core = [r for r in requires if "extra ==" not in r]
    assert not any("crewai" in r or "langchain" in r for r in core), core
    assert any("crewai" in r and 'extra == "crewai"' in r for r in requires)
    assert any("langchain" in r and 'extra == "langchain"' in r for r in requires)


def test_the_core_installs_without_any_framework_and_manages_lists(wheel: Path, tmp_path: Path) -> None:
    bin_dir = _fresh_venv(tmp_path / "core-venv")
    site = _site_packages(bin_dir)
    before_mb = _size_mb(site)
    _run(_pip(bin_dir, "install", "--quiet", "--no-compile", str(wheel)), cwd=tmp_path)
    listed = json.loads(_run(_pip(bin_dir, "list", "--format", "json"), cwd=tmp_path).stdout)
    names = {p["name"].lower() for p in listed}
    assert "crewai" not in names and "langchain" not in names and "langchain-core" not in names
    size_mb = _size_mb(site) - before_mb
    packages = len(names - {"pip", "setuptools"})
    print(f"\ncore install: {packages} packages (ctxlife included), {size_mb:.0f} MB in site-packages")
    assert packages <= 30 and size_mb < 150, (packages, size_mb)

    work = tmp_path / "elsewhere"
    work.mkdir()
    code = (
        "import ctxlife, json\n"
        "msgs = [{'role': 'system', 'content': 'sys'}] + [m for i in range(30) for m in "
        "({'role': 'user', 'content': f'question {i} ' * 40}, {'role': 'assistant', 'content': f'answer {i} ' * 40})]\n"
        "report = ctxlife.manage(msgs, context_window=2000)\n"
        "print(json.dumps({'acted': report.acted, 'before': report.tokens_before, 'after': report.tokens_after}))\n"
        "try:\n    ctxlife.wrap(object())\nexcept ctxlife.MissingDependencyError as e:\n    print('WRAP:', e)\n"
    )
    out = _run([str(bin_dir / "python"), "-c", code], cwd=work).stdout.splitlines()
    report = json.loads(out[0])
    assert report["acted"] == ["truncate_last_n"] and report["after"] < report["before"]
    assert out[1].startswith("WRAP: ctxlife.wrap() needs crewai") and "pip install 'ctxlife[crewai]'" in out[1]

    config = work / "ctxlife.toml"
    config.write_text('strategies = ["llm_summary", "tool_output"]\n[llm_summary]\nsummarizer = "extractive"\n')
    checked = _run([str(bin_dir / "ctxlife"), "check", str(config), "--json"], cwd=work)
    assert json.loads(checked.stdout)["strategies"] == ["llm_summary", "tool_output"]
    listed_strategies = _run([str(bin_dir / "ctxlife"), "strategies", "--json"], cwd=work)
    assert {"truncate_last_n", "llm_summary", "snapshot_restore"} <= {
        r["name"] for r in json.loads(listed_strategies.stdout)
    }


# -- the install matrix ---------------------------------------------------------------------------
# Each extra in a fresh venv with the newest versions pip resolves within the declared bounds (from the
# index pip is configured with; nothing of this environment is seen). openai has a venv of its own, so
# that nothing another extra brings (langchain brings httpx) hides an undeclared import of its route.
# Extras whose resolutions agree share a venv: `pip install --dry-run --report` on 2026-12-06 resolved
# langchain, redis, otel and plot together exactly as each alone (langchain 1.5.2, redis 8.2.0, ...);
# agents holds openai at 2.x and crewai pydantic at 2.12, so each has its own. The agents venv also
# runs the openai check: the model route on openai 2 (2.54), as the openai venv runs it on openai 3.
# The index is local files: pip's cache holds nothing of it, so a cache folder would not help.
MATRIX = {
    "openai": ["openai"],
    "langchain,redis,otel,plot": ["langchain", "redis", "otel", "plot"],
    "agents": ["agents", "openai"],
    "crewai,plot": ["crewai", "plot"],
}
SMOKE = REPO / "tests" / "install" / "smoke.py"
SUMMARY = "SMOKE MODEL SUMMARY: reservations RS000X onwards were checked and confirmed."
_matrix: dict[str, Path] = {}


def _matrix_venv(extras: str, wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with ``ctxlife[extras]`` from the wheel and the newest versions the index offers
    (made once per run); prints the resolved versions and the install time (``-s``)."""
    if extras not in _matrix:
        root = tmp_path_factory.mktemp("matrix")
        bin_dir = _fresh_venv(root / "venv")
        started = time.perf_counter()
        _run(_pip(bin_dir, "install", "--quiet", "--no-compile", f"ctxlife[{extras}] @ {wheel.as_uri()}"), cwd=root)
        seconds = time.perf_counter() - started
        listed = json.loads(_run(_pip(bin_dir, "list", "--format", "json"), cwd=root).stdout)
        versions = {p["name"].lower(): p["version"] for p in listed}
        shown = ", ".join(f"{n} {versions[n]}" for n in sorted(versions) if n in RESOLVED_SHOWN)
        print(f"\nctxlife[{extras}]: {len(versions)} packages in {seconds:.0f} s: {shown}")
        _matrix[extras] = bin_dir
    return _matrix[extras]


RESOLVED_SHOWN = {
    "openai",
    "httpx",
    "httpx2",
    "pydantic",
    "langchain",
    "langchain-core",
    "langgraph",
    "redis",
    "opentelemetry-api",
    "matplotlib",
    "openai-agents",
    "crewai",
}


def _smoke(bin_dir: Path, extras: list[str], cwd: Path, **env: str) -> str:
    done = _run([str(bin_dir / "python"), str(SMOKE), *extras], cwd=cwd, timeout=300, **env)
    return done.stdout


@pytest.mark.parametrize("extras", ["openai", "langchain,redis,otel,plot", "agents"])
def test_each_extra_installs_fresh_imports_every_module_and_works(
    extras: str, wheel: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> None:
    sys.path.insert(0, str(REPO / "tests" / "models"))
    from fake_endpoint import completion, serve

    redis_url = request.getfixturevalue("redis_url") if "redis" in MATRIX[extras] else ""
    bin_dir = _matrix_venv(extras, wheel, tmp_path_factory)
    with serve(completion(SUMMARY)) as server:
        out = _smoke(
            bin_dir, MATRIX[extras], tmp_path, CTXLIFE_SMOKE_BASE_URL=server["base_url"], CTXLIFE_SMOKE_REDIS=redis_url
        )
        assert bool(server["requests"]) == ("openai" in MATRIX[extras]), (
            "the endpoint was called only by the openai check"
        )
    print(out)
    for extra in MATRIX[extras]:
        assert f"\n{extra}: " in f"\n{out}", out
    if "openai" not in MATRIX[extras]:
        return
    # the same config with the server gone: `ctxlife check` fails and says what to do
    config = tmp_path / "ctxlife.toml"
    done = subprocess.run(
        [str(bin_dir / "ctxlife"), "check", str(config)], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 1, done.stdout
    assert "could not call the [model]: model 'smoke-model' at http://127.0.0.1:" in done.stderr, done.stderr
    assert "cannot connect" in done.stderr and "Fix: start the server" in done.stderr, done.stderr


def test_the_demo_runs_from_any_folder_after_installing_the_crewai_and_plot_extras(
    wheel: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    bin_dir = _matrix_venv("crewai,plot", wheel, tmp_path_factory)
    print(_smoke(bin_dir, MATRIX["crewai,plot"], tmp_path))
    # The README's main job (`make demo` runs the same command from the checkout), offline.
    work = tmp_path / "anywhere"
    work.mkdir()
    # (how long it takes is a claim for make bench: bench_overhead.py part 'demo', not a bound here)
    done = _run(
        [str(bin_dir / "ctxlife"), "demo", "--workspace", str(work / "ws")], cwd=work, timeout=600, COLUMNS="160"
    )
    out = " ".join(done.stdout.split())
    assert "ctxlife/configs/demo.toml" in out and str(REPO) not in out  # the packaged config, not the checkout's
    for expected in (
        "bootstrap:",
        "crossed the 40% line",
        "llm_summary: compacted",
        "snapshot written",
        "simulated restart",
        "snapshot_restore: restored",
        "ctxlife_recall: the agent read back",
        "Session summary",
        "they go UP at a restore",
        "facts kept 8/8",
        "facts kept = values the agent's answers state",
    ):
        assert expected in out, expected
    assert out.count("turn ") >= 12
    assert (work / "ws" / "demo_context.png").stat().st_size > 10_000
    assert list((work / "ws" / "sessions").glob("*_raw.jsonl"))
