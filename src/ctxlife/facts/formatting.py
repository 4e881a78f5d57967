"""Render facts as one compact ``Key facts: ...`` block that fits a token budget."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ctxlife.facts.fact import Fact

#: How a rendered fact block starts.
FACT_LIST_HEADER = "Key facts:"

#: Priority of kinds in :func:`format_fact_list`, highest first. When the block
#: does not fit, facts are dropped from the *lowest*-priority kind first, and
#: within a kind the most recently found fact first (last in, first out).
#: Identifiers and codes come first because an agent cannot re-derive them and
#: passes them verbatim to tools; paths, URLs and emails are exact strings of the
#: same sort; then the names of people the conversation states; amounts and dates
#: are next; times and bare numbers are most often recoverable or incidental.
KIND_PRIORITY: tuple[str, ...] = (
    "id",
    "code",
    "path",
    "url",
    "email",
    "name",
    "amount",
    "date",
    "time",
    "number",
)

#: The label of each kind's group in a rendered block (``ids: a, b; codes: C1``).
KIND_LABELS: dict[str, str] = {
    "id": "ids",
    "code": "codes",
    "number": "numbers",
    "amount": "amounts",
    "date": "dates",
    "time": "times",
    "email": "emails",
    "url": "urls",
    "path": "paths",
    "name": "names",
}


def _render(groups: list[tuple[str, list[Fact]]]) -> str:
    parts = [f"{KIND_LABELS[kind]}: {', '.join(f.text for f in items)}" for kind, items in groups if items]
    if not parts:
        return ""
    return FACT_LIST_HEADER + " " + "; ".join(parts)


def format_fact_list(
    facts: Iterable[Fact],
    max_tokens: int,
    count_tokens: Callable[[str], int],
) -> str:
    """Render facts as one compact block that fits ``max_tokens``.

    Example: ``Key facts: ids: ana_ruiz_2041; codes: QX4TR8, BX4471; amounts: $1,234``.

    Facts are grouped by kind in :data:`KIND_PRIORITY` order (ids, codes, paths,
    urls, emails, names, amounts, dates, times, numbers), each group in order of first
    appearance, duplicates removed. If the block is over budget, facts are
    dropped from the lowest-priority kind first, the last-added fact of that kind
    first, until it fits (checked with ``count_tokens``). Returns ``""`` when no
    fact fits or there is none.
    """
    seen: set[tuple[str, str]] = set()
    by_kind: dict[str, list[Fact]] = {k: [] for k in KIND_PRIORITY}
    for f in facts:
        if f.key in seen or f.kind not in by_kind:
            continue
        seen.add(f.key)
        by_kind[f.kind].append(f)
    order = [f for k in KIND_PRIORITY for f in by_kind[k]]  # keep order: drop from the end
    if not order or max_tokens <= 0:
        return ""

    def render(n: int) -> str:
        groups: dict[str, list[Fact]] = {k: [] for k in KIND_PRIORITY}
        for f in order[:n]:
            groups[f.kind].append(f)
        return _render([(k, groups[k]) for k in KIND_PRIORITY])

    full = render(len(order))
    if count_tokens(full) <= max_tokens:
        return full
    # binary search the largest prefix (in drop order) that fits, then verify
    lo, hi = 0, len(order) - 1  # render(lo) fits (empty), render(hi+1) does not
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_tokens(render(mid)) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    n = lo
    while n > 0 and count_tokens(render(n)) > max_tokens:
        n -= 1
    return render(n) if n > 0 else ""
