"""The one input policy, pure: what memoro does with the text, ids
and times that reach it through any front end, before anything is stored.
The service applies it; the HTTP schema states it (``ID_PATTERN``,
``TIME_PATTERN``); no front end has rules of its own.

- **Text** (a turn's question and answer, a search query, instructions, tool
  arguments) is kept as sent, except that lone surrogates (halves of a
  UTF-16 pair, which are not text and cannot be stored) and control
  characters other than tab, line feed and carriage return are removed. The
  block is normalized further by ``memoro.block``.
- **Ids** (user, conversation, import key) are taken exactly or refused:
  1–255 characters, not only whitespace, no control characters, no lone
  surrogates, and not ``.`` or ``..`` (which no URL can name).
- **Times** (when a turn ended) are ISO 8601 date-times (seconds optional),
  with an offset or read as UTC, dated 0001-01-03 to 9999-12-29 as written:
  whatever the offset, the moment is one every backend stores and reads back
  in any time zone (years 1–9999 in Python and in a PostgreSQL session's).
- **Search bounds** (``after``, ``before``) are such date-times or plain dates
  (``2025-01-31``: its first moment, UTC); ``after`` is inclusive, ``before``
  exclusive (a window whose ``after`` is not earlier than its ``before``
  holds nothing).
- **Numbers** (how many to list, a job's number) are whole numbers in a
  stated range, refused outside it: a listing (the audit log, conversations,
  the job queue) gives at most ``LIST_MAX`` entries at a time, and a job's
  number is one a database can hold (``ROW_ID_MAX``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import Any

from memoro.errors import InvalidInput

ID_MAX = 255
LIST_MAX = 1000
"""The most entries one listing gives at a time."""
ROW_ID_MAX = 2**63 - 1
"""The largest number a row (a job) can have on every backend."""
EPOCH_MAX = 2**53 - 1
"""The largest epoch: a JSON number exact everywhere (JavaScript's safe
integers). Epochs come from a clock that counts up from 1, far below it."""

# C0 controls except tab, LF and CR; DEL and the C1 controls; lone surrogates
_UNWANTED = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")

ID_PATTERN = r"^(?!\s*$)(?!\.\.?$)[^\x00-\x1f\x7f-\x9f]+$"
"""Ids as a JSON Schema pattern (lone surrogates are refused too, which a
pattern cannot say portably)."""

# Years 1–9999 in every time zone, with a day to spare for any offset
EARLIEST = date(1, 1, 3)
LATEST = date(9999, 12, 29)
_CLOCK = r"[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:\d{2})?"
_SHAPE = r"\d{4}-\d{2}-\d{2}" + _CLOCK
_TIME = re.compile(_SHAPE)
TIME_PATTERN = rf"^(?!0000-|0001-01-0[12]|9999-12-3[01]){_SHAPE}$"
"""Times as a JSON Schema pattern: the shape, and the range to the day."""
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
DAY_PATTERN = r"^(?!0000-|0001-01-0[12]|9999-12-3[01])\d{4}-\d{2}-\d{2}$"
"""A plain date as a JSON Schema pattern, the range to the day."""
BOUND_PATTERN = rf"^(?!0000-|0001-01-0[12]|9999-12-3[01])\d{{4}}-\d{{2}}-\d{{2}}({_CLOCK})?$"
"""Search bounds as one pattern: a date, or a date-time as for ``TIME_PATTERN``."""


def clean_text(text: str) -> str:
    """``text`` without lone surrogates and without control characters other
    than tab, line feed and carriage return."""
    return _UNWANTED.sub("", text)


def clean_json(value: Any) -> Any:
    """``clean_text`` applied to every string (keys too) of a JSON value."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, Mapping):
        return {clean_text(str(k)): clean_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_json(v) for v in value]
    return value


