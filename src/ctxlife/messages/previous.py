"""What is unchanged in a caller's list since the list a host handed back last time, in one comparison.

A caller sends its whole conversation on every call: the same list grown by new messages (an
agent loop), or a new list of new dicts decoded from JSON (a stateless web app). Classifying,
counting and diffing every message again is what made a call cost O(history). The host keeps a
:class:`PreviousList` per conversation: a frozen copy of the list it handed back. One comparison
of that copy with the caller's list, ``==`` over slices in C, tells which leading positions hold
a message equal, by value, to the one handed back there (:class:`Agreement`), with the few that
differ (a re-rendered system prompt, an edited question) found by bisection. Shape checks, token
counts and the recorder's diff then do per-message work only for the rest.

The copy is deep where a message holds a list or dict (tool calls, content parts), so an edit
made in place anywhere inside a message the caller kept is a difference, as it must be. (Values
of other types are JSON scalars in a list that passed the shape check, and are shared.)
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["Agreement", "PreviousList", "common_prefix", "differences"]

#: Positions that may differ inside the compared part before the comparison stops there (each one
#: found costs a bisection; more than a few is an edited list, handled message by message).
MAX_DIFFERENCES = 8


def common_prefix(a: Sequence[Any], b: Sequence[Any], same: Callable[[int], bool] | None = None) -> int:
    """How many leading items of ``a`` and ``b`` are equal (``==``), found with slice comparisons.

    ``same(i)`` may declare a differing pair at ``i`` equal after all (a prompt-cache marker
    moved, a system prompt changed): the scan then goes on after it.
    """
    n = min(len(a), len(b))
    lo = 0
    while lo < n:
        if a[lo:n] == b[lo:n]:
            return n
        low = _first_difference(a, b, lo, n)
        if same is None or not same(low):
            return low
        lo = low + 1
    return n


def differences(a: Sequence[Any], b: Sequence[Any], limit: int = MAX_DIFFERENCES) -> tuple[int, list[int]]:
    """``(length, changed)``: the first ``length`` positions of ``a`` and ``b`` were compared and
    those in ``changed`` (ascending) differ; the rest of them are equal (``==``).

    ``length`` is the shorter list's length, or the position of the ``limit + 1``-th difference
    (the comparison stops there). Costs one pass in C plus a bisection per difference.
    """
    n = min(len(a), len(b))
    changed: list[int] = []
    lo = 0
    while lo < n:
        if a[lo:n] == b[lo:n]:
            break
        low = _first_difference(a, b, lo, n)
        if len(changed) == limit:
            return low, changed
        changed.append(low)
        lo = low + 1
    return n, changed


def _first_difference(a: Sequence[Any], b: Sequence[Any], lo: int, n: int) -> int:
    """The first position in ``[lo, n)`` where ``a`` and ``b`` differ (one is known to)."""
    low, high = lo, n  # the first difference is in [low, high)
    while high - low > 1:
        mid = (low + high) // 2
        if a[low:mid] == b[low:mid]:
            low = mid
        else:
            high = mid
    return low


class _Never:
    """Stands for a list item that is not a message dict: equal to nothing, so it is always looked at."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = None  # type: ignore[assignment]


_NEVER = _Never()


def frozen_copy(message: Any) -> Any:
    """A copy of ``message`` that later edits of the caller's objects cannot reach: deep through
    its lists and dicts (tool calls, content parts), sharing the immutable values (strings)."""
    if type(message) is not dict:
        return _NEVER
    for value in message.values():
        kind = type(value)
        if kind is list or kind is dict:
            return _deep_copy(message)
    return dict(message)


