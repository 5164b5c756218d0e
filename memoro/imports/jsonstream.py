"""JSON values out of a stream, one at a time, at a path such as ``item``
or ``conversations.item`` (ijson's prefixes). Built here from ijson's
tokens rather than with ``ijson.items``: its prefixes cost memory that
grows with the square of the nesting, and a 40 KB file of brackets took a
gigabyte. Here memory follows the value being built, nesting is capped,
and every error is one line."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

import ijson

from memoro.errors import InvalidInput

MAX_DEPTH = 10_000
"""Nesting allowed. LibreChat nests each reply inside the message it
answers, so a conversation of a few thousand messages is thousands of
levels deep; nothing else comes close."""

MAX_RUN = 64 * 2**20
"""Bytes in a row without a quote that ends a string: longer, it is one
string (or run of white space…) larger than any message or pasted image.
ijson's parser rescans a string for every chunk it arrives in, so one of
250 MB took minutes; refused here within a second or two."""
CHUNK = 8 * 2**20
"""Bytes handed to the parser at a time (the larger, the less rescanning:
one string of MAX_RUN took 12-29 s of CPU to refuse at 1 MB, 2.7 s at 8)."""

_STARTS = ("start_map", "start_array")
_ENDS = ("end_map", "end_array")


def items(stream: IO[bytes], prefix: str, where: str) -> Iterator[Any]:
    """Each value at ``prefix`` ("" is the top-level value itself)."""
    with _one_line_errors(where):
        yield from _values(_tokens(stream, where), prefix.split(".") if prefix else [], where)


def _values(events: Iterator[tuple[str, Any]], target: list[str], where: str) -> Iterator[Any]:
    path: list[str] = []  # where the next value sits: a key, or "item" in an array
    for event, value in events:
        if event == "map_key":
            path[-1] = value
        elif event in _ENDS:
            path.pop()
        elif path == target:
            yield _build(event, value, events, len(path), where)
        elif event in _STARTS:
            if len(path) >= MAX_DEPTH:
                raise _too_deep(where)
            path.append("item" if event == "start_array" else "")


def top_keys(stream: IO[bytes], where: str) -> Iterator[tuple[str, str, Any]]:
    """The top-level object's keys in order, each with its value's first
    event and, when that is not a container, the value; nested values are
    skipped."""
    with _one_line_errors(where):
        yield from _top_keys(_tokens(stream, where), where)


def _top_keys(events: Iterator[tuple[str, Any]], where: str) -> Iterator[tuple[str, str, Any]]:
    depth = 0
    key: str | None = None
    for event, value in events:
        if event in _STARTS:
            if depth == 1 and key is not None:
                yield key, event, None
            depth += 1
            if depth > MAX_DEPTH:
                raise _too_deep(where)
        elif event in _ENDS:
            depth -= 1
        elif event == "map_key" and depth == 1:
            key = value
            continue
        elif depth == 1 and key is not None:
            yield key, event, value
        key = None


def _build(
    event: str, value: Any, events: Iterator[tuple[str, Any]], depth: int, where: str
) -> Any:
    """The value that starts with ``event``, its containers filled from
    ``events`` without recursion (the hot loop of every import: plain
    comparisons, no lookups)."""
    if event != "start_map" and event != "start_array":
        return value
    root: Any = {} if event == "start_map" else []
    top = root
    key = ""
    parents: list[tuple[Any, str]] = []
    for event, value in events:
        if event == "map_key":
            key = value
        elif event == "end_map" or event == "end_array":
            if not parents:
                return root
            top, key = parents.pop()
        elif event == "start_map" or event == "start_array":
            child: Any = {} if event == "start_map" else []
            if top.__class__ is dict:
                top[key] = child
            else:
                top.append(child)
            if depth + len(parents) + 1 >= MAX_DEPTH:
                raise _too_deep(where)
            parents.append((top, key))
            top = child
        elif top.__class__ is dict:
            top[key] = value
        else:
            top.append(value)
    raise InvalidInput(f"{where} is not valid JSON: it ends too soon")


class _Bounded:
    """A stream refusing a run of MAX_RUN bytes in which every quote is
    escaped: a huge string, whatever it holds. Counted to the byte, at the
    speed of ``bytes.count`` for a chunk with no quote that ends a string."""

    def __init__(self, stream: IO[bytes], where: str) -> None:
        self.stream, self.where, self.run = stream, where, 0
        self.escaping = False  # the last chunk ended in a backslash

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size)
        escaped = data.count(b'\\"') + (self.escaping and data.startswith(b'"'))
        if data.count(b'"') > escaped:  # a quote ends a string here: the run stops at it
            self._grow(_unescaped(data, self.escaping, last=False))
            self.run = len(data) - _unescaped(data, self.escaping, last=True) - 1
        else:
            self._grow(len(data))
        self.escaping = data.endswith(b"\\") if data else self.escaping
        return data

    def _grow(self, size: int) -> None:
        self.run += size
        if self.run > MAX_RUN:
            raise InvalidInput(
                f"{self.where} holds a single value of more than {MAX_RUN // 2**20} MB:"
                " that is no chat export"
            )


def _unescaped(data: bytes, escaping: bool, *, last: bool) -> int:
    """Where the first (or last) quote of ``data`` that no backslash escapes
    is (one is there); ``escaping``: a backslash ends the chunk before."""
    at = data.rfind(b'"') if last else data.find(b'"')
    while True:
        before = at
        while before > 0 and data[before - 1] == 0x5C:  # the backslashes right before it
            before -= 1
        backslashes = at - before + (escaping and before == 0)
        if backslashes % 2 == 0:
            return at
        at = data.rfind(b'"', 0, at) if last else data.find(b'"', at + 1)


def _tokens(stream: IO[bytes], where: str) -> Iterator[tuple[str, Any]]:
    # ijson's own iterator, not a generator around it: a Python frame per
    # token would cost a third more time
    events: Iterator[tuple[str, Any]] = ijson.basic_parse(
        _Bounded(stream, where), use_float=True, buf_size=CHUNK
    )
    return events


@contextmanager
def _one_line_errors(where: str) -> Iterator[None]:
    try:
        yield
    except (ijson.JSONError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{where} is not valid JSON: {one_line(exc)}") from None


def one_line(exc: BaseException) -> str:
    """An error's first line (ijson's add the text and a caret below it)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def _too_deep(where: str) -> InvalidInput:
    return InvalidInput(
        f"{where} is nested deeper than {MAX_DEPTH:,} levels: that is no chat export"
    )
