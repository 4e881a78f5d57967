"""Stage the copy `make mutate` runs mutmut in (build/mutate): src/ctxlife and the strategies side by side.

mutmut 3 names a mutant after its file's path and puts only ``mutants/src`` on ``sys.path``, so the
strategies package (``strategies/ctxlife_strategies`` in the checkout) is copied to
``src/ctxlife_strategies`` beside ``src/ctxlife``. In the copy, every function whose ``def`` line
matches one of ``[tool.mutmut] do_not_mutate_patterns`` gets ``# pragma: no mutate block``: mutmut
applies those patterns to single lines only, and the scope of the run is whole functions (the
checkout's sources are not touched).

    python benchmarks/mutation_stage.py build/mutate
"""

from __future__ import annotations

import re
import shutil
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COPIED = ["tests", "configs", "docs", "benchmarks", "pyproject.toml"]


def main(stage: Path) -> None:
    if stage.exists():
        shutil.rmtree(stage)
    (stage / "src").mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    shutil.copytree(REPO / "src" / "ctxlife", stage / "src" / "ctxlife", ignore=ignore, symlinks=True)
    shutil.copytree(REPO / "strategies" / "ctxlife_strategies", stage / "src" / "ctxlife_strategies", ignore=ignore)
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, stage / name, ignore=ignore, symlinks=True)
        else:
            shutil.copy2(source, stage / name)
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mutmut"]
    patterns = [re.compile(p) for p in config.get("do_not_mutate_patterns", [])]
    marked = 0
    for pattern_path in config.get("only_mutate", []):
        path = stage / pattern_path
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        for i, line in enumerate(lines):
            if line.lstrip().startswith("def ") and any(p.search(line) for p in patterns):
                # the pragma goes on the line that ends the signature (the one ending with ':')
                j = i
                while not lines[j].rstrip().endswith(":"):
                    j += 1
                lines[j] = lines[j].rstrip("\n") + "  # pragma: no mutate block\n"
                marked += 1
        path.write_text("".join(lines), encoding="utf-8")
    print(f"staged {stage}: {marked} functions outside the mutation scope")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