def _deep_copy(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        return {k: _deep_copy(v) for k, v in value.items()}
    if kind is list:
        return [_deep_copy(v) for v in value]
    return value


@dataclasses.dataclass(frozen=True)
class Agreement:
    """How a caller's list compares with the list handed back last time.

    Attributes:
        length: how many leading positions were compared (at most the shorter list's length).
        changed: the positions below ``length`` whose messages differ, ascending.
        previous: the objects of the list handed back last time (empty on a conversation's first call).
    """

    length: int
    changed: tuple[int, ...]
    previous: Sequence[Any]

    def same(self, i: int) -> bool:
        """Whether position ``i`` holds the message handed back there, by value."""
        return i < self.length and i not in self.changed

    def continues(self) -> bool:
        """Whether the list is the one handed back, unchanged, with (maybe) messages appended."""
        return not self.changed and self.length == len(self.previous)

    def unknown(self, size: int) -> list[int]:
        """The positions of a list of ``size`` messages that need looking at: changed or new."""
        return [*self.changed, *range(self.length, size)]


NOTHING = Agreement(0, (), ())


class PreviousList:
    """The list a host handed back at the end of its last call of one conversation, frozen.

    :meth:`compare` a caller's next list with it; :meth:`remember` the list handed back at the
    end of a call. Per position it also keeps what consumers computed for the message there
    (its token count, with the counter that counted it), reused wherever the message is the same.
    """

    __slots__ = ("_asked", "_checked", "_copies", "_counted_by", "_objects", "counts", "shape")

    def __init__(self) -> None:
        self._copies: list[Any] = []
        self._objects: list[Any] = []
        self.counts: list[int] = []
        self._counted_by: object = None
        self._asked: tuple[Any, int, Agreement] | None = None
        self._checked: tuple[Any, int, Any] | None = None
        #: What the shape check of the list handed back found (``(format, index)``, see
        #: :func:`~ctxlife.messages.check_shape`), or None when it is not known.
        self.shape: Any = None

    def checked(self, messages: Sequence[Any], shape: Any) -> None:
        """Note what the shape check of ``messages`` (this call's list, as received) found."""
        self._checked = (messages, len(messages), shape)

    def compare(self, messages: Sequence[Any], *, keep: bool = False) -> Agreement:
        """Which leading positions of ``messages`` hold, by value, the message handed back there.

        ``keep=True``: the answer is kept for the next :meth:`compare` of the same list object of
        the same length, once (the shape check, then the call it precedes); :meth:`drop` it when
        that call does not happen.
        """
        asked, self._asked = self._asked, None
        if asked is not None and asked[0] is messages and asked[1] == len(messages):
            return asked[2]
        if not self._copies:
            found = NOTHING
        else:
            length, changed = differences(self._copies, messages)
            found = Agreement(length, tuple(changed), self._objects)
        if keep:
            self._asked = (messages, len(messages), found)
        return found

    def drop(self) -> None:
        """Forget the answer :meth:`compare` kept (the call it was for failed)."""
        self._asked = None

    def counts_of(self, counter: object) -> list[int] | None:
        """The token count of each position of the list handed back, when ``counter`` counted them."""
        return self.counts if self._counted_by is counter and len(self.counts) == len(self._copies) else None

    def remember(
        self,
        messages: Sequence[Any],
        incoming: Sequence[Any],
        agreement: Agreement,
        counts: list[int] | None = None,
        counter: object = None,
        *,
        frozen: bool = False,
    ) -> None:
        """Keep ``messages``, the list handed back, for the next :meth:`compare`.

        ``incoming`` is the list as the call received it and ``agreement`` how it compared with
        the list remembered before: positions where the list handed back still holds an incoming
        message the list remembered before keep their frozen copy; only the rest are copied.
        ``counts`` are the token counts of ``messages``' positions, by ``counter``. ``frozen``:
        ``incoming`` is a list nobody edits (the host's copy); when ``messages`` holds its very
        objects, it is kept as they are instead of another copy of the list.
        """
        length, edited = differences(incoming, messages)  # what the call itself changed
        upto = min(length, agreement.length)
        copies = self._copies[:upto]
        for i in {*agreement.changed, *edited}:
            if i < upto:
                copies[i] = frozen_copy(messages[i])
        copies.extend(map(frozen_copy, messages[upto:]))
        self._copies = copies
        # The host's copy is the one a recorder keeps too (Recorder.expect): one list, not two per call.
        kept = incoming if frozen and isinstance(incoming, list) and len(incoming) == len(messages) else None
        self._objects = kept if kept is not None and all(map(operator.is_, kept, messages)) else list(messages)
        self.counts = counts if counts is not None else []
        self._counted_by = counter if counts is not None else None
        # The shape found for the list received holds for the list handed back when the call only
        # edited a few messages in place (bootstrap text, a trimmed tool result: same kind of message).
        checked = self._checked
        self.shape = None
        if checked is not None and checked[0] is messages and checked[1] == len(incoming):
            self.shape = checked[2] if len(messages) == len(incoming) == length else None
        self._asked = self._checked = None
