"""Test-session set-up: CrewAI offline, no stray hosts between tests."""

from __future__ import annotations

import contextlib
import gzip
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

# Before anything imports crewai: no telemetry, tracing or version check (no network here).
from ctxlife.testing import OFFLINE_ENV

for _key, _value in OFFLINE_ENV.items():
    os.environ[_key] = _value
sys.path.insert(0, str(Path(__file__).parent))  # delegating_store, for every test folder

import hypothesis  # noqa: E402
import pytest  # noqa: E402

# No example database: hypothesis would keep one in .hypothesis/ of the working directory (the
# checkout). A failing example is reported with its @reproduce_failure blob instead.
hypothesis.settings.register_profile("ctxlife-tests", database=None, print_blob=True)
hypothesis.settings.load_profile("ctxlife-tests")

pytest_plugins = ["pytester"]  # tests/test_suite_hygiene.py runs the temp-folder check on a stray file

# The strategy-author kit's fixtures (ctxlife.pytest_plugin) load through ctxlife's pytest11
# entry point; the first-party tests use them like any plugin author would.


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--reliability-stats",
        action="store_true",
        help="print the reliability suite's table of hypothesis examples per invariant (and the soak figures)",
    )


# -- the reliability suite's reach report (tests/reliability/conftest.py counts) ----------------------


def _add_reach(config: pytest.Config, rows: dict[str, dict[str, Any]]) -> None:
    total: dict[str, dict[str, Any]] = config.__dict__.setdefault("ctxlife_reach_total", {})
    for test, row in rows.items():
        into = total.setdefault(
            test, {"examples": 0, "seconds": 0.0, "checks": {}, "examples_per_check": {}, "floors": {}}
        )
        into["examples"] += row["examples"]
        into["seconds"] += row["seconds"]
        for key in ("checks", "examples_per_check"):
            for name, n in row[key].items():
                into[key][name] = into[key].get(name, 0) + n
        into["floors"].update(row["floors"])


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist: a worker finished; its reach counts join the run's."""
    payload = getattr(node, "workeroutput", {}).get("ctxlife_reach")
    if payload:
        _add_reach(node.config, json.loads(payload))


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """The reach report: hypothesis examples per invariant and per test, and each floor's reach
    (``--reliability-stats`` prints it; ``RELIABILITY_STATS_JSON=PATH`` writes it)."""
    local = getattr(config, "ctxlife_reach", None)  # a run without workers
    if local:
        _add_reach(config, local)
    rows: dict[str, dict[str, Any]] = config.__dict__.get("ctxlife_reach_total", {})
    target = os.environ.get("RELIABILITY_STATS_JSON")
    show = config.getoption("--reliability-stats", default=False)
    if not rows or not (target or show):
        return
    per_invariant: dict[str, dict[str, int]] = {}
    for row in rows.values():
        for name, n in row["checks"].items():
            entry = per_invariant.setdefault(name, {"examples": 0, "checks": 0})
            entry["checks"] += n
            entry["examples"] += row["examples_per_check"].get(name, 0)
    if target:
        out = {
            "tests": {
                k: {"examples": v["examples"], "seconds": round(v["seconds"], 2), "checks": v["checks"]}
                for k, v in sorted(rows.items())
            },
            "invariants": dict(sorted(per_invariant.items())),
        }
        Path(target).write_text(json.dumps(out, indent=2, sort_keys=True), encoding="utf-8")
    if not show:
        return
    tr = terminalreporter
    tr.section("ctxlife reliability: hypothesis examples per invariant")
    tr.write_line(f"{'invariant':<28}{'examples':>10}{'checks':>10}")
    for name, entry in sorted(per_invariant.items()):
        tr.write_line(f"{name:<28}{entry['examples']:>10}{entry['checks']:>10}")
    tr.write_line(f"{'test':<70}{'examples':>10}{'seconds':>9}")
    for name, row in sorted(rows.items()):
        tr.write_line(f"{name[:70]:<70}{row['examples']:>10}{row['seconds']:>9.1f}")
    floored = [(name, row) for name, row in sorted(rows.items()) if row["floors"]]
    if floored:
        tr.write_line(f"{'reach: test / check':<70}{'reached':>10}{'floor':>9}")
        for name, row in floored:
            for check, share in sorted(row["floors"].items()):
                reached = row["examples_per_check"].get(check, 0)
                tr.write_line(f"{(name + ' / ' + check)[:70]:<70}{reached:>5}/{row['examples']:<4}{share:>9.0%}")
    if target:
        tr.write_line(f"written to {target}")


