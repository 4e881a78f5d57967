"""ctxlife's own inserted messages are never input to a later summary (issue 39).

Summaries end with a mark line ``<!-- ctxlife:summary CHECK -->``; recall blocks and the bootstrap
text carry theirs. Folding a previous summary into the next one quoted its mark line (up to five
per summary after a few compactions), and the fact ledger listed the 12-hex check as an id
(``Key facts: ids: 57f005db242e``), in English and Chinese, with the extractive summarizer and a
model. Here: many compactions with the bootstrap and recall on, in both languages, through both.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxlife.config import settings_from_dict
from ctxlife.host import Host
from ctxlife.messages import RECALL_PREFIX, inserted_text, is_summary

sys.path.insert(0, str(Path(__file__).parent))
from fake_openai import openai_server  # noqa: E402

MARK = re.compile(r"<!-- /?ctxlife:")
CHECK = re.compile(r"\b[0-9a-f]{12}\b")
BOOTSTRAP = "Always quote order numbers exactly."


def turn(lang: str, r: int) -> list[dict[str, Any]]:
    if lang == "en":
        ask = f"Check order ORD-{1000 + r} for c{r}@example.com, paid ${r}.50. " + "please " * 25
        if r == 3:
            ask = "By the way, my cat is called Mochi and she sleeps in the laundry basket. " + ask
        if r % 10 == 9:
            ask = "Earlier I told you about my cat: where does she sleep?"
        return [
            {"role": "user", "content": ask},
            {"role": "assistant", "content": f"Order ORD-{1000 + r} ships on 2026-12-{r % 28 + 1:02d}. " + "ok " * 25},
        ]
    ask = f"请查询订单 ORD-{1000 + r}，客户邮箱 c{r}@example.com，金额 {r}.50 元。" + "谢谢" * 30
    if r == 3:
        ask = "顺便说一下，我的猫叫麻糬，她睡在洗衣篮里。" + ask
    if r % 10 == 9:
        ask = "上次我说过我的猫麻糬，她睡在哪里？"
    return [
        {"role": "user", "content": ask},
        {"role": "assistant", "content": f"订单 ORD-{1000 + r} 将于 2026-12-{r % 28 + 1:02d} 发货。" + "好的" * 30},
    ]


def quoting_model(request: dict[str, Any]) -> tuple[int, str, None]:
    """A model that quotes its whole prompt back (the worst case for anything the prompt carries)."""
    prompt = "\n".join(str(m.get("content")) for m in request["messages"])
    return 200, prompt[-1200:], None


@pytest.mark.parametrize("route", ["extractive", "model"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_summary_quotes_a_mark_line_or_lists_a_check_as_a_fact(lang: str, route: str, tmp_path: Path) -> None:
    with openai_server(quoting_model) as server:
        summary: dict[str, Any] = {"min_gain_tokens": 20}
        model: dict[str, Any] = {}  # the [model] table (issue 43)
        if route == "model":
            model = {"name": "quoting", "base_url": server["base_url"]}
        else:
            summary["summarizer"] = "extractive"
        settings = settings_from_dict(
            {
                "strategies": ["bootstrap", "snapshot_restore", "llm_summary", "recall"],
                "store": f"file://{tmp_path / 'sessions'}",
                "bootstrap": {"text": BOOTSTRAP},
                "llm_summary": summary,
                "model": model,
            }
        )
        host = Host(settings, context_window=3000, session_id=f"marks-{lang}-{route}")
        messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent."}]
        compactions, recalled, summaries = 0, 0, []
        try:
            for r in range(60):
                messages += turn(lang, r)[:1]
                report = host.before_llm_call(messages)
                compactions += sum(a.what == "compacted" for a in report.actions)
                recalled += any(RECALL_PREFIX in str(m.get("content")) for m in messages)
                for message in messages:
                    if is_summary(message):
                        summaries.append(inserted_text(message["content"]))  # without its own mark line
                messages += turn(lang, r)[1:]
        finally:
            host.close()
        prompts = [json.dumps(r["messages"], ensure_ascii=False) for r in server["requests"]]
    assert compactions >= 4 and recalled and summaries
    if route == "model":
        assert len(prompts) >= compactions and not [p for p in prompts if MARK.search(p)]
        assert any("ORD-10" in s for s in summaries)  # the model's text is what was kept
    for text in summaries:
        assert not MARK.search(text), text
        assert not CHECK.search(text), text
        assert RECALL_PREFIX not in text and BOOTSTRAP not in text, text
