"""The long synthetic agent session the benchmarks (and some tests) measure on.

Deterministic for a seed; no ctxlife code is involved in making it.
"""

from __future__ import annotations

import json
import random
from typing import Any


def synthetic_session(calls: int = 300, *, seed: int = 7, result_rows: int = 12) -> list[dict[str, Any]]:
    """A long, valid agent session with realistic tool output and facts worth keeping.

    About ``calls`` model calls: a user turn every few steps, native tool calls whose JSON
    results carry order codes, amounts, dates, emails and file paths, and assistant replies
    that refer back to earlier facts. Deterministic for a given ``seed``.
    """
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an operations agent. Use the tools; answer precisely."}
    ]
    n_calls = 0
    turn = 0
    while n_calls < calls:
        customer = f"cust_{rng.randint(1000, 9999)}"
        order = f"ORD-{rng.randint(10000, 99999)}"
        messages.append(
            {
                "role": "user",
                "content": f"Turn {turn}: customer {customer} asks about order {order}; check stock and the invoice.",
            }
        )
        for step in range(rng.randint(1, 4)):
            if n_calls >= calls:
                break
            call_id = f"call_{turn}_{step}"
            name = rng.choice(["get_order", "search_inventory", "read_log", "get_invoice"])
            arguments = json.dumps({"order_id": order, "page": step})
            call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            n_calls += 1
            rows = [
                {
                    "sku": f"SKU-{rng.randint(100, 999)}",
                    "qty": rng.randint(1, 50),
                    "price": f"${rng.randint(5, 500)}.{rng.randint(0, 99):02d}",
                    "updated": f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                    "note": "warehouse "
                    + " ".join(rng.choice(["north", "south", "east", "west", "dock", "bay"]) for _ in range(6)),
                }
                for _ in range(rng.randint(result_rows // 2, result_rows))
            ]
            result = {
                "order_id": order,
                "customer": customer,
                "contact": f"{customer}@example.com",
                "invoice": f"/data/invoices/{order}.pdf",
                "rows": rows,
            }
            messages.append({"role": "tool", "tool_call_id": call_id, "content": json.dumps(result)})
        reply = f"Order {order} for {customer}: checked; invoice at /data/invoices/{order}.pdf."
        messages.append({"role": "assistant", "content": reply})
        n_calls += 1
        turn += 1
    return messages
