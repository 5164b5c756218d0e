"""Claude Code's session logs: ``~/.claude/projects/<project>/<session>.jsonl``,
one JSON line per entry, appended as the session goes (docs/imports.md has
each line type and its source).

Entries form a tree through ``parentUuid`` (a compaction's boundary through
``logicalParentUuid``): rewinding to an earlier message forks it, and the
abandoned branch stays in the file. Each entry belongs to the turn of the
nearest prompt above it, so a reply written over many entries and around
tool calls is one answer, whatever forks the recording makes inside a turn;
the branch the user saw runs from the last prompt in the file up through
the prompts before it. Sub-agent traffic (``isSidechain``), meta entries,
compaction summaries, command output, reminders, thinking and tool traffic
are not dialogue. A turn's key is its prompt's ``uuid``. An entry on a line
too long to read is still a link of the tree (its ids are read as the line
goes by): a prompt there loses its turn only, a tool result nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from memoro.imports.logfiles import Skim
from memoro.imports.model import ImportedConversation, Tally
from memoro.imports.sessions import (
    AI_TITLE,
    CUSTOM_TITLE,
    SUMMARY_TITLE,
    SessionLog,
    read_logs,
)
from memoro.imports.source import Source

PROVIDER = "claude-code"

_REASONING = frozenset({"thinking", "redacted_thinking"})
_CALLS = frozenset({"tool_use", "mcp_tool_use"})
_TOOL_TRAFFIC = frozenset(
    {
        "server_tool_use",
        "tool_result",
        "mcp_tool_result",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
    }
)
_BOOKKEEPING = frozenset(
    {
        "file-history-snapshot",
        "queue-operation",
        "progress",
        "attachment",
        "last-prompt",
        "permission-mode",
        "mode",
        "agent-name",
        "agent-setting",
        "pr-link",
        "tag",
        "turn_end",
    }
)
# text Claude Code adds to what the user typed (hooks, reminders)
_INJECTED = re.compile(r"<(system-reminder|user-prompt-submit-hook)>.*?</\1>\s*", re.S)
_COMMAND = re.compile(r"<command-name>(.*?)</command-name>", re.S)
_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.S)
_OUTPUT = (
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
)
_INTERRUPTED = "[Request interrupted by user"
_NOT_PROMPTS = ("isMeta", "isCompactSummary", "isVisibleInTranscriptOnly")
_ENDS = frozenset({"end_turn", "stop_sequence"})


class ClaudeCodeLog(SessionLog):
    provider = PROVIDER

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.prompts: list[str] = []
        self.owners: dict[str, int] = {}
        """Each entry's uuid → its turn (an index into ``prompts``; -1: none)."""
        self.session = ""
        """The session the log's last entry named (for titles without one)."""

    def feed(self, number: int, raw: dict[str, Any], tally: Tally) -> None:
        kind = raw.get("type")
        if raw.get("isSidechain") is True:
            if kind in ("user", "assistant"):
                tally.skipped["sub-agent messages"] += 1
            return
        if isinstance(raw.get("sessionId"), str) and raw["sessionId"]:
            self.session = raw["sessionId"]
        if kind == "user":
            self._user(raw, tally)
        elif kind == "assistant":
            self._assistant(raw, tally)
        elif kind == "system":
            self._system(raw, tally)
        elif kind == "summary":
            tally.skipped["summaries"] += 1
            if raw.get("leafUuid") in self.owners:  # a summary of this log's branch
                self.title(self._conversation(raw), raw.get("summary"), SUMMARY_TITLE)
        elif kind == "custom-title":
            self.title(self._conversation(raw), raw.get("customTitle"), CUSTOM_TITLE)
        elif kind == "ai-title":
            self.title(self._conversation(raw), raw.get("aiTitle"), AI_TITLE)
        else:
            if kind in _BOOKKEEPING:
                tally.skipped["session bookkeeping"] += 1
            else:
                tally.unknown[f"{kind or 'untyped'} entries"] += 1
            self._belongs(raw, self._owner(raw.get("parentUuid")))

    def passed(self, skim: Skim, tally: Tally) -> None:
        fields = skim.fields
        if fields.get("isSidechain") is True:
            return
        parent = fields.get("parentUuid")
        if fields.get("type") == "system" and parent is None:
            parent = fields.get("logicalParentUuid")
        owner = self._owner(parent)
        uuid = fields.get("uuid")
        prompt = (
            fields.get("type") == "user"
            and "toolUseResult" not in fields
            and "tool_use_id" not in skim.keys
            and not any(fields.get(flag) for flag in _NOT_PROMPTS)
        )
        if prompt and isinstance(uuid, str) and uuid:
            key = f"{PROVIDER}:{uuid}"
            self.open_lost(key, self._key(owner))
            self.prompts.append(key)
            self.owners[uuid] = len(self.prompts) - 1
        else:
            self._belongs(fields, owner)

    # -- entries ----------------------------------------------------------------

    def _user(self, raw: dict[str, Any], tally: Tally) -> None:
        owner = self._owner(raw.get("parentUuid"))
        texts, images = self._blocks(raw, tally, user=True)
        if raw.get("isMeta") or raw.get("isCompactSummary") or raw.get("isVisibleInTranscriptOnly"):
            what = "summaries" if raw.get("isCompactSummary") else "meta messages"
            tally.skipped[what] += 1
            self._belongs(raw, owner)
            return
        typed = "\n\n".join(texts)
        text = _INJECTED.sub("", typed).strip()
        if text != typed.strip():
            tally.skipped["reminders and hook context"] += 1
        uuid = raw.get("uuid")
        question: str | None = None
        command = False
        if (name := _COMMAND.search(text)) is not None:
            args = _ARGS.search(text)
            question = f"{name.group(1).strip()} {args.group(1).strip() if args else ''}".strip()
            command = True
        elif text.startswith(_OUTPUT):
            tally.skipped["command and shell output"] += 1
        elif _notification(raw, text):
            tally.skipped["task notifications"] += 1
        elif text.startswith(_INTERRUPTED):
            tally.skipped["interruptions"] += 1
            self.end(self._key(owner), marker=False)
        elif text or images:
            question = "\n\n".join([*([text] if text else []), *["[image]"] * images])
        if question is None or not isinstance(uuid, str) or not uuid:
            self._belongs(raw, owner)
            return
        key = f"{PROVIDER}:{uuid}"
        self.open(
            key,
            self._conversation(raw),
            question,
            raw.get("timestamp"),
            self._key(owner),
            command=command,
        )
        self.prompts.append(key)
        self.owners[uuid] = len(self.prompts) - 1

    def _assistant(self, raw: dict[str, Any], tally: Tally) -> None:
        owner = self._owner(raw.get("parentUuid"))
        self._belongs(raw, owner)
        key = self._key(owner)
        found = raw.get("message")
        message: dict[str, Any] = found if isinstance(found, dict) else {}
        if raw.get("isApiErrorMessage"):
            tally.skipped["errors"] += 1
        elif message.get("model") == "<synthetic>":
            tally.skipped["messages Claude Code wrote itself"] += 1
        else:
            texts, _ = self._blocks(raw, tally, user=False, key=key)
            for text in texts:
                self.answer(key, text, raw.get("timestamp"), tally)
        if message.get("stop_reason") in _ENDS:
            self.end(key)

    def _system(self, raw: dict[str, Any], tally: Tally) -> None:
        parent = raw.get("parentUuid")
        if raw.get("subtype") == "compact_boundary" and parent is None:
            parent = raw.get("logicalParentUuid")  # the branch goes on across a compaction
        owner = self._owner(parent)
        self._belongs(raw, owner)
        tally.skipped["system messages"] += 1
        if raw.get("subtype") == "turn_duration":
            self.end(self._key(owner))

    def _blocks(
        self, raw: dict[str, Any], tally: Tally, *, user: bool, key: str | None = None
    ) -> tuple[list[str], int]:
        """The text blocks of an entry's message and its images; the rest
        counted (and tool calls noted as waiting)."""
        message = raw.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            return [content], 0
        texts: list[str] = []
        images = 0
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text":
                texts.append(str(block.get("text") or ""))
            elif kind == "image" and user:
                images += 1
            elif kind in _REASONING:
                tally.skipped["reasoning"] += 1
            elif kind in _CALLS:
                tally.skipped["tool traffic"] += 1
                self.call(key, block.get("id"))
            elif kind in _TOOL_TRAFFIC:
                tally.skipped["tool traffic"] += 1
                self.result(block.get("tool_use_id"))
            else:
                tally.unknown[str(kind or "untyped block")] += 1
        return texts, images

    # -- the tree -----------------------------------------------------------------

    def _owner(self, parent: object) -> int:
        return self.owners.get(parent, -1) if isinstance(parent, str) else -1

    def _key(self, owner: int) -> str | None:
        return self.prompts[owner] if owner >= 0 else None

    def _belongs(self, raw: dict[str, Any], owner: int) -> None:
        uuid = raw.get("uuid")
        if isinstance(uuid, str) and uuid and uuid not in self.owners:
            self.owners[uuid] = owner

    def _conversation(self, raw: dict[str, Any]) -> str:
        session = raw.get("sessionId")
        return f"{PROVIDER}:{session if isinstance(session, str) and session else self._unnamed()}"

    def _unnamed(self) -> str:
        return self.session or f"unnamed-{self.name}"

    # -- state --------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        return {
            **super().state(),
            "prompts": self.prompts,
            "owners": self.owners,
            "session": self.session,
        }

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        self.prompts = list(state["prompts"])
        self.owners = dict(state["owners"])
        self.session = str(state["session"])


def _notification(raw: dict[str, Any], text: str) -> bool:
    """Text Claude Code put in the user's place (a background task's report):
    ``origin.kind`` says who wrote it, where the log has it."""
    origin = raw.get("origin")
    kind = origin.get("kind") if isinstance(origin, dict) else None
    return (kind is not None and kind != "human") or text.startswith("<task-notification>")


def read(source: Source, tally: Tally) -> Iterator[ImportedConversation]:
    """Every session log in ``source`` (a log, or a zip of a projects folder)."""
    return read_logs(source, tally, {PROVIDER: ClaudeCodeLog}, "Claude Code session log")
