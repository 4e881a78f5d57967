"""The tool-heavy conversation of issue 39, and a loop that runs it the way an agent would.

60 agent turns at a 4,000-token window: per turn a user message, the assistant's tool call, a tool
result of 266-785 tokens (uniform, seeded) and the assistant's reply. Ten facts (a code, an email,
an amount, a date, ...) are planted in ten user turns, one every five turns from turn 3. Two model
calls per turn, so the list is handed to ``manage`` before each: after the user message (the call
that asks for the tool) and after the tool result (the call that writes the reply).

Deterministic for a seed; the conversation is made without ctxlife code (only the token counter
sizes the tool results). Used by ``tests/strategies/test_compaction_pace.py`` (a scripted model)
and ``bench_real_model.py`` (a real one).
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

WINDOW = 4000
THRESHOLD = 0.4
RESULT_TOKENS = (266, 785)
FACTS = [
    "loyalty number FF-88213",
    "email mia.li@example.org",
    "refund of $412.75",
    "travel date 2024-07-19",
    "confirmation code ZK4Q7P",
    "ticket TCK-5521",
    "order ORD-73310",
    "voucher VCH-90417",
    "phone +1-415-555-0199",
    "invoice INV-2024-0815",
]
FACT_TURNS = [3 + 5 * i for i in range(len(FACTS))]
_WORDS = (
    "seat aisle window fare class economy baggage allowance checked carry-on meal vegetarian gate terminal "
    "boarding group priority connection layover refundable change fee policy segment cabin upgrade waitlist"
).split()


def _result(r: int, size: int, rng: random.Random, count: Callable[[str], int]) -> str:
    """A tool result of about ``size`` tokens: a reservation record with free-text notes."""
    record: dict[str, Any] = {"reservation_id": f"RS{r:03d}X", "flight": f"HAT{100 + r}", "status": "confirmed"}
    words: list[str] = []
    while True:
        record["notes"] = " ".join(words)
        text = json.dumps(record)
        if count(text) >= size:
            return text
        words += rng.sample(_WORDS, 8)


def conversation(turns: int = 60, *, seed: int = 39) -> list[list[dict[str, Any]]]:
    """``turns`` turns of four messages each (user, tool call, tool result, reply)."""
    from ctxlife.tokens import TokenCounter

    count = TokenCounter(None).count_text
    rng = random.Random(seed)
    out = []
    for r in range(turns):
        code = f"RS{r:03d}X"
        ask = f"Please check reservation {code} for user mia_li_{3600 + r}."
        if r in FACT_TURNS:
            ask += f" Please remember my {FACTS[FACT_TURNS.index(r)]}."
        call_id = f"call_{r}"
        arguments = json.dumps({"reservation_id": code})
        call = {
            "id": call_id,
            "type": "function",
            "function": {"name": "get_reservation_details", "arguments": arguments},
        }
        result = _result(r, rng.randint(*RESULT_TOKENS), rng, count)
        out.append(
            [
                {"role": "user", "content": ask},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": call_id, "content": result},
                {"role": "assistant", "content": f"Reservation {code} is confirmed on flight HAT{100 + r}."},
            ]
        )
    return out


def run(
    manage: Callable[[list[dict[str, Any]]], Any], turns: int = 60, *, pause: float = 0.0, seed: int = 39
) -> dict[str, Any]:
    """Run the conversation through ``manage`` (called in place before each model call; returns a
    :class:`ctxlife.host_report.Report`), sleeping ``pause`` seconds after each call (the agent's own model).

    Counts what the model would be sent (an independent token count of the list handed back), the
    seconds each call spent in ``manage`` (the caller's clock), compactions and which summarizer made
    them, and the planted facts still in the context at the end."""
    from ctxlife.tokens import TokenCounter

    counter = TokenCounter(None)
    line = THRESHOLD * WINDOW
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an airline agent. Follow the policy."}]
    sent: list[int] = []
    seconds: list[float] = []
    compactions: list[dict[str, Any]] = []
    for r, turn in enumerate(conversation(turns, seed=seed)):
        for before_call, after_call in ((turn[:1], []), (turn[1:3], turn[3:])):
            messages += before_call
            started = time.perf_counter()
            report = manage(messages)
            took = time.perf_counter() - started
            seconds.append(took)
            sent.append(counter.count_messages(messages))
            for action in report.actions:
                if action.what in {"compacted", "truncated"}:
                    details = action.details
                    compactions.append({"turn": r, "call": len(sent), "what": action.what, "seconds": round(took, 3),
                                        "summarizer": details.get("summarizer"), "reason": details.get("reason"),
                                        "extractive_messages": details.get("extractive_messages")})  # fmt: skip
            messages += after_call
            if pause:
                time.sleep(pause)
    context = json.dumps(messages, ensure_ascii=False)
    waited = [c["seconds"] for c in compactions]
    return {
        "calls": len(sent),
        "compactions": len(compactions),
        "calls_per_compaction": round(len(sent) / len(compactions), 2) if compactions else None,
        "model_summaries": sum(1 for c in compactions if str(c["summarizer"]).startswith(("model:", "agent_llm"))),
        "seconds_in_manage": round(sum(seconds), 2),
        "median_seconds_per_compaction": round(statistics.median(waited), 3) if waited else None,
        "max_call_seconds": round(max(seconds), 3),
        "calls_over_the_line": sum(1 for s in sent if s > line),
        "max_share_of_window": round(max(sent) / WINDOW, 3),
        "facts_surviving": sum(1 for fact in FACTS if fact.split()[-1] in context),
        "sent_tokens": sent,
        "compaction_log": compactions,
    }