def clean_json_message(raw: str) -> str:
    """A JSON message whose strings are cleaned when it escapes a lone
    surrogate (strict JSON parsers refuse those, so the message would never
    reach the service); any other message is returned unchanged."""
    if not _ESCAPED_SURROGATE.search(raw):
        return raw
    try:
        parsed = json.loads(raw)
    except ValueError:
        return raw
    return json.dumps(clean_json(parsed), ensure_ascii=False)


def check_id(value: object, what: str, error: type[InvalidInput] = InvalidInput) -> str:
    """Return ``value`` if it can name a ``what`` (user, conversation…),
    else raise ``error`` saying why."""
    if not isinstance(value, str) or not value.strip():
        raise error(f"a {what} id must be a non-empty string")
    if len(value) > ID_MAX:
        raise error(f"a {what} id is at most {ID_MAX} characters")
    if _CONTROL.search(value):
        raise error(f"a {what} id cannot contain control characters")
    if _SURROGATE.search(value):
        raise error(f"a {what} id cannot contain a lone surrogate (it is not valid Unicode)")
    if value in (".", ".."):
        raise error(f"a {what} id cannot be '.' or '..'")
    return value


def whole(value: object, name: str, least: int, most: int) -> int:
    """Return ``value`` if it is a whole number from ``least`` to ``most``,
    else raise InvalidInput saying so (``name`` says what it is)."""
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise InvalidInput(f"{name} must be a whole number from {least} to {most}")
    return value


def check_epoch(value: object) -> int | None:
    """An epoch as ``user_epoch`` gives it (0 to ``EPOCH_MAX``), or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= EPOCH_MAX:
        raise InvalidInput(
            f"epoch must be a whole number from 0 to {EPOCH_MAX} that user_epoch gave"
        )
    return value


def list_limit(value: object) -> int:
    """How many entries a listing gives: 1 to ``LIST_MAX``."""
    return whole(value, "limit", 1, LIST_MAX)


def turn_time(value: object) -> datetime | None:
    """When a turn ended, in UTC: ``None`` (the caller means now), a
    datetime or an ISO 8601 string; naive times are read as UTC."""
    return _moment(value, "at", dates=False)


def search_bounds(after: object, before: object) -> tuple[datetime | None, datetime | None]:
    """A search's time window in UTC: from ``after`` (inclusive) to
    ``before`` (exclusive), each ``None`` (open), a datetime, a date or an
    ISO 8601 date or date-time string; a date is its first moment in UTC.
    One day is after=2025-01-30, before=2025-01-31."""
    return _moment(after, "after", dates=True), _moment(before, "before", dates=True)


def _moment(value: object, name: str, *, dates: bool) -> datetime | None:
    if value is None:
        return None
    if dates and isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, str):
        day = dates and bool(_DAY.fullmatch(value))
        if not (day or _TIME.fullmatch(value)):
            what = "date or date-time" if dates else "date-time"
            like = "2025-01-31 or 2025-01-31T14:05:00Z" if dates else "2025-01-31T14:05:00Z"
            raise InvalidInput(
                f"'{name}' is not an ISO 8601 {what}: {value[:40]!r} (write it like {like})"
            )
        if value.startswith("0000-"):
            raise _out_of_range(name, value[:10])
        text = value
        try:
            if day:
                value = datetime.combine(date.fromisoformat(text), datetime.min.time(), UTC)
            else:
                value = datetime.fromisoformat(text.upper().replace("Z", "+00:00"))
        except ValueError:
            what = "date" if day else "date-time"
            raise InvalidInput(f"'{name}' is not a valid {what}: {text[:40]!r}") from None
    if not isinstance(value, datetime):
        raise InvalidInput(f"'{name}' must be a date-time")
    if not EARLIEST <= value.date() <= LATEST:
        raise _out_of_range(name, value.date().isoformat())
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _out_of_range(name: str, day: str) -> InvalidInput:
    return InvalidInput(
        f"'{name}' must be dated from {EARLIEST.isoformat()} to {LATEST.isoformat()}, not {day}"
    )
