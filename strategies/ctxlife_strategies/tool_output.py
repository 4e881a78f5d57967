"""``tool_output``: cap what the model sees of a tool result; keep the full result recallable.

What it does, its options and why: docs/strategies/tool_output.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

import ctxlife
from ctxlife.messages import escape_surrogates, json_payload, safe_cut, tool_name_key
from ctxlife.strategy import ToolSpec
from ctxlife.tokens import TokenCounter

RECALL_TOOL = "ctxlife_recall"
MIN_CAP = 100
_REF_RE = re.compile(r"^to_[0-9a-f]{16}$")
_MIN_STR = 24  # shortest a cut string gets (head + tail characters)
_SNIPPET_CHARS = 240  # characters of context shown around a query match in a long line


class ToolOutput(ctxlife.Strategy):
    """Cap tool results at a token budget; offload the full result for ``ctxlife_recall``."""

    name = "tool_output"

    class Options(ctxlife.Options):
        max_tokens: int = Field(
            1000,
            ge=MIN_CAP,
            description=(
                "Most tokens the model sees of one tool result (the marker included). "
                "With max_share set, it is only used if given explicitly, as an upper bound."
            ),
        )
        max_share: float | None = Field(
            None,
            gt=0,
            le=0.5,
            description=(
                "Cap a result at this share of the model's context window instead "
                "(e.g. 0.05 = 5%); the smaller of this and max_tokens if both are set."
            ),
        )
        tools: dict[str, int] | list[str] = Field(
            default_factory=list,
            description=(
                "Which tools to cap. Empty: all. A list of tool names: only those, at max_tokens. "
                'A table tool = max_tokens: only those, each at its own cap; the key "*" caps every other tool.'
            ),
        )
        store_dir: str = Field(
            "workspace/tool_outputs",
            min_length=1,
            description=(
                "Directory for the full results when no session store is active (created "
                "owner-only; relative paths are relative to the working directory). With a "
                "session store, results are blobs of the session."
            ),
        )

        @field_validator("tools", mode="before")
        @classmethod
        def _check_tools(cls, value: Any) -> Any:
            if isinstance(value, dict):
                for key, cap in value.items():
                    if not isinstance(key, str) or not key.strip():
                        raise ValueError("tool names in the tools table must be non-empty strings")
                    if isinstance(cap, bool) or not isinstance(cap, int):
                        raise ValueError(f"the cap of tool {key!r} must be an integer number of tokens, got {cap!r}")
                    if cap < MIN_CAP:
                        raise ValueError(f"the cap of tool {key!r} must be at least {MIN_CAP} tokens, got {cap}")
                return value
            if isinstance(value, (list, tuple)):
                for item in value:
                    if not isinstance(item, str) or not item.strip():
                        raise ValueError(f"tools must list tool names as non-empty strings, got {item!r}")
                return list(value)
            raise ValueError(
                "tools must be a list of tool names or a table of tool name = max_tokens "
                f"(got a {type(value).__name__})"
            )

    options: Options

    def __init__(
        self, options: ToolOutput.Options | None = None, settings: ctxlife.SharedSettings | None = None
    ) -> None:
        super().__init__(options, settings)
        opts = self.options
        self.store_dir = Path(opts.store_dir).expanduser().resolve()
        self._explicit_max = "max_tokens" in opts.model_fields_set
        tools = opts.tools
        # Per-tool caps from a table ("*" = every other tool), or the set of tools a list names.
        self._table: dict[str, int] | None = None
        self._other_cap: int | None = None
        self._only: set[str] | None = None
        if isinstance(tools, dict) and tools:
            self._table = {tool_name_key(k): v for k, v in tools.items() if k != "*"}
            self._other_cap = tools.get("*")
        elif tools:
            self._only = {tool_name_key(k) for k in tools}
        self._counter: TokenCounter | None = None
        self._write_lock = threading.Lock()
        self._sessions: dict[str, tuple[Any, str]] = {}  # ref -> (store, session) it was saved in
        self._model = self.settings.agent_model

    # -- hooks ----------------------------------------------------------------------------

    @ctxlife.hookimpl
    def ctxlife_after_tool_call(self, ctx: ctxlife.ToolCallContext) -> None:
        result = ctx.result
        if not result or not isinstance(result, str):
            return
        name = tool_name_key(ctx.tool_name)
        if name == RECALL_TOOL:
            return  # pages of a recalled result already fit
        cap = self.cap_for(name, ctx.context_window)
        if cap is None:
            return
        self._counter = ctx.tokens
        count = ctx.tokens.count_text
        if len(result.encode("utf-8", "surrogatepass")) <= cap:  # a token is at least one byte: surely fits
            return
        before = count(result)
        if before <= cap:
            return
        # Lone surrogates (a non-UTF-8 file name from os.listdir, say) cannot be sent or stored
        # as UTF-8: the model sees them, and the offloaded copy holds them, escaped as \udXXX.
        result = escape_surrogates(result)
        ref, where = self.save(result, tool=ctx.tool_name, cap=cap, store=ctx.store, session_id=ctx.session_id)
        shortened, kind = shorten(result, cap, count, ref)
        ctx.result = shortened
        ctx.record(
            "capped",
            tool=ctx.tool_name,
            kind=kind,
            tokens_before=before,
            tokens_after=count(shortened),
            cap=cap,
            ref=ref,
            saved_in=where,
        )

    @ctxlife.hookimpl
    def ctxlife_before_tool_call(self, ctx: ctxlife.ToolCallContext) -> None:
        # Answer ctxlife_recall here, where the session (and its store) is known; the tool's
        # own function is the fallback for callers that do not dispatch this node.
        if tool_name_key(ctx.tool_name) != RECALL_TOOL:
            return
        if ctx.tokens is not None:
            self._counter = ctx.tokens
        args = ctx.tool_input if isinstance(ctx.tool_input, dict) else {}
        ctx.result = self.recall(
            str(args.get("ref", "")),
            args.get("start", ""),
            str(args.get("query", "") or ""),
            store=ctx.store,
            session_id=ctx.session_id,
            text_filter=lambda text: ctx.filter_text(text, "recall"),
        )
        ctx.record("recalled", query=bool(str(args.get("query", "") or "").strip()))

    # -- caps -----------------------------------------------------------------------------

    def cap_for(self, tool: str, context_window: int = 0) -> int | None:
        """The cap for a (normalized) tool name, or None if this tool is not capped."""
        opts = self.options
        if self._table is not None:
            return self._table.get(tool, self._other_cap)
        if self._only is not None and tool not in self._only:
            return None
        if opts.max_share is not None and context_window:
            share_cap = max(MIN_CAP, int(opts.max_share * context_window))
            return min(share_cap, opts.max_tokens) if self._explicit_max else share_cap
        return opts.max_tokens

    # -- the store ------------------------------------------------------------------------

    def save(
        self, text: str, *, tool: str, cap: int, store: Any = None, session_id: str | None = None
    ) -> tuple[str, str]:
        """Save ``text``; return its ref and where it went (``"session"`` or ``"workspace"``).

        With a session store and a session id the text is a blob of that session (it lives
        and dies with the session); otherwise a file under ``store_dir``, owner-only.
        Content-addressed: saving the same text twice is a no-op.
        """
        data = text.encode("utf-8")
        ref = "to_" + hashlib.sha256(data).hexdigest()[:16]
        meta = json.dumps({"tool": tool, "cap": cap, "chars": len(text)})
        if store is not None and session_id:
            try:
                if store.get_blob(session_id, f"{ref}.meta") is None:
                    store.put_blob(session_id, ref, text)
                    store.put_blob(session_id, f"{ref}.meta", meta)
            except Exception:  # noqa: BLE001 - a failing store must not leave the result uncapped
                pass  # fall through to the workspace
            else:
                with self._write_lock:
                    self._sessions[ref] = (store, session_id)
                return ref, "session"
        path = self.store_dir / f"{ref}.txt"
        with self._write_lock:
            if not self.store_dir.is_dir():
                self.store_dir.mkdir(parents=True, exist_ok=True)
                os.chmod(self.store_dir, 0o700)
            if not path.exists():
                _write_private(path, data)
            meta_path = self.store_dir / f"{ref}.json"
            if not meta_path.exists():
                _write_private(meta_path, meta.encode())
        return ref, "workspace"

    def load(self, ref: str, store: Any = None, session_id: str | None = None) -> tuple[str, dict[str, Any]] | None:
        """The stored text and its metadata, or None if there is no such ref.

        Looks in the session's store first (the given one, else the one the ref was saved
        in by this process), then in ``store_dir``.
        """
        if not _REF_RE.match(ref):
            return None
        places = []
        if store is not None and session_id:
            places.append((store, session_id))
        known = self._sessions.get(ref)
        if known is not None and known not in places:
            places.append(known)
        for where, session in places:
            try:
                text = where.get_blob(session, ref)
                meta_text = where.get_blob(session, f"{ref}.meta")
            except Exception:  # noqa: BLE001 - a failing store falls back to the workspace
                continue
            if text is not None:
                return text, _meta(meta_text)
        try:
            text = (self.store_dir / f"{ref}.txt").read_text(encoding="utf-8")
        except OSError:
            return None
        try:
            meta_text = (self.store_dir / f"{ref}.json").read_text(encoding="utf-8")
        except OSError:
            meta_text = None
        return text, _meta(meta_text)

    # -- the recall tool ------------------------------------------------------------------

    def provided_tools(self) -> list[ToolSpec]:
        return [
            ToolSpec(
                name=RECALL_TOOL,
                description=(
                    "Read a tool result that was shortened to save context. Shortened results end with "
                    "a [ctxlife: ...] note naming a ref. Give the ref; start is the character offset "
                    'to read from ("0" for the beginning, or the offset the note names); query, if not '
                    "empty, returns only the passages containing those words (case-insensitive). Long "
                    "texts come back one page at a time; each page says where the next one starts."
                ),
                function=self.recall,
                parameters={
                    "ref": "The ref named in the note, e.g. to_0123456789abcdef.",
                    "start": 'Character offset to read from, e.g. "0"; with a query, where to search from.',
                    "query": 'Words to search for; "" to read the text itself.',
                },
            )
        ]

    def recall(
        self,
        ref: str = "",
        start: str | int = "",
        query: str = "",
        *,
        store: Any = None,
        session_id: str | None = None,
        text_filter: Callable[[str], str] | None = None,
    ) -> str:
        """``ctxlife_recall``: a page of a stored result, or its passages matching ``query``.

        ``text_filter`` is the privacy filter (``ctxlife_filter_text``) the stored text goes
        through before it is paged or searched.
        """
        ref = str(ref or "").strip().strip("\"'")
        found = self.load(ref, store, session_id)
        if found is None:
            return (
                f"ctxlife_recall: no stored result with ref {ref!r}. Use the ref exactly as the "
                "[ctxlife: ...] note of the shortened result gives it (to_ followed by 16 hex digits)."
            )
        text, meta = found
        text = escape_surrogates(text)  # results stored before they were escaped
        if text_filter is not None:
            text = text_filter(text)
        try:
            offset = int(str(start).strip() or 0)
        except ValueError:
            return f'ctxlife_recall: start must be a character offset such as "0", got {start!r}.'
        offset = min(max(offset, 0), len(text))
        cap = meta.get("cap") if isinstance(meta.get("cap"), int) else None
        opts = self.options
        page_cap = max(MIN_CAP, cap or opts.max_tokens)
        count = self._count_fn()
        query = " ".join(str(query or "").split())
        if query:
            return _search_page(text, ref, query, offset, page_cap, count)
        return _read_page(text, ref, offset, page_cap, count)

    def _count_fn(self) -> Callable[[str], int]:
        if self._counter is None:
            self._counter = TokenCounter(self._model)
        return self._counter.count_text


# -- shortening -------------------------------------------------------------------------


def shorten(text: str, cap: int, count: Callable[[str], int], ref: str) -> tuple[str, str]:
    """Shorten ``text`` to at most ``cap`` tokens; returns ``(text, "json" | "text")``."""
    data = json_payload(text)
    if data is not None:
        found = _shorten_json(data, text, cap, count, ref)
        if found is not None:
            return found, "json"
    return _shorten_text(text, cap, count, ref), "text"


def _recall_hint(ref: str, start: int, query: str = "") -> str:
    return f'ctxlife_recall {{"ref": "{ref}", "start": "{start}", "query": "{query}"}}'


def _json_note(ref: str, before: int) -> str:
    return (
        f'\n[ctxlife: JSON shortened from {before} tokens: long arrays cut ("... N more items"), '
        f'long strings cut in the middle. Full result: {_recall_hint(ref, 0)}; put words in "query" to search it.]'
    )


def _text_marker(ref: str, elided_tokens: int, start: int, end: int, total: int) -> str:
    return (
        f"\n[... ctxlife: {elided_tokens} tokens elided here (characters {start}-{end} of {total}). "
        f'Read them with {_recall_hint(ref, start)}; put words in "query" to search instead ...]\n'
    )


def _limits(data: Any) -> tuple[dict[int, int], int, int]:
    """Longest array per nesting level, longest string, deepest nesting of a JSON value."""
    arrays: dict[int, int] = {}
    longest_string = depth = 0
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, level = stack.pop()
        if isinstance(value, dict):
            depth = max(depth, level)
            for key, item in value.items():
                longest_string = max(longest_string, len(key))
                stack.append((item, level + 1))
        elif isinstance(value, list):
            depth = max(depth, level)
            arrays[level] = max(arrays.get(level, 0), len(value))
            stack.extend((item, level + 1) for item in value)
        elif isinstance(value, str):
            longest_string = max(longest_string, len(value))
    return arrays, longest_string, depth


def _cut_string(value: str, max_chars: int) -> str:
    if len(value) <= max_chars:
        return value
    head = safe_cut(value, max_chars - max_chars // 3, reach=12)
    tail_start = safe_cut(value, len(value) - (max_chars - head), backward=False, reach=12)
    tail_start = max(tail_start, head)
    return f"{value[:head]}…[{tail_start - head} chars cut]…{value[tail_start:]}"


def _shrink(value: Any, items: Callable[[int], int], chars: int, depth: int | None, level: int = 1) -> Any:
    if isinstance(value, dict):
        if depth is not None and level > depth:
            return f"{{... {len(value)} keys}}"
        return {k: _shrink(v, items, chars, depth, level + 1) for k, v in value.items()}
    if isinstance(value, list):
        if depth is not None and level > depth:
            return f"[... {len(value)} items]"
        keep = items(level)
        kept = [_shrink(v, items, chars, depth, level + 1) for v in value[:keep]]
        if len(value) > keep:
            kept.append(f"... {len(value) - keep} more items")
        return kept
    if isinstance(value, str):
        return _cut_string(value, chars)
    return value


def _shorten_json(data: Any, text: str, cap: int, count: Callable[[str], int], ref: str) -> str | None:
    """The JSON with its keys, as many array items and string characters as fit; None if even the keys do not."""
    note = _json_note(ref, count(text))
    budget = cap - count(note)
    arrays, max_chars, max_depth = _limits(data)
    max_items = max(arrays.values(), default=1) or 1
    max_chars = max(max_chars, _MIN_STR)

    def render(
        items: int, chars: int, per_level: dict[int, int] | None = None, depth: int | None = None
    ) -> tuple[str, int]:
        levels = per_level or {}
        out = json.dumps(_shrink(data, lambda level: levels.get(level, items), chars, depth), ensure_ascii=False)
        return out, count(out)

    def at(scale: float) -> tuple[int, int]:
        return max(1, int(max_items**scale)), max(_MIN_STR, int(_MIN_STR * (max_chars / _MIN_STR) ** scale))

    best, size = render(1, _MIN_STR)
    if size > budget:
        # Even one item per array is too much: summarize the deeper levels.
        for depth in range(max_depth - 1, 0, -1):
            best, size = render(1, _MIN_STR, depth=depth)
            if size <= budget:
                return best + note
        return None
    # 1. One scale for every array and string: the largest that fits.
    lo, hi = 0.0, 1.0
    for _ in range(10):
        mid = (lo + hi) / 2
        candidate, size = render(*at(mid))
        if size <= budget:
            lo, best = mid, candidate
        else:
            hi = mid
    items, chars = at(lo)
    # 2. Use what is left: more items in the outer arrays first.
    per_level: dict[int, int] = {}
    for level in sorted(arrays)[:6]:
        low, high = items, arrays[level]
        while low < high:
            mid = (low + high + 1) // 2
            candidate, size = render(items, chars, {**per_level, level: mid})
            if size <= budget:
                low, best = mid, candidate
            else:
                high = mid - 1
        per_level[level] = low
    return best + note


def _shorten_text(text: str, cap: int, count: Callable[[str], int], ref: str) -> str:
    total_tokens = count(text)
    n = len(text)
    per_token = n / max(total_tokens, 1)
    sample = _text_marker(ref, total_tokens, n, n, n)
    budget = cap - count(sample) - 2
    head = int(budget * 0.6 * per_token)
    tail = int(budget * 0.4 * per_token)
    out = ""
    for _ in range(30):
        h, t = _snap(text, head, tail)
        shown = count(text[:h]) + count(text[n - t :]) if (h or t) else 0
        out = text[:h] + _text_marker(ref, max(total_tokens - shown, 0), h, n - t, n) + text[n - t :]
        size = count(out)
        if size <= cap:
            return out
        factor = min(0.97, cap / size * 0.97)
        head, tail = int(head * factor), int(tail * factor)
        if head + tail == 0:
            break
    marker = _text_marker(ref, total_tokens, 0, n, n)
    return marker.strip()


def _snap(text: str, head: int, tail: int) -> tuple[int, int]:
    """Move the cut points to line ends when a line break is close."""
    n = len(text)
    head, tail = max(head, 0), max(tail, 0)
    if head + tail >= n:
        head, tail = n // 2, n - n // 2 - 1
    cut = text.rfind("\n", int(head * 0.8), head)
    head = cut + 1 if cut > 0 else safe_cut(text, head)  # never inside a word or an emoji
    start = n - tail
    nl = text.find("\n", start, start + max(tail // 5, 1))
    if nl != -1 and nl + 1 < n:
        tail = n - (nl + 1)
    else:
        start = safe_cut(text, start, backward=False)
        tail = n - max(start, head)
    return head, tail


# -- recall pages -----------------------------------------------------------------------


def _fit_chars(text: str, start: int, budget: int, count: Callable[[str], int]) -> int:
    """The end of the longest slice ``text[start:end]`` within ``budget`` tokens (cut at a line end if close)."""
    n = len(text)
    if start >= n:
        return n
    # A token is at most ~20 characters in practice; start from an estimate and shrink.
    end = min(n, start + budget * 4)
    while end > start and count(text[start:end]) > budget:
        end = start + max(1, int((end - start) * 0.85))
    if end < n:
        while end < n:
            grow = min(n, end + max(16, (end - start) // 8))
            if count(text[start:grow]) > budget:
                break
            end = grow
        nl = text.rfind("\n", start + (end - start) * 4 // 5, end)
        if nl > start:
            end = nl + 1
        else:
            cut = safe_cut(text, end)
            end = cut if cut > start else end
    return end


def _read_page(text: str, ref: str, offset: int, cap: int, count: Callable[[str], int]) -> str:
    n = len(text)

    def footer(end: int) -> str:
        if end < n:
            return f"\n[ctxlife_recall: characters {offset}-{end} of {n}. Next page: {_recall_hint(ref, end)}]"
        return f"\n[ctxlife_recall: characters {offset}-{end} of {n}; end of the result.]"

    end = _fit_chars(text, offset, cap - count(footer(n - 1)), count)
    while end > offset and count(text[offset:end] + footer(end)) > cap:
        end = offset + (end - offset) * 9 // 10
    return text[offset:end] + footer(end)


def _search_page(text: str, ref: str, query: str, offset: int, cap: int, count: Callable[[str], int]) -> str:
    words = query.lower().split()
    lower = text.lower()
    hits: list[tuple[int, int, int]] = []  # (match position, snippet start, snippet end)
    pos = offset
    first = words[0]
    while True:
        at = lower.find(first, pos)
        if at == -1:
            break
        line_start = lower.rfind("\n", 0, at) + 1
        line_end = lower.find("\n", at)
        line_end = len(text) if line_end == -1 else line_end
        if line_end - line_start > _SNIPPET_CHARS:
            line_start = max(line_start, at - _SNIPPET_CHARS // 2)
            line_end = min(line_end, at + _SNIPPET_CHARS // 2)
        if all(w in lower[line_start:line_end] for w in words[1:]):
            hits.append((at, line_start, line_end))
        pos = max(line_end, at + 1)
    if not hits:
        return f'ctxlife_recall: no passage of {ref} from character {offset} on contains "{query}".'
    header = f'Passages of {ref} containing "{query}" (@ = character offset; read around one with "start"):'
    worst_footer = f"\n[ctxlife_recall: {len(hits)} more passages. Next: {_recall_hint(ref, len(text), query)}]"
    budget = cap - count(header) - count(worst_footer) - 2
    lines: list[str] = []
    used = 0
    for at, a, b in hits:
        line = f"@{at}: {text[a:b]}"
        size = count(line) + 1
        if used + size > budget:
            if not lines:  # a single snippet over the budget: cut it
                lines.append(_fit_head(line, budget, count))
            break
        lines.append(line)
        used += size
    shown = len(lines)
    if shown < len(hits):
        footer = (
            f"\n[ctxlife_recall: {len(hits) - shown} more passages. Next: {_recall_hint(ref, hits[shown][0], query)}]"
        )
    else:
        footer = f"\n[ctxlife_recall: {shown} passage(s); no more matches.]"
    return header + "\n" + "\n".join(lines) + footer


def _fit_head(text: str, budget: int, count: Callable[[str], int]) -> str:
    end = len(text)
    while end > 0 and count(text[:end]) > budget:
        end = end * 9 // 10
    return text[:end]


def _meta(text: str | None) -> dict[str, Any]:
    try:
        meta = json.loads(text) if text else {}
    except ValueError:
        meta = {}
    return meta if isinstance(meta, dict) else {}


def _write_private(path: Path, data: bytes) -> None:
    """Write a file readable by its owner only, atomically."""
    # mkstemp opens a fresh random name with O_EXCL (mode 0600): a symlink planted in the folder
    # can never redirect the write.
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
