"""Fixtures shared by the first-party strategy tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # strategy_helpers


@pytest.fixture
def counter():
    """The token counter the host uses for the scripted LLM (its model name is unknown to tiktoken)."""
    from ctxlife.tokens import TokenCounter

    return TokenCounter("scripted-offline")


@pytest.fixture
def doc_examples():
    """The TOML examples of a strategy's page in docs/strategies/, parsed."""
    import re
    import tomllib
    from pathlib import Path

    def examples(name: str) -> list[dict]:
        page = Path(__file__).resolve().parents[2] / "docs" / "strategies" / f"{name}.md"
        blocks = re.findall(r"```toml\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)
        assert blocks, f"{page} has no TOML example"
        return [tomllib.loads(block) for block in blocks]

    return examples
