"""Durations as people write them: ``30d``, ``12h``, ``90m``, ``45s``, ``2w`` or plain seconds.

Used by the stores' ``?ttl=`` URL option and by ``ctxlife session rm --older-than``.
"""

from __future__ import annotations

import math
import re

__all__ = ["UNITS", "format_duration", "parse_duration"]

#: Seconds per unit suffix (no suffix: seconds).
UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}

_DURATION = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([smhdw]?)\s*", re.IGNORECASE)


def parse_duration(text: str) -> float:
    """The number of seconds ``text`` names: ``"30d"``, ``"1.5h"``, ``"90m"``, ``"45s"``, ``"2w"``, ``"3600"``.

    Raises ``ValueError`` (naming the text and the accepted forms) for anything else, zero, or a
    number too large to be a time.
    """
    found = _DURATION.fullmatch(text) if isinstance(text, str) else None
    if found is None:
        raise ValueError(
            f"{text!r} is not a duration; write a number of seconds or a number with a unit: "
            f"s (seconds), m (minutes), h (hours), d (days), w (weeks), e.g. '30d' or '12h'"
        )
    seconds = float(found.group(1)) * UNITS[(found.group(2) or "s").lower()]
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(f"duration {text!r} must be more than 0 seconds")
    return seconds


def format_duration(seconds: float) -> str:
    """A short human form of ``seconds`` in its largest whole unit (``2592000`` -> ``"30d"``)."""
    for unit in ("w", "d", "h", "m"):
        size = UNITS[unit]
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
