"""SillyTavern's chat files (``.jsonl``): a header line (who is talking),
then one message per line in order. A message's ``mes`` is the reply the
user kept; its other ``swipes`` are not. System and narrator lines are not
dialogue. Messages have no ids, so a turn's key is its line number: a newer
export of the same chat, with lines added at the end, adds only those."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from memoro.imports.dialogue import conversation_id, message, pair, time_or_none
from memoro.imports.model import ImportedConversation, Message, Tally
from memoro.imports.source import Source, json_members

PROVIDER = "sillytavern"


def read(source: Source, tally: Tally) -> Iterator[ImportedConversation]:
    for member in json_members(source, re.compile(r"\.jsonl$"), "chat .jsonl file"):
        tally.conversations += 1
        header: dict[str, Any] = {}
        messages: list[Message] = []
        speaker = ""
        for number, raw in source.lines(member):
            if not isinstance(raw, dict):
                tally.fail(f"{member}:{number}", "not a JSON object")
            elif number == 1 and "mes" not in raw:
                header = raw
            elif (found := _message(number, raw, tally)) is not None:
                messages.append(found)
                if found.role == "assistant" and not speaker:
                    speaker = str(raw.get("name") or "")
        # the id never comes from the file's name, which differs by how it
        # was uploaded: the character and the chat's creation date name it
        character = str(header.get("character_name") or speaker)
        created = header.get("create_date")
        native = f"{character}:{created}" if created else None
        try:
            id = conversation_id(PROVIDER, native, messages, character)
        except ValueError as exc:
            tally.fail(member, str(exc))
            continue
        turns = pair(messages, id, time_or_none(created), tally)
        yield ImportedConversation(id, character or None, turns)


def _message(number: int, raw: dict[str, Any], tally: Tally) -> Message | None:
    if raw.get("is_system"):
        tally.skipped["system messages"] += 1
        return None
    text = str(raw.get("mes") or "").strip()
    if not text:
        return None
    role = "user" if raw.get("is_user") else "assistant"
    return message(f"line{number}", role, text, raw.get("send_date"))
