"""Fakes shipped with memoro for tests (yours and ours). They stand in for
models only — never for the database or the HTTP stack.

``HashEmbedder`` is a deterministic bag-of-words embedder: texts that share
words have similar vectors. It cuts texts into windows of ``window_chars``
characters like a model with a short input would, can be slowed down, and can
be told to fail on a marker, to exercise the job queue.

``ScriptedLLM`` is a chat model scripted turn by turn (text, tool calls),
served over real HTTP in the OpenAI-compatible (Chat Completions and
Responses) and Anthropic wire formats.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float32]


class HashEmbedder:
    """A fake Embedder: hashed word counts, L2-normalized."""

    def __init__(
        self,
        model_id: str = "test/hash",
        dim: int = 64,
        window_chars: int = 1000,
        delay: float = 0.0,
        fail_on: str | None = None,
    ) -> None:
        self.model_id = model_id
        self.dim = dim
        self.window_chars = window_chars
        self.delay = delay
        self.fail_on = fail_on

    def _vector(self, text: str) -> Floats:
        v = np.zeros(self.dim, dtype=np.float32)
        for word in re.findall(r"\w+", text.lower()):
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
            v[h % self.dim] += 1.0
        norm = float(np.linalg.norm(v))
        return v / norm if norm else v

    def embed_documents(self, texts: Sequence[str]) -> list[Floats]:
        if self.delay:
            time.sleep(self.delay)
        out = []
        for text in texts:
            if self.fail_on is not None and self.fail_on in text:
                raise RuntimeError(f"HashEmbedder told to fail on {self.fail_on!r}")
            step = self.window_chars
            windows = [text[i : i + step] for i in range(0, max(len(text), 1), step)]
            out.append(np.stack([self._vector(w) for w in windows]))
        return out

    def embed_query(self, text: str) -> Floats:
        return self._vector(text)


# -- a scripted LLM over real HTTP ---------------------------------------------


@dataclass
class Step:
    """One model reply: text, and tool calls to make (name, arguments)."""

    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    hold: threading.Event | None = None
    """When streaming, stop after the first piece of text until this is set,
    so a test can see an answer arrive while it is still being written."""


def say(text: str) -> Step:
    return Step(text=text)


def call(name: str, arguments: dict[str, Any] | None = None, text: str = "") -> Step:
    return Step(text=text, tool_calls=[(name, arguments or {})])


class ScriptedLLM:
    """A fake chat model served over real HTTP in the OpenAI-compatible
    (``POST /v1/chat/completions``, and the Responses API's
    ``POST /v1/responses``) and Anthropic (``POST /v1/messages``) wire
    formats, streaming or not. Each request takes the next scripted
    step; ``requests`` keeps every request body and ``headers`` every
    request's headers, for assertions.

        with ScriptedLLM([call("memory_write", {"block": "Name: Al"}), say("Done.")]) as llm:
            OpenAI(base_url=llm.openai_url, api_key="x")...
    """

    def __init__(self, steps: list[Step] | None = None) -> None:
        self.steps: list[Step] = list(steps or [])
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def openai_url(self) -> str:
        return f"{self.url}/v1"

    def script(self, *steps: Step) -> None:
        with self._lock:
            self.steps.extend(steps)

    def __enter__(self) -> ScriptedLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next(self, body: dict[str, Any], headers: dict[str, str]) -> Step:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            if not self.steps:
                return Step(text="(the script has no more steps)")
            return self.steps.pop(0)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        llm = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                step = llm._next(body, {k.lower(): v for k, v in self.headers.items()})
                path = self.path.rstrip("/")
                anthropic = path.endswith("/messages")
                responses = path.endswith("/responses")
                if responses:
                    events = _responses_events(step, body)
                    first_text = next(
                        (i for i, (name, _) in enumerate(events) if name.endswith("text.delta")), -1
                    )
                else:
                    events = (_anthropic_events if anthropic else _openai_events)(step, body)
                    first_text = 2 if anthropic else 1
                if body.get("stream"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    for i, (name, data) in enumerate(events):
                        prefix = f"event: {name}\n" if name else ""
                        self.wfile.write(f"{prefix}data: {data}\n\n".encode())
                        self.wfile.flush()
                        if step.hold is not None and i == first_text:
                            step.hold.wait(30)  # the first piece of text is out
                    if not anthropic and not responses:
                        self.wfile.write(b"data: [DONE]\n\n")
                    return
                if responses:
                    whole = _responses_message(step, body)
                else:
                    whole = (_anthropic_message if anthropic else _openai_message)(step, body)
                payload = json.dumps(whole).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        return Handler


def _tool_id(i: int) -> str:
    return f"call_{uuid.uuid4().hex[:12]}_{i}"


def _openai_message(step: Step, body: dict[str, Any]) -> dict[str, Any]:
    calls = [
        {"id": _tool_id(i), "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for i, (n, a) in enumerate(step.tool_calls)
    ]
    message: dict[str, Any] = {"role": "assistant", "content": step.text or None}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "fake"),
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def _openai_events(step: Step, body: dict[str, Any]) -> list[tuple[str, str]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[str, str]:
        return "", json.dumps(
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": body.get("model", "fake"),
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        )

    events = [chunk({"role": "assistant", "content": ""})]
    for piece in _pieces(step.text):
        events.append(chunk({"content": piece}))
    for i, (name, arguments) in enumerate(step.tool_calls):
        head = {
            "index": i,
            "id": _tool_id(i),
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        events.append(chunk({"tool_calls": [head]}))
        for piece in _pieces(json.dumps(arguments)):
            events.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
    events.append(chunk({}, "tool_calls" if step.tool_calls else "stop"))
    return events


def _anthropic_message(step: Step, body: dict[str, Any]) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": step.text}] if step.text else []
    content += [
        {"type": "tool_use", "id": _tool_id(i), "name": n, "input": a}
        for i, (n, a) in enumerate(step.tool_calls)
    ]
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "fake"),
        "content": content,
        "stop_reason": "tool_use" if step.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }


def _anthropic_events(step: Step, body: dict[str, Any]) -> list[tuple[str, str]]:
    message = _anthropic_message(step, body)
    start = {**message, "content": [], "stop_reason": None}
    events = [("message_start", json.dumps({"type": "message_start", "message": start}))]
    for index, block in enumerate(message["content"]):
        first: dict[str, Any]
        if block["type"] == "text":
            first = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
        else:
            first = {**block, "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": p}
                for p in _pieces(json.dumps(block["input"]))
            ]
        events.append(
            (
                "content_block_start",
                json.dumps({"type": "content_block_start", "index": index, "content_block": first}),
            )
        )
        for delta in deltas:
            events.append(
                (
                    "content_block_delta",
                    json.dumps({"type": "content_block_delta", "index": index, "delta": delta}),
                )
            )
        events.append(
            ("content_block_stop", json.dumps({"type": "content_block_stop", "index": index}))
        )
    events.append(
        (
            "message_delta",
            json.dumps(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                    "usage": {"output_tokens": 1},
                }
            ),
        )
    )
    events.append(("message_stop", json.dumps({"type": "message_stop"})))
    return events


def _responses_output(step: Step) -> list[dict[str, Any]]:
    """The output items of a Responses API reply: the text as one message,
    then one function call per tool call."""
    output: list[dict[str, Any]] = []
    if step.text:
        text = {"type": "output_text", "text": step.text, "annotations": [], "logprobs": []}
        output.append(
            {
                "type": "message",
                "id": f"msg_{uuid.uuid4().hex[:12]}",
                "role": "assistant",
                "status": "completed",
                "content": [text],
            }
        )
    for i, (name, arguments) in enumerate(step.tool_calls):
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{uuid.uuid4().hex[:12]}_{i}",
                "call_id": _tool_id(i),
                "name": name,
                "arguments": json.dumps(arguments),
                "status": "completed",
            }
        )
    return output


def _responses_message(
    step: Step, body: dict[str, Any], output: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    usage = {
        "input_tokens": 0,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": 0,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 0,
    }
    return {
        "id": "resp_fake",
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": body.get("model", "fake"),
        "instructions": body.get("instructions"),
        "output": _responses_output(step) if output is None else output,
        "parallel_tool_calls": True,
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools", []),
        "error": None,
        "incomplete_details": None,
        "metadata": {},
        "usage": usage,
    }


def _responses_events(step: Step, body: dict[str, Any]) -> list[tuple[str, str]]:
    """A Responses API stream: created, each output item added, its text or
    arguments in pieces, done, and the whole response completed."""
    events: list[dict[str, Any]] = []
    start = {**_responses_message(step, body, []), "status": "in_progress", "usage": None}
    events += [
        {"type": "response.created", "response": start},
        {"type": "response.in_progress", "response": start},
    ]
    output = _responses_output(step)
    for index, item in enumerate(output):
        at = {"item_id": item["id"], "output_index": index}
        if item["type"] == "message":
            part = {**item["content"][0], "text": ""}
            events.append(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {**item, "status": "in_progress", "content": []},
                }
            )
            events.append(
                {"type": "response.content_part.added", **at, "content_index": 0, "part": part}
            )
            for piece in _pieces(step.text):
                events.append(
                    {
                        "type": "response.output_text.delta",
                        **at,
                        "content_index": 0,
                        "delta": piece,
                        "logprobs": [],
                    }
                )
            events.append(
                {
                    "type": "response.output_text.done",
                    **at,
                    "content_index": 0,
                    "text": step.text,
                    "logprobs": [],
                }
            )
            events.append(
                {
                    "type": "response.content_part.done",
                    **at,
                    "content_index": 0,
                    "part": item["content"][0],
                }
            )
        else:
            events.append(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {**item, "status": "in_progress", "arguments": ""},
                }
            )
            for piece in _pieces(item["arguments"]):
                events.append(
                    {"type": "response.function_call_arguments.delta", **at, "delta": piece}
                )
            events.append(
                {
                    "type": "response.function_call_arguments.done",
                    **at,
                    "name": item["name"],
                    "arguments": item["arguments"],
                }
            )
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append(
        {"type": "response.completed", "response": _responses_message(step, body, output)}
    )
    return [
        (event["type"], json.dumps({**event, "sequence_number": n}))
        for n, event in enumerate(events)
    ]


def _pieces(text: str, size: int = 12) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]
