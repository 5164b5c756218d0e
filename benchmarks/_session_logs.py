"""A large tree of coding-agent session logs for the import benchmark, in
the shapes the hosts write: Claude Code projects (a prompt, thinking, tool
calls whose results carry whole files — the bulk of a real log — a reply
over two entries, the end-of-turn line) and Codex CLI rollouts (context,
reasoning, tool calls with output, the answer, task_complete)."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

CLAUDE_SHARE = 0.75
"""Sessions that are Claude Code's; the rest are Codex CLI's."""


def write_tree(
    root: Path, sessions: int, turns: int, sentence: Callable[[int], str], seed: int = 7
) -> tuple[int, int]:
    """Write ``sessions`` logs of ``turns`` turns under ``root``/claude and
    ``root``/codex; returns (turns, bytes) written."""
    rng = random.Random(seed)
    written = 0
    for n in range(sessions):
        if rng.random() < CLAUDE_SHARE:
            folder = root / "claude" / f"-home-dev-project{n % 40}"
            lines = _claude(rng, turns, sentence)
            name = f"{uuid.UUID(int=rng.getrandbits(128))}.jsonl"
        else:
            folder = root / "codex" / "2025" / f"{n % 12 + 1:02d}" / f"{n % 28 + 1:02d}"
            lines = _codex(rng, turns, sentence)
            name = f"rollout-2025-09-14T10-00-00-{uuid.UUID(int=rng.getrandbits(128))}.jsonl"
        folder.mkdir(parents=True, exist_ok=True)
        data = "".join(json.dumps(line) + "\n" for line in lines).encode()
        (folder / name).write_bytes(data)
        written += len(data)
    return sessions * turns, written


def _claude(rng: random.Random, turns: int, sentence: Callable[[int], str]) -> list[Any]:
    session = str(uuid.UUID(int=rng.getrandbits(128)))
    base = {
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/dev/project",
        "sessionId": session,
        "version": "2.0.14",
        "gitBranch": "main",
    }
    lines: list[dict[str, Any]] = []
    parent = [None]

    def add(kind: str, at: str, **fields: Any) -> None:
        entry = {
            "parentUuid": parent[0],
            **base,
            "type": kind,
            **fields,
            "uuid": str(uuid.UUID(int=rng.getrandbits(128))),
            "timestamp": at,
        }
        parent[0] = entry["uuid"]
        lines.append(entry)

    def said(at: str, block: dict[str, Any], stop: str | None = None) -> None:
        add(
            "assistant",
            at,
            requestId="req_x",
            message={
                "id": "msg_x",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [block],
                "stop_reason": stop,
                "usage": {"input_tokens": 3, "output_tokens": 90},
            },
        )

    for t in range(turns):
        at = f"2025-10-{t % 28 + 1:02d}T09:{t % 60:02d}:00.000Z"
        add("user", at, message={"role": "user", "content": sentence(200)})
        said(at, {"type": "thinking", "thinking": sentence(500), "signature": "c2ln"})
        said(at, {"type": "text", "text": sentence(150)})
        for call in range(3):
            tool = f"toolu_{t}_{call}"
            said(
                at,
                {
                    "type": "tool_use",
                    "id": tool,
                    "name": "Read",
                    "input": {"file_path": "/home/dev/project/src/module.py"},
                },
                "tool_use",
            )
            contents = sentence(4000)
            add(
                "user",
                at,
                message={
                    "role": "user",
                    "content": [{"tool_use_id": tool, "type": "tool_result", "content": contents}],
                },
                toolUseResult={
                    "type": "text",
                    "file": {
                        "filePath": "/home/dev/project/src/module.py",
                        "content": contents,
                        "numLines": 80,
                    },
                },
            )
        said(at, {"type": "text", "text": sentence(800)}, "end_turn")
        add("system", at, subtype="turn_duration", durationMs=30_000)
    return lines


def _codex(rng: random.Random, turns: int, sentence: Callable[[int], str]) -> list[Any]:
    session = str(uuid.UUID(int=rng.getrandbits(128)))

    def line(kind: str, payload: dict[str, Any], at: str = "2025-09-14T10:00:00.000Z") -> Any:
        return {"timestamp": at, "type": kind, "payload": payload}

    lines = [
        line(
            "session_meta",
            {
                "id": session,
                "cwd": "/home/dev/project",
                "cli_version": "0.39.0",
                "source": "cli",
                "instructions": None,
            },
        ),
        line(
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [
                    {
                        "type": "input_text",
                        "text": "<environment_context>\n<cwd>/home/dev</cwd>\n"
                        "</environment_context>",
                    }
                ],
            },
        ),
    ]
    for t in range(turns):
        at = f"2025-09-{t % 28 + 1:02d}T10:{t % 60:02d}:00.000Z"
        prompt = sentence(200)
        lines += [
            line("event_msg", {"type": "task_started", "turn_id": str(t)}, at),
            line(
                "turn_context",
                {"turn_id": str(t), "cwd": "/home/dev/project", "model": "gpt-5"},
                at,
            ),
            line(
                "response_item",
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": prompt}],
                },
                at,
            ),
            line("event_msg", {"type": "user_message", "message": prompt}, at),
            line(
                "response_item",
                {"type": "reasoning", "summary": [], "encrypted_content": sentence(800)},
                at,
            ),
        ]
        for call in range(3):
            lines += [
                line(
                    "response_item",
                    {
                        "type": "function_call",
                        "name": "shell",
                        "call_id": f"c{call}",
                        "arguments": '{"command":["cat","module.py"]}',
                    },
                    at,
                ),
                line(
                    "response_item",
                    {
                        "type": "function_call_output",
                        "call_id": f"c{call}",
                        "output": sentence(4000),
                    },
                    at,
                ),
            ]
        answer = sentence(800)
        lines += [
            line("event_msg", {"type": "agent_message", "message": answer}, at),
            line(
                "response_item",
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": answer}],
                },
                at,
            ),
            line("event_msg", {"type": "task_complete", "turn_id": str(t)}, at),
        ]
    return lines
