"""Bringing history in: the chat exports users already have, read into
conversations of turns. One module per format; ``read`` picks it (or
``detect`` tells it from the file). Nothing here stores anything: the
service does (``Memoro.import_file``).

| format      | what users download                            | module          |
|-------------|------------------------------------------------|-----------------|
| chatgpt     | ChatGPT data export (zip, conversations*.json) | chatgpt.py      |
| claude      | Claude.ai data export (zip, conversations.json) | claude.py      |
| openwebui   | Open WebUI chat export (JSON)                  | openwebui.py    |
| librechat   | LibreChat conversation export (JSON)           | librechat.py    |
| sillytavern | SillyTavern chat files (.jsonl)                | sillytavern.py  |
| claude-code | Claude Code session logs (.jsonl)              | claude_code.py  |
| codex       | Codex CLI session logs (rollout-*.jsonl)       | codex.py        |
| jsonl       | memoro's JSON Lines of turns                   | memoro_format.py |
| memoro      | memoro's own export (takeout)                  | memoro_format.py |
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

from memoro.errors import InvalidInput
from memoro.imports import (
    chatgpt,
    claude,
    claude_code,
    codex,
    jsonstream,
    librechat,
    memoro_format,
    openwebui,
    sessions,
    sillytavern,
)
from memoro.imports.model import ImportedConversation, ImportedTurn, Tally
from memoro.imports.source import Source

Reader = Callable[[Source, Tally], Iterator[ImportedConversation]]

READERS: dict[str, Reader] = {
    "chatgpt": chatgpt.read,
    "claude": claude.read,
    "openwebui": openwebui.read,
    "librechat": librechat.read,
    "sillytavern": sillytavern.read,
    "claude-code": claude_code.read,
    "codex": codex.read,
    "jsonl": memoro_format.read_lines,
    "memoro": memoro_format.read_export,
}
FORMATS = ("auto", *READERS)
SESSION_LOGS = ("claude-code", "codex")
"""Formats a folder of logs is read in (``memoro import DIR``, ``memoro watch``)."""
_LOGS: dict[str, Callable[[str], sessions.SessionLog]] = {
    "claude-code": claude_code.ClaudeCodeLog,
    "codex": codex.CodexLog,
}

# a key of a conversation (or of the file's top-level object) that names its format
_TELLING = {
    "mapping": "chatgpt",
    "current_node": "chatgpt",
    "conversation_id": "chatgpt",
    "chat_messages": "claude",
    "chat": "openwebui",
    "messagesTree": "librechat",
    "conversationId": "librechat",
    "character_name": "sillytavern",
    "user_name": "sillytavern",
    "chat_metadata": "sillytavern",
    "mes": "sillytavern",
    "question": "jsonl",
}


DETECT_ITEMS = 8
"""Conversations looked at to tell the format (the first may lack the
field that tells it, e.g. a ChatGPT conversation without a ``mapping``)."""


def read(source: Source, format: str, tally: Tally) -> Iterator[ImportedConversation]:
    """The conversations of ``source`` in ``format`` ("auto": detect it).
    A format other than the one the file plainly is, is refused. A zip of
    session logs is read as a folder of them is, each log in its own host's
    format ("auto"), or only the logs of the host asked for."""
    asked = format
    if format == "auto":
        format = detect(source)
        if format in SESSION_LOGS and source.is_zip:
            return sessions.read_logs(source, tally, _LOGS, "session log")
    reader = READERS.get(format)
    if reader is None:
        raise InvalidInput(f"format must be one of {', '.join(FORMATS)}, not {format!r}")
    if format != "memoro" and asked != "auto":  # memoro's reader checks the file's own tag
        _check_shape(source, format)
    conversations = reader(source, tally)
    if format in ("jsonl", *SESSION_LOGS):  # a resumed session copies turns: keys keep them once
        return conversations
    return unique(conversations, tally)


def unique(
    conversations: Iterator[ImportedConversation], tally: Tally
) -> Iterator[ImportedConversation]:
    """The conversations, a second one with an id already read failed
    rather than merged into the first."""
    seen: set[str] = set()
    for conversation in conversations:
        if conversation.id in seen:
            tally.fail(conversation.id, "a second conversation with this id in the file")
            continue
        seen.add(conversation.id)
        yield conversation


def _check_shape(source: Source, format: str) -> None:
    try:
        likely = detect(source)
    except InvalidInput:
        return  # the reader says what is wrong, or reads what it can
    if likely != format and not (source.is_zip and {likely, format} <= set(SESSION_LOGS)):
        # a zip of logs may hold both hosts': its logs are told one by one
        raise InvalidInput(
            f"{source.name or 'the file'} looks like a {likely} export, not {format}:"
            f" import it as {likely} (or auto)"
        )


def detect(source: Source) -> str:
    """Which export ``source`` is, from its members and first records."""
    names = source.members
    if not names:
        raise InvalidInput(f"{source.name or 'the zip'} holds no JSON or JSON Lines file")
    member = names[0]
    if source.is_zip:
        lines = [n for n in names if n.endswith(".jsonl")]
        jsons = sorted(n for n in names if n.endswith(".json"))
        preferred = [n for n in jsons if n.rsplit("/", 1)[-1].startswith("conversations")]
        if not (preferred or jsons or lines):
            raise InvalidInput(f"{source.name or 'the zip'} holds no JSON or JSON Lines file")
        member = (preferred or jsons or lines)[0]
    first = source.first_byte(member)
    keys: list[str] = []
    if first == b"[":
        for _, item in zip(range(DETECT_ITEMS), source.items(member), strict=False):
            keys += list(item) if isinstance(item, dict) else []
            if any(key in _TELLING for key in keys):
                break
    elif first == b"{":
        sniffed = sessions.detect(source, member)
        if sniffed.host is not None:
            return sniffed.host
        line = _first_line(source, member)
        if line is not None:
            keys = list(line)
        else:
            try:
                keys, tag = _top_keys(source, member)
            except InvalidInput:
                if (why := sniffed.untold()) is None:
                    raise
                raise InvalidInput(
                    f"cannot tell which export {member} is: {why}; pass the format"
                    f" ({', '.join(f for f in FORMATS if f != 'auto')})"
                ) from None
            if tag == memoro_format.FORMAT:
                return "memoro"
    for key in keys:
        if key in _TELLING:
            return _TELLING[key]
    raise InvalidInput(
        f"cannot tell which export {member} is; pass the format"
        f" ({', '.join(f for f in FORMATS if f != 'auto')})"
    )


def _first_line(source: Source, member: str) -> dict[str, object] | None:
    """The first line as a JSON object, when the member is JSON Lines."""
    with source.stream(member) as stream:
        raw = stream.readline(1 << 20)
    try:
        value = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None  # e.g. "{" alone: pretty-printed JSON; or JSON on one line, nested deep
    if not isinstance(value, dict) or not any(
        _TELLING.get(k) in ("jsonl", "sillytavern") for k in value
    ):
        return None
    return value


def _top_keys(source: Source, member: str) -> tuple[list[str], object]:
    """The top-level object's keys up to the first that names a format, and
    its "format" value; the rest of the file is not read."""
    keys: list[str] = []
    with source.stream(member) as stream:
        for key, _, value in jsonstream.top_keys(stream, member):
            if key == "format" and isinstance(value, str):
                return keys, value
            keys.append(key)
            if key in _TELLING:
                break
    return keys, None


__all__ = [
    "FORMATS",
    "SESSION_LOGS",
    "ImportedConversation",
    "ImportedTurn",
    "Source",
    "Tally",
    "detect",
    "read",
]
