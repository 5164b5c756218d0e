"""Session logs written as the hosts write them, a line at a time, for the
tests that follow them (``memoro watch``): Claude Code's entries (a prompt,
thinking, a tool round trip, a reply over two lines, the end-of-turn line)
and Codex CLI's rollout items."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

Line = dict[str, Any]


class ClaudeCodeSession:
    """A Claude Code session log at ``path``, its turns made by ``turn``."""

    def __init__(self, path: Path, session: str | None = None) -> None:
        self.path = path
        self.session = session or str(uuid.uuid4())
        self.last: str | None = None
        self.count = 0

    def turn(self, prompt: str, answer: list[str], *, end: bool = True) -> list[Line]:
        """The lines of one turn, chained to the turn before."""
        self.count += 1
        at = f"2025-10-02T09:{self.count // 60 % 60:02d}:{self.count % 60:02d}.000Z"
        base = {
            "isSidechain": False,
            "userType": "external",
            "cwd": "/home/ann/shop",
            "sessionId": self.session,
            "version": "2.0.14",
        }
        lines: list[Line] = []

        def add(kind: str, **fields: Any) -> None:
            line = {"parentUuid": self.last, **base, "type": kind, **fields}
            line["uuid"] = str(uuid.uuid4())
            line["timestamp"] = at
            self.last = line["uuid"]
            lines.append(line)

        def said(block: dict[str, Any]) -> None:
            add("assistant", message={"role": "assistant", "content": [block], "stop_reason": None})

        add("user", message={"role": "user", "content": prompt})
        said({"type": "thinking", "thinking": "Plan it.", "signature": "c2ln"})
        said({"type": "tool_use", "id": f"toolu_{self.count}", "name": "Read", "input": {}})
        add(
            "user",
            message={
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"toolu_{self.count}",
                        "content": "file contents",
                    }
                ],
            },
        )
        for text in answer:
            said({"type": "text", "text": text})
        if end:
            add("system", subtype="turn_duration", durationMs=1200)
        return lines

    def key(self, lines: list[Line]) -> str:
        return f"claude-code:{lines[0]['uuid']}"

    def write(self, lines: list[Line], *, cut: int = 0) -> None:
        """Append ``lines``; the last ``cut`` bytes held back (a line being
        written)."""
        data = "".join(json.dumps(line) + "\n" for line in lines).encode()
        with self.path.open("ab") as file:
            file.write(data[: len(data) - cut] if cut else data)

    def write_bytes(self, data: bytes) -> None:
        with self.path.open("ab") as file:
            file.write(data)


class CodexSession:
    """A Codex CLI rollout at ``path``."""

    def __init__(self, path: Path, session: str | None = None) -> None:
        self.path = path
        self.session = session or str(uuid.uuid4())
        self.lines = 0
        self.write(
            [
                self._line(
                    "session_meta",
                    {
                        "id": self.session,
                        "cwd": "/home/ann",
                        "cli_version": "0.39.0",
                        "source": "cli",
                    },
                )
            ]
        )

    def _line(self, kind: str, payload: dict[str, Any]) -> Line:
        return {"timestamp": "2025-09-14T10:00:00.000Z", "type": kind, "payload": payload}

    def turn(self, prompt: str, answer: str, *, ends: bool = True) -> tuple[str, list[Line]]:
        """The key the turn will have and its lines; ``ends=False``: as the
        Codex CLI releases of late 2025 write it, with no task_started or
        task_complete (their rollouts keep neither), the answer last."""
        if not ends:
            return self._unended(prompt, answer)
        lines = [
            self._line("event_msg", {"type": "task_started", "turn_id": "t"}),
            self._line(
                "response_item",
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": prompt}],
                },
            ),
            self._line("event_msg", {"type": "user_message", "message": prompt}),
            self._line(
                "response_item",
                {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"},
            ),
            self._line(
                "response_item", {"type": "function_call_output", "call_id": "c1", "output": "ok"}
            ),
            self._line("event_msg", {"type": "agent_message", "message": answer}),
            self._line("event_msg", {"type": "task_complete", "turn_id": "t"}),
        ]
        return f"codex:{self.session}:{self.lines + 3}", lines

    def _unended(self, prompt: str, answer: str) -> tuple[str, list[Line]]:
        user = {"type": "message", "role": "user"}
        lines = [
            self._line("turn_context", {"cwd": "/home/ann", "model": "gpt-5-codex"}),
            self._line(
                "response_item", {**user, "content": [{"type": "input_text", "text": prompt}]}
            ),
            self._line("event_msg", {"type": "user_message", "message": prompt, "images": []}),
            self._line("event_msg", {"type": "token_count", "info": None}),
            self._line("response_item", {"type": "reasoning", "summary": [], "content": None}),
            self._line("event_msg", {"type": "agent_reasoning", "text": "**Looking**"}),
            self._line(
                "response_item",
                {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c2"},
            ),
            self._line(
                "response_item", {"type": "function_call_output", "call_id": "c2", "output": "ok"}
            ),
            self._line("event_msg", {"type": "agent_message", "message": answer}),
            self._line(
                "response_item",
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": answer}],
                },
            ),
            self._line("event_msg", {"type": "token_count", "info": None}),
        ]
        return f"codex:{self.session}:{self.lines + 3}", lines

    def write(self, lines: list[Line]) -> None:
        with self.path.open("a") as file:
            file.write("".join(json.dumps(line) + "\n" for line in lines))
        self.lines += len(lines)


def write_tree(root: Path, sessions: int, turns: int) -> set[str]:
    """A projects folder of finished Claude Code sessions and a Codex
    sessions folder beside it; the keys of every turn in them."""
    keys: set[str] = set()
    for n in range(sessions):
        if n % 4 == 3:
            folder = root / "codex" / "2025" / "09" / f"{n % 28 + 1:02d}"
            folder.mkdir(parents=True, exist_ok=True)
            codex = CodexSession(folder / f"rollout-2025-09-14T10-00-00-{uuid.uuid4()}.jsonl")
            for t in range(turns):
                key, lines = codex.turn(f"codex question {n}.{t}", f"codex answer {n}.{t}")
                codex.write(lines)
                keys.add(key)
        else:
            folder = root / "claude" / f"-home-ann-project{n % 5}"
            folder.mkdir(parents=True, exist_ok=True)
            claude = ClaudeCodeSession(folder / f"{uuid.uuid4()}.jsonl")
            lines: list[Line] = []
            for t in range(turns):
                turn = claude.turn(f"question {n}.{t}", [f"answer {n}.{t}", "and more"])
                keys.add(claude.key(turn))
                lines += turn
            claude.write(lines)
    return keys
