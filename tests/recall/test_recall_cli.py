"""``ctxlife session search ID QUERY`` over a real store."""

from __future__ import annotations

import json
import subprocess
import sys

from ctxlife.sessions import open_store

CTXLIFE = [sys.executable, "-m", "ctxlife.cli"]


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([*CTXLIFE, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_session_search_prints_the_best_passages(tmp_path):
    url = f"file://{tmp_path / 'sessions'}"
    with open_store(url) as store:
        store.append(
            "trip",
            [
                {"role": "user", "content": "Hello there."},
                {"role": "assistant", "content": "Hi!"},
                {"role": "user", "content": "Our hotel in Lisbon is the Casa do Mar, room 214."},
                {"role": "assistant", "content": "Noted."},
                {"role": "user", "content": "我们在里斯本住的酒店叫海之家。"},
                {"role": "assistant", "content": "好的。"},
            ],
        )
    done = run("session", "search", "--store", url, "trip", "which hotel in Lisbon?")
    assert done.returncode == 0, done.stderr
    assert "> #3 user: Our hotel in Lisbon is the Casa do Mar, room 214." in done.stdout
    as_json = run("session", "search", "--store", url, "trip", "酒店", "--limit", "1", "--json")
    rows = json.loads(as_json.stdout)
    assert len(rows) == 1 and any("海之家" in m["text"] for m in rows[0]["messages"])
    missing = run("session", "search", "--store", url, "nobody", "hotel")
    assert missing.returncode == 1 and "no raw history" in missing.stderr
