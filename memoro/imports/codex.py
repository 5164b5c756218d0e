"""OpenAI Codex CLI's session logs ("rollouts"):
``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``, one
``{"timestamp", "type", "payload"}`` line per item, appended as the session
goes (docs/imports.md has each line type and its source in openai/codex).

The dialogue is what Codex showed: ``event_msg`` ``user_message`` (what the
user typed) and ``agent_message`` (each visible reply, commentary included);
the same messages as the model received them (``response_item``) are
copies, and around them are the instructions and environment context Codex
adds, reasoning, and tool calls with their output. The first Codex versions
wrote bare response items (``{"type": "message", …}``) after a first line
naming the session: there the user and assistant messages are the dialogue.
A rollback (``thread_rolled_back``) takes back the last prompts. A turn's
key is the session id and its prompt's line number.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from typing import Any

from memoro.imports.model import ImportedConversation, Tally
from memoro.imports.sessions import SessionLog, read_logs
from memoro.imports.source import Source

PROVIDER = "codex"

# what Codex puts in a user message that the user never typed (its own list:
# codex-rs/core/src/contextual_user_message.rs, event_mapping.rs)
_CONTEXT = (
    "<environment_context>",
    "<user_instructions>",
    "# agents.md instructions for",
    "<instructions>",
    "<skill>",
    "<user_shell_command>",
    "<turn_aborted>",
    "<subagents>",
    "<subagent_notification>",
    "<plugins>",
    "<hook_prompt",
    "<permissions instructions>",
    "<collaboration_mode>",
    "<personality_spec>",
    "<model_switch>",
)
_CALLS = frozenset({"function_call", "custom_tool_call", "local_shell_call", "tool_search_call"})
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output", "tool_search_output"})
_TOOLS = frozenset({"web_search_call", "image_generation_call", "additional_tools"})
_ITEM_BOOKKEEPING = frozenset(
    {"ghost_snapshot", "compaction", "context_compaction", "compaction_trigger", "agent_message"}
)
_TOOL_EVENTS = frozenset(
    {
        "exec_command_end",
        "patch_apply_end",
        "mcp_tool_call_end",
        "web_search_end",
        "image_generation_end",
        "view_image_tool_call",
        "dynamic_tool_call_response",
    }
)
_EVENT_BOOKKEEPING = frozenset(
    {
        "task_started",
        "turn_started",
        "token_count",
        "context_compacted",
        "entered_review_mode",
        "exited_review_mode",
        "undo_completed",
        "thread_goal_updated",
        "item_completed",
        "sub_agent_activity",
        "turn_diff",
        "plan_update",
        "error",
        "warning",
        "stream_error",
    }
)
_ENDS = frozenset({"task_complete", "turn_complete"})
_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)


class CodexLog(SessionLog):
    provider = PROVIDER

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.session = ""
        self.started: object = None
        """The session's start, for the flat items that carry no time."""
        self.subagent = False

    def feed(self, number: int, raw: dict[str, Any], tally: Tally) -> None:
        kind = raw.get("type")
        payload = raw.get("payload")
        at = raw.get("timestamp")
        if isinstance(payload, dict):
            if kind == "session_meta":
                self._meta(payload, at, tally)
            elif kind == "event_msg":
                self._event(number, payload, at, tally)
            elif kind == "response_item":
                self._item(number, payload, at, tally, flat=False)
            elif kind in ("turn_context", "world_state"):
                tally.skipped["session bookkeeping"] += 1
            elif kind == "compacted":
                tally.skipped["summaries"] += 1
            elif isinstance(kind, str) and kind.startswith("inter_agent"):
                tally.skipped["sub-agent messages"] += 1
            else:
                tally.unknown[f"{kind or 'untyped'} lines"] += 1
        elif "record_type" in raw:
            tally.skipped["session bookkeeping"] += 1
        elif kind is None and "id" in raw:
            self._meta(raw, raw.get("timestamp"), tally)
        else:
            self._item(number, raw, None, tally, flat=True)

    # -- lines --------------------------------------------------------------------

    def _meta(self, meta: dict[str, Any], at: object, tally: Tally) -> None:
        tally.skipped["session bookkeeping"] += 1
        if self.session:
            return  # the first one names the session (a fork copies its parent's after)
        for name in ("id", "session_id", "thread_id"):
            if isinstance(meta.get(name), str) and meta[name]:
                self.session = meta[name]
                break
        self.started = meta.get("timestamp") or at
        source = meta.get("source")
        self.subagent = isinstance(source, dict) and any("agent" in str(k) for k in source)

    def _event(self, number: int, event: dict[str, Any], at: object, tally: Tally) -> None:
        kind = event.get("type")
        if kind == "user_message":
            text = str(event.get("message") or "")
            images = len(event.get("images") or []) + len(event.get("local_images") or [])
            self._prompt(number, text, images, at, tally)
        elif kind == "agent_message":
            if self.subagent:
                tally.skipped["sub-agent messages"] += 1
            else:
                phase = event.get("phase")  # newer releases: commentary or final_answer
                text = str(event.get("message") or "")
                self.answer(self.latest, text, at, tally, tentative=phase == "commentary")
                if phase == "final_answer":
                    self.end(self.latest)
        elif kind in ("agent_reasoning", "agent_reasoning_raw_content"):
            tally.skipped["reasoning"] += 1
        elif kind in _ENDS:
            self.end(self.latest)
        elif kind == "turn_aborted":
            tally.skipped["interruptions"] += 1
            self.end(self.latest, marker=False)
        elif kind == "thread_rolled_back":
            turns = event.get("num_turns")
            self.rewind(turns if isinstance(turns, int) and not isinstance(turns, bool) else 0)
        elif kind in _TOOL_EVENTS:
            tally.skipped["tool traffic"] += 1
        elif kind in _EVENT_BOOKKEEPING:
            tally.skipped["session bookkeeping"] += 1
        else:
            tally.unknown[f"{kind or 'untyped'} events"] += 1

    def _item(
        self, number: int, item: dict[str, Any], at: object, tally: Tally, *, flat: bool
    ) -> None:
        kind = item.get("type")
        if kind == "message":
            role = item.get("role")
            texts = _texts(item, tally, count=flat)
            images = _images(item)
            if role == "user":
                if _context("\n".join(texts)):
                    tally.skipped["instructions and environment context"] += 1
                elif flat:  # else a copy of the user_message event
                    self._prompt(number, "\n\n".join(texts), images, at, tally)
            elif role == "assistant":
                if flat:
                    self.answer(self.latest, "\n\n".join(texts), at, tally)
            elif role in ("developer", "system"):
                tally.skipped["instructions and environment context"] += 1
            else:
                tally.unknown[f"{role} messages"] += 1
        elif kind == "reasoning":
            tally.skipped["reasoning"] += 1
        elif kind in _CALLS:
            tally.skipped["tool traffic"] += 1
            if kind != "local_shell_call" or item.get("status") != "completed":
                self.call(self.latest, item.get("call_id"))
        elif kind in _OUTPUTS:
            tally.skipped["tool traffic"] += 1
            self.result(item.get("call_id"))
        elif kind in _TOOLS:
            tally.skipped["tool traffic"] += 1
        elif kind in _ITEM_BOOKKEEPING:
            tally.skipped["session bookkeeping"] += 1
        else:
            tally.unknown[f"{kind or 'untyped'} items"] += 1

    def _prompt(self, number: int, text: str, images: int, at: object, tally: Tally) -> None:
        if self.subagent:
            tally.skipped["sub-agent messages"] += 1
            return
        if _context(text):
            tally.skipped["instructions and environment context"] += 1
            return
        text = text.strip()
        if not text and not images:
            return
        question = "\n\n".join([*([text] if text else []), *["[image]"] * images])
        session = self._session()
        self.open(
            f"{PROVIDER}:{session}:{number}",
            f"{PROVIDER}:{session}",
            question,
            at or self.started,
            self.latest,
        )

    def _session(self) -> str:
        if not self.session:  # a log without its first line: its file's name says
            found = _ID.findall(self.name)
            self.session = (
                found[-1]
                if found
                else "unnamed-" + hashlib.sha256(self.name.encode()).hexdigest()[:32]
            )
        return self.session

    # -- state --------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        return {
            **super().state(),
            "session": self.session,
            "started": self.started,
            "subagent": self.subagent,
        }

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        self.session = str(state["session"])
        self.started = state["started"]
        self.subagent = bool(state["subagent"])


def _texts(item: dict[str, Any], tally: Tally, *, count: bool) -> list[str]:
    texts: list[str] = []
    content = item.get("content")
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text"):
            texts.append(str(part.get("text") or ""))
        elif kind != "input_image" and count:
            tally.unknown[str(kind or "untyped part")] += 1
    return texts


def _images(item: dict[str, Any]) -> int:
    content = item.get("content")
    return sum(
        1
        for part in (content if isinstance(content, list) else [])
        if isinstance(part, dict) and part.get("type") == "input_image"
    )


def _context(text: str) -> bool:
    return text.lstrip().lower().startswith(_CONTEXT)


def read(source: Source, tally: Tally) -> Iterator[ImportedConversation]:
    """Every rollout in ``source`` (a log, or a zip of a sessions folder)."""
    return read_logs(source, tally, {PROVIDER: CodexLog}, "Codex session log")
