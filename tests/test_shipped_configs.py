"""The shipped configs are true to the code: example.toml explains every setting, xiaopaw.toml's recall works."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from ctxlife.config import Settings, settings_from_dict
from ctxlife.strategy import ModelSettings

EXAMPLE = Path(__file__).resolve().parents[1] / "configs" / "example.toml"
#: Top-level settings that are tables ([model], issue 43): shown as a commented table of their own.
TABLES = {"model"}


def _commented_table(text: str, table: str) -> dict[str, object]:
    """The keys of the commented-out ``# [table]`` block, uncommented and parsed."""
    block = text.split(f"\n# [{table}]\n", 1)[1]
    lines = []
    for line in block.splitlines():
        if not line.startswith("#"):
            break
        lines.append(re.sub(r"^# ?", "", line))
    return tomllib.loads("\n".join(line for line in lines if re.match(r"[a-z_]+ = ", line)))


def _top_level_keys(text: str) -> dict[str, str]:
    """Every top-level key the file sets or shows commented out (``# key = value``), with the
    comment block right above it."""
    keys: dict[str, str] = {}
    comment: list[str] = []
    for line in text.splitlines():
        if line.startswith("["):
            break  # strategy tables from here on
        found = re.match(r"#?\s?([a-z_]+) = ", line)
        if found:
            keys[found.group(1)] = "\n".join(comment)
            comment = []
        elif line.startswith("#"):
            comment.append(line)
        elif not line.strip():
            comment = [] if not keys or comment else comment
    return keys


def test_example_config_explains_every_setting():
    text = EXAMPLE.read_text(encoding="utf-8")
    keys = _top_level_keys(text)
    settings = set(Settings.model_fields) - TABLES
    assert set(keys) == settings, (
        f"missing from configs/example.toml: {sorted(settings - set(keys))}; "
        f"not settings: {sorted(set(keys) - settings)}"
    )
    for table in TABLES:
        explained = text.split(f"\n# [{table}]\n", 1)[0].rsplit("\n\n", 1)[-1]
        assert len(explained.strip("# \n")) >= 20, f"[{table}] has no explanation above it"
        assert _commented_table(text, table), f"[{table}] shows none of its keys"
    unexplained = [key for key, comment in keys.items() if len(comment.strip("# \n")) < 20]
    assert not unexplained, f"keys without an explanation above them: {unexplained}"


def test_example_config_commented_values_are_valid():
    """Uncommenting any shown key gives a valid config."""
    text = EXAMPLE.read_text(encoding="utf-8")
    head = text.split("\n[", 1)[0]
    uncommented = re.sub(r"^# ?([a-z_]+ = )", r"\1", head, flags=re.M)
    data = tomllib.loads(uncommented)
    assert set(data) == set(Settings.model_fields) - TABLES
    model = _commented_table(text, "model")
    assert set(model) <= set(ModelSettings.model_fields)
    settings_from_dict({**data, "model": model}, source=str(EXAMPLE))


def test_xiaopaw_recalls_what_the_pruning_evicted(tmp_path):
    """configs/xiaopaw.toml's recall works as configured: the conversation is recorded (snapshot_restore,
    store), so a question about a turn truncate_last_n evicted gets the passage back."""
    from ctxlife.config import read_toml
    from ctxlife.host import Host
    from ctxlife.messages import is_recall_block

    path = EXAMPLE.parent / "xiaopaw.toml"
    data = read_toml(path)
    assert {"snapshot_restore", "recall"} <= set(data["strategies"]) and data.get("store")
    data["store"] = f"file://{tmp_path / 'sessions'}"
    host = Host(settings_from_dict(data, source=str(path)), context_window=4000, session_id="u42")
    messages = [
        {"role": "system", "content": "You are XiaoPaw."},
        {"role": "user", "content": "Hello, I am starting my week."},
        {"role": "assistant", "content": "Hi!"},
        {"role": "user", "content": "The invoice code for the Hangzhou trip is INV-77231, remember it."},
        {"role": "assistant", "content": "Noted: INV-77231."},
    ]
    for i in range(12):
        messages.append(
            {"role": "user", "content": f"Turn {i}: summarize weekly report section {i} " + "filler words " * 30}
        )
        host.manage(messages)
        messages.append({"role": "assistant", "content": f"Section {i} summarized. " + "more words " * 20})
    kept = [m for m in messages if not is_recall_block(m)]
    assert not any("INV-77231" in str(m.get("content")) for m in kept), "the fact was never evicted"
    messages.append({"role": "user", "content": "What was the invoice code for the Hangzhou trip?"})
    report = host.manage(messages)
    assert ("recall", "recalled") in [(a.strategy, a.what) for a in report.actions]
    assert any(is_recall_block(m) and "INV-77231" in m["content"] for m in messages)
    host.close()
