"""A recall block is the same in every process: the excerpt of a long message must not depend on the order a
set gives its terms in (that order changes with PYTHONHASHSEED, so the same search gave another block in the
next process)."""

from __future__ import annotations

import os
import subprocess
import sys

SCRIPT = """
from ctxlife.recall.block import excerpt
filler = " ".join(f"word{i}" for i in range(300))
text = f"delta is here. {filler}. alpha beta gamma are there. {filler}"
# 0.1 + 0.2 + 0.3 is 0.6 or 0.6000000000000001 as the terms come: a tie with delta's 0.6, or not
print(excerpt(text, 60, {"delta": 0.6, "alpha": 0.1, "beta": 0.2, "gamma": 0.3}, lambda t: len(t.split())))
"""


def test_an_excerpt_is_the_same_whatever_the_hash_seed() -> None:
    outputs = set()
    for seed in range(8):
        env = {**os.environ, "PYTHONHASHSEED": str(seed)}
        done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        outputs.add(done.stdout)
    assert len(outputs) == 1
