"""Run a command (``mutmut run``) with the servers a mutation scope declares, started once for it.

A scope whose tests need a server (``servers = ["postgres"]`` in its table of pyproject.toml) would
otherwise start one in every mutant's pytest run (one per mutant). Here the server is started once,
named to the tests in ``CTXLIFE_TEST_POSTGRES_URL`` (tests/conftest.py's ``postgres_server`` then makes
a database of each run's own on it), and stopped when the command ends, however it ends.

    python benchmarks/mutation_servers.py --scope NAME -- COMMAND ...
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
KNOWN = ("postgres",)


def servers_of(scope: str) -> list[str]:
    """The servers ``scope``'s table declares (the core declares none)."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    table = pyproject["tool"].get("ctxlife-mutate", {}).get("scopes", {}).get(scope, {})
    servers = list(table.get("servers", []))
    unknown = sorted(set(servers) - set(KNOWN))
    if unknown:
        raise SystemExit(f"scope {scope!r} declares servers {unknown}: the known ones are {list(KNOWN)}")
    return servers


def _test_conftest() -> Any:
    """tests/conftest.py as a module: its ``PostgresServer``, the one the tests start themselves."""
    spec = importlib.util.spec_from_file_location("ctxlife_tests_conftest", REPO / "tests" / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def postgres() -> Iterator[dict[str, str]]:
    conftest = _test_conftest()
    if conftest.postgres_bin("initdb") is None:
        raise SystemExit("the scope needs PostgreSQL: apt-get install postgresql-15")
    # as the tests do (root: the server runs as `postgres`, its folder outside pytest's)
    workdir = Path(tempfile.mkdtemp(prefix="ctxlife-test-postgres-"))
    server = conftest.PostgresServer(workdir)
    try:
        server.start()
        print(f"mutation_servers: PostgreSQL on port {server.port} for the run", flush=True)
        yield {conftest.PG_SERVER_ENV: server.url()}
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def main(scope: str, command: list[str]) -> int:
    env = dict(os.environ)
    with contextlib.ExitStack() as started:
        for name in servers_of(scope):
            env.update(started.enter_context({"postgres": postgres}[name]()))
        return subprocess.run(command, env=env, check=False).returncode


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scope", default="core")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (-- COMMAND ...)")
    raise SystemExit(main(args.scope, command))
