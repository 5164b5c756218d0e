"""Times as exports write them: Unix seconds (float), milliseconds,
ISO 8601 with or without an offset, and SillyTavern's humanized dates.
Pure."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

MILLISECONDS = 1e12
"""A number above this is milliseconds (1e12 seconds is the year 33658)."""

_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
    )
}
# "June 4, 2023 7:35pm" (SillyTavern's send_date)
_HUMAN = re.compile(
    r"(?P<month>[A-Za-z]{3})[a-z]*\.?\s+(?P<day>\d{1,2}),?\s+(?P<year>\d{4})"
    r"(?:\s+(?P<hour>\d{1,2}):(?P<minute>\d{2})(?::(?P<second>\d{2}))?\s*(?P<ampm>[ap]m)?)?",
    re.IGNORECASE,
)
# "2023-6-4 @19h 35m 12s 123ms" or "2024-05-12@15h30m05s" (SillyTavern's create_date)
_STAMP = re.compile(
    r"(?P<year>\d{4})-(?P<month>\d{1,2})-(?P<day>\d{1,2})\s*@\s*(?P<hour>\d{1,2})h\s*"
    r"(?P<minute>\d{1,2})m\s*(?:(?P<second>\d{1,2})s)?\s*(?:(?P<ms>\d{1,3})ms)?"
)


class BadTime(ValueError):
    """A time that is there but cannot be a date (e.g. the year 40000)."""


def parse(value: object) -> datetime | None:
    """The time ``value`` names, in UTC; None when there is none; BadTime
    when it is out of range. A time without an offset is taken as UTC."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            seconds = value / 1000 if abs(value) > MILLISECONDS else value
            return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=float(seconds))
        except (OverflowError, ValueError):
            raise BadTime(f"{value!r} is not a time memoro can store") from None
    if not isinstance(value, str):
        return None
    text = value.strip()
    if re.fullmatch(r"-?\d+(\.\d+)?", text):
        return parse(float(text))
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        human = _humanized(text)
        if human is None:
            raise BadTime(f"{value!r} is not a time memoro can read") from None
        at = human
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    try:
        return at.astimezone(UTC)
    except (OverflowError, ValueError):
        raise BadTime(f"{value!r} is not a time memoro can store") from None


def _humanized(text: str) -> datetime | None:
    try:
        if match := _STAMP.fullmatch(text):
            g = match.groupdict()
            return datetime(
                int(g["year"]),
                int(g["month"]),
                int(g["day"]),
                int(g["hour"]),
                int(g["minute"]),
                int(g["second"] or 0),
                int(g["ms"] or 0) * 1000,
            )
        if (match := _HUMAN.fullmatch(text)) and match["month"].lower()[:3] in _MONTHS:
            g = match.groupdict()
            hour = int(g["hour"] or 0)
            if g["ampm"]:
                hour = hour % 12 + (12 if g["ampm"].lower() == "pm" else 0)
            return datetime(
                int(g["year"]),
                _MONTHS[g["month"].lower()[:3]],
                int(g["day"]),
                hour,
                int(g["minute"] or 0),
                int(g["second"] or 0),
            )
    except ValueError:
        raise BadTime(f"{text!r} is not a date") from None
    return None