# -- tests that import a heavy optional package ------------------------------------------------------


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``@pytest.mark.imports("crewai")``: the test imports that top-level package in the test process
    (in the test, not at module level). Skipped when it is not installed; under ``--dist loadgroup`` every
    test that imports it runs on one worker. Imported at module level, CrewAI cost every xdist worker
    about 3 s of its 12 s of collection (2-core machine); now only the worker that runs these pays."""
    for item in items:
        mark = item.get_closest_marker("imports")
        if mark is None:
            continue
        package = mark.args[0]  # a top-level name: find_spec of a submodule would import its package
        item.add_marker(pytest.mark.xdist_group(f"imports-{package}"))
        if importlib.util.find_spec(package) is None:
            item.add_marker(pytest.mark.skip(reason=mark.kwargs.get("reason", f"{package} is not installed")))


# -- tests write only under their temporary folders -------------------------------------------------

REPO_ROOT = Path(__file__).resolve().parents[1]
#: The system temp folder as it was before the run replaced it with its own (see below).
REAL_TMP = Path(tempfile.gettempdir())
# What running tests may leave in the checkout: interpreter and tool caches (all git-ignored).
_CACHES = ("__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".venv", "mutants")


def _checkout_entries() -> set[str] | None:
    """``git status`` of the checkout, ignored files included (a test writing into a git-ignored
    folder such as ``workspace/`` is caught too); None outside a git checkout (also for a copy of the
    tests inside another repository, such as ``make mutate``'s stage: that repository is not theirs)."""
    if not (REPO_ROOT / ".git").exists():
        return None
    try:
        done = subprocess.run(
            ["git", "status", "--porcelain", "--ignored=matching", "--untracked-files=all"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    lines = {line for line in done.stdout.splitlines() if line}
    return {line for line in lines if not any(part in _CACHES for part in Path(line[3:]).parts)}


# Caches third-party libraries keep in the system temp folder, reused across runs: tiktoken's
# encodings (via CrewAI/LiteLLM) and CrewAI's inter-process file locks.
# (and, run as root, each xdist worker's PostgreSQL cluster: made and removed by ``postgres_server``
# while other workers compare the folder before and after)
_LIBRARY_CACHES = ("pytest-of-*", "data-gym-cache", "crewai:*.lock", "ctxlife-test-postgres-*")


def _tmp_entries(folder: Path) -> set[str]:
    try:
        return {p.name for p in folder.iterdir() if not any(fnmatch(p.name, g) for g in _LIBRARY_CACHES)}
    except OSError:
        return set()


# The run's private system temp folder, and for each entry in it the test after which it was first
# seen: a leftover is reported with the test that wrote it (or the one running when a background
# thread or child process of an earlier test did).
_private_tmp: Path | None = None
_tmp_first_seen: dict[str, str] = {}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[object]:
    try:
        return (yield)
    finally:
        if _private_tmp is not None:
            for name in _tmp_entries(_private_tmp) - _tmp_first_seen.keys():
                _tmp_first_seen[name] = item.nodeid


def pytest_sessionstart(session: pytest.Session) -> None:
    """Hypothesis keeps its caches (unicode tables, the constants it finds in the source) in
    .hypothesis/ of the working directory, the checkout, and its pytest plugin fills them while
    collecting: before any fixture runs. They go under the run's temporary folder instead."""
    factory: pytest.TempPathFactory = session.config._tmp_path_factory  # type: ignore[attr-defined]
    hypothesis.configuration.set_hypothesis_home_dir(factory.mktemp("hypothesis-home"))


@pytest.fixture(autouse=True)
def _structlog_left_as_found() -> Iterator[None]:
    """``structlog.testing.capture_logs`` configures structlog for good: left so, ctxlife's events
    of later tests would print to stdout (into a CLI's ``--json`` output). Undo it after each test."""
    import structlog

    was_configured = structlog.is_configured()
    yield
    if not was_configured and structlog.is_configured():
        structlog.reset_defaults()


@pytest.fixture(scope="session", autouse=True)
def _nothing_written_outside_tmp_path(tmp_path_factory: pytest.TempPathFactory):
    """Fails the run when the tests left files in the checkout or in the system temp folder.

    Tests write only under pytest's ``tmp_path``. For the run, the system temp folder
    (``tempfile.gettempdir()``, ``TMPDIR`` for child processes) is a fresh folder of pytest's own:
    whatever is left in it at the end was written by a test (or the code under test) outside its
    ``tmp_path``. On CI (``CI`` set) the real temp folder is checked too (a path written as
    ``/tmp/...``); on a developer's machine other programs write there, so it is not.
    """
    global _private_tmp
    real_tmp = Path(tempfile.gettempdir())
    private = tmp_path_factory.mktemp("system-temp-folder")
    _private_tmp = private
    saved = (tempfile.tempdir, os.environ.get("TMPDIR"))
    tempfile.tempdir = str(private)
    os.environ["TMPDIR"] = str(private)
    checkout_before = _checkout_entries()
    strict = bool(os.environ.get("CI")) or os.environ.get("CTXLIFE_STRICT_TMP") == "1"
    tmp_before = _tmp_entries(real_tmp) if strict else set()
    try:
        yield
    finally:
        tempfile.tempdir = saved[0]
        if saved[1] is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved[1]
    problems = []
    checkout_after = _checkout_entries()
    if checkout_before is not None and checkout_after is not None:
        new = sorted(checkout_after - checkout_before)
        if new:
            problems.append(f"the tests wrote into the checkout {REPO_ROOT}: {new[:20]}")
    left = sorted(_tmp_entries(private))
    if left:
        named = [f"{name} (first seen after {_tmp_first_seen.get(name, 'the last test')})" for name in left[:20]]
        problems.append(f"the tests left files in the system temp folder ({private}): {named}")
    if strict:
        new_tmp = sorted(_tmp_entries(real_tmp) - tmp_before)
        if new_tmp:
            problems.append(f"the tests left files in {real_tmp}: {new_tmp[:20]}")
    if problems:
        pytest.fail("; ".join(problems) + " (tests write only under pytest's tmp_path)", pytrace=False)


@pytest.fixture(autouse=True)
def _fresh_manage_hosts():
    """``ctxlife.manage`` caches hosts per config; tests must not share them."""
    from ctxlife.api import clear_hosts

    clear_hosts()
    yield
    clear_hosts()


@pytest.fixture(autouse=True)
def _fresh_text_caches():
    """The fact scanner's results by text and recall's term patterns are cached per process: a test must
    compute its own (under ``make mutate`` a mutant's worker is forked from the process that ran every
    test, and read its results from the caches instead of running the mutated code)."""
    from ctxlife.facts.scanner import _SCANNED
    from ctxlife.recall.text import _term_literal, term_pattern

    _SCANNED.clear()
    term_pattern.cache_clear()
    _term_literal.cache_clear()


@pytest.fixture(autouse=True)
def _no_ctxlife_env(monkeypatch):
    """A developer's CTXLIFE_* variables must not leak into tests."""
    for key in list(os.environ):
        if key.startswith("CTXLIFE_"):
            monkeypatch.delenv(key)


# -- real redis-servers: one for the whole run (store tests), and ones a test owns (kills, TLS) ---


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def redis_binary() -> str | None:
    return shutil.which("redis-server") or (
        "/usr/bin/redis-server" if os.access("/usr/bin/redis-server", os.X_OK) else None
    )


class RedisServer:
    """One redis-server process this test controls: ``start()``, ``kill()`` (SIGKILL), ``restart()``.

    With ``persistent`` (the default), persistence is AOF with ``appendfsync always`` in the server's
    own folder, so a killed server restarted on the same folder has every acknowledged write (what
    "nothing stored is lost" means for Redis: its durability is Redis's own). Without, nothing is
    written to disk.
    """

    def __init__(self, workdir: Path, extra: list[str], *, persistent: bool = True) -> None:
        self.workdir = workdir
        self.extra = extra
        self.persistent = persistent
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = workdir / "redis.log"

    @property
    def tls(self) -> bool:
        return "--tls-port" in self.extra

    def args(self) -> list[str]:
        base = [
            redis_binary() or "redis-server",
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.workdir),
            "--logfile",
            str(self.log),
        ]
        base += ["--save", "", "--daemonize", "no"]
        base += ["--appendonly", "yes", "--appendfsync", "always"] if self.persistent else ["--appendonly", "no"]
        if self.tls:
            base += ["--port", "0", "--tls-port", str(self.port)]
            extra = [
                a
                for i, a in enumerate(self.extra)
                if a != "--tls-port" and (i == 0 or self.extra[i - 1] != "--tls-port")
            ]
        else:
            base += ["--port", str(self.port)]
            extra = self.extra
        return base + extra

    def start(self, timeout: float = 10.0) -> None:
        offset = self.log.stat().st_size if self.log.exists() else 0
        self.proc = subprocess.Popen(
            self.args(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                raise RuntimeError(
                    f"redis-server exited with {self.proc.returncode}: {err[-800:]} {self._log_tail(offset)}"
                )
            if "Ready to accept connections" in self._log_tail(offset):
                return
            time.sleep(0.02)
        raise RuntimeError(f"redis-server not ready within {timeout} s: {self._log_tail(offset)}")

    def _log_tail(self, offset: int) -> str:
        try:
            with open(self.log, "rb") as f:
                f.seek(offset)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL: no shutdown, no final save (AOF with fsync always keeps acknowledged writes)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def restart(self) -> None:
        self.kill()
        self.start()

    def stop(self) -> None:
        self.kill()
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.stderr.close()

    def url(self, password: str | None = None, db: int = 0, query: str = "") -> str:
        auth = f":{password}@" if password else ""
        scheme = "rediss" if self.tls else "redis"
        return f"{scheme}://{auth}127.0.0.1:{self.port}/{db}" + (f"?{query}" if query else "")


@pytest.fixture
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """``redis_server(*extra_args)`` starts a redis-server owned by this test and returns it."""
    if redis_binary() is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server; .ci/run installs it)")
    pytest.importorskip("redis", reason="the 'redis' Python package is not installed")
    servers: list[RedisServer] = []

    def start(*extra: str) -> RedisServer:
        server = RedisServer(tmp_path_factory.mktemp("own-redis"), list(extra))
        servers.append(server)
        server.start()
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a throw-away redis-server (no persistence) shared by the run, killed at the end."""
    if redis_binary() is None:
        pytest.skip(
            "redis-server is not installed, so the Redis store tests cannot run here; "
            "install it with `apt-get install redis-server` (CI's .ci/run does)"
        )
    pytest.importorskip("redis", reason="the 'redis' Python package is not installed: pip install redis")
    server = RedisServer(tmp_path_factory.mktemp("redis-server"), [], persistent=False)
    try:
        server.start()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    yield server.url()
    server.stop()


# -- a real PostgreSQL server for the run (the postgres store's tests) -------------------------------

#: The password of the test server's user: every postgres test runs with it in its URL, so an error
#: or a repr that printed it would show.
PG_PASSWORD = "pg-secret-4f1d"


def postgres_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for version in ("17", "16", "15"):
        path = f"/usr/lib/postgresql/{version}/bin/{name}"
        if os.access(path, os.X_OK):
            return path
    return None


class PostgresServer:
    """A throw-away PostgreSQL cluster in ``workdir``: initdb, then the ``postgres`` server as a child
    process on a free port of 127.0.0.1 with its socket in ``workdir``; ``stop()`` at the end.

    Run as root, the server runs as the ``postgres`` system user (PostgreSQL refuses root):
    ``workdir`` is given to it and its parent folders made traversable (not readable) by it. That
    ``workdir`` is then outside pytest's own folder (see :func:`postgres_server`); should pytest's
    folder be used anyway, initdb is retried, the server is started without pg_ctl (it only needs the
    paths while it starts: then it works inside its data folder) and stopped by its pid."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.data = workdir / "data"
        self.port = free_port()
        self.log = workdir / "server.log"
        self.user: str | None = "postgres" if os.geteuid() == 0 else None
        self.proc: subprocess.Popen[bytes] | None = None
        self.dbname = "postgres"

    def _as_server_user(self, args: list[str]) -> list[str]:
        return args if self.user is None else ["runuser", "-u", self.user, "--", *args]

    def hand_over(self, path: Path) -> None:
        """Give ``path`` to the server's user and let it traverse the folders above (root only);
        the run's PgBouncer runs as that user too."""
        if self.user is None:
            return
        import pwd

        entry = pwd.getpwnam(self.user)
        os.chown(path, entry.pw_uid, entry.pw_gid)
        for parent in path.parents:  # traverse only (o+x), up to the system root
            if parent.stat().st_uid == os.geteuid() and not parent.stat().st_mode & 0o001:
                parent.chmod(parent.stat().st_mode | 0o001)

    def start(self, timeout: float = 60.0) -> None:
        initdb, server = postgres_bin("initdb"), postgres_bin("postgres")
        assert initdb and server
        pwfile = self.workdir / "pw"
        pwfile.write_text(PG_PASSWORD)
        pwfile.chmod(0o644)
        error = ""
        for _ in range(3):
            self.hand_over(self.workdir)
            shutil.rmtree(self.data, ignore_errors=True)
            args = [initdb, "-D", str(self.data), "-U", "ctxlife", "--pwfile", str(pwfile), "-E", "UTF8",
                    "--no-locale", "--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync"]  # fmt: skip
            done = subprocess.run(self._as_server_user(args), capture_output=True, text=True, timeout=120)
            if done.returncode == 0:
                break
            error = done.stderr[-1500:]
        else:
            raise RuntimeError(f"initdb failed three times: {error}")
        args = [server, "-D", str(self.data), "-p", str(self.port), "-c", "listen_addresses=127.0.0.1",
                "-c", f"unix_socket_directories={self.workdir}", "-c", "fsync=off", "-c", "synchronous_commit=off",
                "-c", "full_page_writes=off", "-c", "max_connections=200"]  # fmt: skip
        import psycopg

        deadline = time.monotonic() + timeout
        for _ in range(3):
            # Another pytest session starting meanwhile sets /tmp/pytest-of-USER back to 0700, and the
            # server user then cannot reach its folder: make it reachable again and start again.
            self.hand_over(self.workdir)
            with open(self.log, "ab") as log:
                self.proc = subprocess.Popen(
                    self._as_server_user(args), stdin=subprocess.DEVNULL, stdout=log, stderr=log
                )
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    psycopg.connect(self.url(), connect_timeout=2).close()
                    return
                except psycopg.OperationalError:
                    time.sleep(0.05)
            if self.proc.poll() is None:
                break
        if self.proc.poll() is not None:
            raise RuntimeError(f"postgres exited with {self.proc.returncode}: {self.log.read_text()[-1500:]}")
        raise RuntimeError(f"postgres not ready within {timeout} s: {self.log.read_text()[-1500:]}")

    def stop(self) -> None:
        """Immediate shutdown (SIGQUIT to the server's pid, from its pid file), then wait for it."""
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(OSError, ValueError, IndexError):
            os.kill(int((self.data / "postmaster.pid").read_text().split()[0]), signal.SIGQUIT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def url(self, query: str = "") -> str:
        base = f"postgresql://ctxlife:{PG_PASSWORD}@127.0.0.1:{self.port}/postgres"
        return base + (f"?{query}" if query else "")


#: A running PostgreSQL server for the run, instead of one of its own: ``make mutate`` starts one for a
#: scope that declares it (``servers = ["postgres"]``) and names it here, as its mutants' pytest runs
#: (one per mutant) would each start a server. A URL whose user may create databases.
PG_SERVER_ENV = "CTXLIFE_TEST_POSTGRES_URL"
# read once, as the run starts: every test runs without the CTXLIFE_* variables (_no_ctxlife_env)
_RUNNING_POSTGRES = os.environ.get(PG_SERVER_ENV)


class RunningPostgres:
    """A database of the run's own (``CREATE DATABASE``, dropped at the end) on the server that
    :data:`PG_SERVER_ENV` names: the tests' schemas, fixed names included, never meet another run's."""

    def __init__(self, url: str) -> None:
        from urllib.parse import urlsplit

        import psycopg

        self._psycopg = psycopg
        self._server = url
        self.user: str | None = "postgres" if os.geteuid() == 0 else None  # the run's PgBouncer runs as it
        parts = urlsplit(url)
        self.port = parts.port or 5432
        self.dbname = f"ctxlife_run_{os.getpid()}_{os.urandom(4).hex()}"
        self._base = parts._replace(path=f"/{self.dbname}", query="").geturl()
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'CREATE DATABASE "{self.dbname}"')

    hand_over = PostgresServer.hand_over

    def url(self, query: str = "") -> str:
        return self._base + (f"?{query}" if query else "")

    def stop(self) -> None:
        """Drop the run's database (its stores' pools may still hold connections: FORCE ends them)."""
        with self._psycopg.connect(self._server, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.dbname}" WITH (FORCE)')


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer | RunningPostgres]:
    """A throw-away PostgreSQL server shared by the run, stopped at the end (or, when
    :data:`PG_SERVER_ENV` names a running one, a database of the run's own on it)."""
    if _RUNNING_POSTGRES:
        pytest.importorskip(
            "psycopg_pool", reason="psycopg and psycopg-pool are not installed: pip install 'ctxlife[postgres]'"
        )
        database = RunningPostgres(_RUNNING_POSTGRES)
        try:
            yield database
        finally:
            database.stop()
        return
    if postgres_bin("initdb") is None or postgres_bin("pg_ctl") is None:
        pytest.skip(
            "PostgreSQL is not installed, so the postgres store tests cannot run here; install it with "
            "`apt-get install postgresql-15` (CI's .ci/run does)"
        )
    pytest.importorskip(
        "psycopg_pool", reason="psycopg and psycopg-pool are not installed: pip install 'ctxlife[postgres]'"
    )
    if os.geteuid() == 0:
        # The server runs as another user, who must traverse every folder above its own. pytest sets
        # its root folder (/tmp/pytest-of-root) back to 0700 whenever another pytest run starts (two
        # checkouts tested at once): the server then loses its files mid-run. So, as root only, the
        # cluster lives in a folder of the real temp folder, removed when the run ends.
        workdir = Path(tempfile.mkdtemp(prefix="ctxlife-test-postgres-", dir=REAL_TMP))
    else:
        workdir = tmp_path_factory.mktemp("postgres-server")
    server = PostgresServer(workdir)
    try:
        server.start()
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        server.stop()
        pytest.fail(str(exc))
    try:
        yield server
    finally:
        server.stop()
        if os.geteuid() == 0:
            shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_scheme(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Make ``postgres://`` open in this process and its children when the installed ctxlife predates
    the store (a checkout run against an older editable install): a distribution of the test run's
    own, found on ``sys.path`` and ``PYTHONPATH``, offers the entry points pyproject.toml declares."""
    from importlib.metadata import entry_points

    from ctxlife.sessions import ENTRY_POINT_GROUP, REGISTRY

    if {"postgres", "postgresql"} <= {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}:
        yield
        return
    folder = tmp_path_factory.mktemp("postgres-entry-points")
    info = folder / "ctxlife_postgres_tests-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ctxlife-postgres-tests\nVersion: 0\n")
    target = "ctxlife.sessions.postgres:PostgresStore.from_url"
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\npostgres = {target}\npostgresql = {target}\n")
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (saved, str(folder)) if p)
    sys.path.append(str(folder))
    REGISTRY.refresh()
    yield
    sys.path.remove(str(folder))
    if saved is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = saved
    REGISTRY.refresh()


@pytest.fixture(scope="session")
def postgres_url(postgres_server: PostgresServer | RunningPostgres, postgres_scheme: None) -> str:
    """URL of the run's PostgreSQL server (its password included); add ``schema=`` to isolate a test."""
    return postgres_server.url()


# -- the tau-bench trajectories kept in tests/data (MIT, license beside them) --------------------

TAU_BENCH = Path(__file__).resolve().parent / "data" / "tau-bench-airline-gpt4o.json.gz"


@pytest.fixture(scope="session")
def tau_bench() -> list[dict]:
    """The 200 tau-bench airline trajectories (objects with ``task_id``, ``trial``, ``traj``)."""
    with gzip.open(TAU_BENCH, "rt", encoding="utf-8") as fh:
        return json.load(fh)


# -- is the event loop ever blocked? -------------------------------------------------------------


class LoopWitness:
    """Proof, without a clock, that the event loop runs while a slow step (a summary) is in progress.

    ``run(main)`` is ``asyncio.run(main())``. A slow step calls :meth:`wait_for_the_loop` instead of
    sleeping: it schedules a callback on the loop and waits for it, so it returns only once the loop
    ran something while the step was in progress. A step on the loop's own thread (blocking it) can
    never see that: it is counted in ``blocked`` at once. ``overlapping(n)`` makes the first ``n``
    steps also wait until all ``n`` are in progress together (a barrier): steps queued one after
    another never are. Outcomes are counted (``served``, ``blocked``, ``not_overlapping``,
    ``after_the_run``) for the test to assert on; the timeouts only bound a failing test.
    """

    TIMEOUT = 30.0

    def __init__(self) -> None:
        import threading

        self.loop: Any = None
        self.served = 0
        self.blocked = 0
        self.not_overlapping = 0
        self.after_the_run = 0
        self._lock = threading.Lock()
        self._barrier: Any = None
        self._parties = 0

    def run(self, main: Any) -> Any:
        import asyncio

        async def watched() -> Any:
            self.loop = asyncio.get_running_loop()
            return await main()

        return asyncio.run(watched())

    def overlapping(self, n: int, timeout: float = TIMEOUT) -> None:
        """The first ``n`` steps each wait (at most ``timeout`` seconds) until all ``n`` are in progress."""
        import threading

        self._barrier = threading.Barrier(n, timeout=timeout)
        self._parties = n

    def wait_for_the_loop(self) -> None:
        import asyncio
        import threading

        loop = self.loop
        assert loop is not None, "wait_for_the_loop() is for steps inside run()"
        try:
            on_the_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            on_the_loop = False
        if on_the_loop:
            with self._lock:
                self.blocked += 1
            return
        ran = threading.Event()
        try:
            loop.call_soon_threadsafe(ran.set)
        except RuntimeError:  # the loop is closed: a step that outlived the run proves nothing
            with self._lock:
                self.after_the_run += 1
            return
        served = ran.wait(self.TIMEOUT)
        with self._lock:
            self.served += served
            self.blocked += not served
            self._parties -= 1
            barrier = self._barrier if self._parties >= 0 else None
        if barrier is not None:
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                with self._lock:
                    self.not_overlapping += 1


@pytest.fixture
def loop_witness() -> LoopWitness:
    """A :class:`LoopWitness` for one test."""
    return LoopWitness()
