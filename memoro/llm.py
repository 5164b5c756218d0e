"""The chat model's API, for the reference agent (memoro.agent) and for
memory reviews (memoro.review): any OpenAI-compatible chat endpoint (OpenAI,
vLLM, Ollama, llama.cpp server, LM Studio…) through the ``openai`` SDK, and
Anthropic through the ``anthropic`` SDK with the cache breakpoint before the
personal block. Both stream text as it arrives. Without an explicit key or
base URL, each SDK reads its own environment variables (``OPENAI_API_KEY``,
``OPENAI_BASE_URL``, ``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``).

Messages are kept in one neutral shape: ``{"role": "user"|"assistant"|"tool",
"content": str, "tool_calls": [ToolCall], "tool_call_id": str}``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from memoro.errors import ConfigError, ModelError
from memoro.prompt import SystemPrompt
from memoro.tools import ToolSpec

Message = dict[str, Any]
OnText = Callable[[str], None]


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as models send it


@dataclass(frozen=True)
class Reply:
    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)


class Provider(Protocol):
    def complete(
        self,
        system: SystemPrompt,
        messages: list[Message],
        tools: list[ToolSpec],
        on_text: OnText | None = None,
    ) -> Reply: ...


class _SdkProvider:
    """What both SDK providers share: the SDK's own errors (unreachable,
    refused, failed) come out as ModelError."""

    _failure: type[Exception]
    """The base class of the SDK's errors."""

    def complete(
        self,
        system: SystemPrompt,
        messages: list[Message],
        tools: list[ToolSpec],
        on_text: OnText | None = None,
    ) -> Reply:
        try:
            return self._complete(system, messages, tools, on_text)
        except self._failure as exc:
            raise ModelError(f"the chat model failed: {exc}") from exc

    def _complete(
        self,
        system: SystemPrompt,
        messages: list[Message],
        tools: list[ToolSpec],
        on_text: OnText | None,
    ) -> Reply:
        raise NotImplementedError


def _limits(timeout: float | None, max_retries: int | None) -> dict[str, Any]:
    """The SDK's own timeout and retries, where the caller sets them."""
    given = {"timeout": timeout, "max_retries": max_retries}
    return {name: value for name, value in given.items() if value is not None}


def _key(given: str, variable: str, base_url: str | None) -> str | None:
    """The key to send: the one given, else the SDK's own variable; an
    endpoint of your own (a base URL) may need none, a provider's API does."""
    if given:
        return given
    if os.environ.get(variable):
        return os.environ[variable]
    # local servers (Ollama, vLLM, llama.cpp) ignore the key but the SDKs want one
    return "not-needed" if base_url else None


class OpenAIProvider(_SdkProvider):
    """Chat Completions with streaming; the system prompt is one message whose
    stable part is a byte-identical prefix across turns."""

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str = "",
        *,
        timeout: float | None = None,
        max_retries: int | None = None,
    ) -> None:
        try:
            import openai
        except ImportError:
            raise ConfigError(
                "the OpenAI provider needs the openai package (memoro's chat extra):"
                " pip install openai"
            ) from None
        self.model = model
        key = _key(api_key, "OPENAI_API_KEY", base_url or os.environ.get("OPENAI_BASE_URL"))
        if key is None:
            raise ConfigError(
                "the OpenAI provider needs an API key: set OPENAI_API_KEY or pass api_key"
                " (MEMORO_LLM_KEY for memoro chat and serve); a local endpoint that needs"
                " none is given as base_url or OPENAI_BASE_URL (MEMORO_LLM_URL)"
            )
        self.client = openai.OpenAI(base_url=base_url, api_key=key, **_limits(timeout, max_retries))
        self._failure = openai.OpenAIError

    def _complete(
        self,
        system: SystemPrompt,
        messages: list[Message],
        tools: list[ToolSpec],
        on_text: OnText | None = None,
    ) -> Reply:
        wire = system.openai() + [_openai_message(m) for m in messages]
        stream = self.client.chat.completions.create(
            model=self.model,
            messages=wire,  # type: ignore[arg-type]
            tools=[t.openai() for t in tools],  # type: ignore[misc]
            stream=True,
        )
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        chunk: Any
        for chunk in stream:
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            if delta.content:
                text.append(delta.content)
                if on_text is not None:
                    on_text(delta.content)
            for part in delta.tool_calls or []:
                slot = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                slot["id"] = part.id or slot["id"]
                if part.function is not None:
                    slot["name"] += part.function.name or ""
                    slot["arguments"] += part.function.arguments or ""
        tool_calls = [
            ToolCall(c["id"], c["name"], c["arguments"]) for _, c in sorted(calls.items())
        ]
        return Reply("".join(text), tool_calls)


def _openai_message(message: Message) -> dict[str, Any]:
    if message["role"] == "tool":
        return {
            "role": "tool",
            "tool_call_id": message["tool_call_id"],
            "content": message["content"],
        }
    out: dict[str, Any] = {"role": message["role"], "content": message.get("content") or ""}
    if message.get("tool_calls"):
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message["tool_calls"]
        ]
    return out


class AnthropicProvider(_SdkProvider):
    """The Messages API with streaming; the system prompt is two blocks with a
    cache breakpoint after the stable one, before the personal block."""

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str = "",
        max_tokens: int = 2048,
        *,
        timeout: float | None = None,
        max_retries: int | None = None,
    ) -> None:
        try:
            import anthropic
        except ImportError:
            raise ConfigError(
                "the Anthropic provider needs the anthropic package (memoro's chat extra):"
                " pip install anthropic"
            ) from None
        self.model = model
        self.max_tokens = max_tokens
        key = _key(api_key, "ANTHROPIC_API_KEY", base_url or os.environ.get("ANTHROPIC_BASE_URL"))
        if key is None:
            raise ConfigError(
                "the Anthropic provider needs an API key: set ANTHROPIC_API_KEY or pass"
                " api_key (MEMORO_LLM_KEY for memoro chat and serve)"
            )
        self.client = anthropic.Anthropic(
            base_url=base_url, api_key=key, **_limits(timeout, max_retries)
        )
        self._failure = anthropic.AnthropicError

    def _complete(
        self,
        system: SystemPrompt,
        messages: list[Message],
        tools: list[ToolSpec],
        on_text: OnText | None = None,
    ) -> Reply:
        with self.client.messages.stream(
            model=self.model,
            max_tokens=self.max_tokens,
            system=system.anthropic(),  # type: ignore[arg-type]
            messages=_anthropic_messages(messages),  # type: ignore[arg-type]
            tools=[t.anthropic() for t in tools],  # type: ignore[misc]
        ) as stream:
            for piece in stream.text_stream:
                if on_text is not None:
                    on_text(piece)
            final = stream.get_final_message()
        text = "".join(b.text for b in final.content if b.type == "text")
        calls = [
            ToolCall(b.id, b.name, json.dumps(b.input))
            for b in final.content
            if b.type == "tool_use"
        ]
        return Reply(text, calls)


def _anthropic_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Tool results go back as user messages of tool_result blocks."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message["role"] == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": message["tool_call_id"],
                "content": message["content"],
                "is_error": message.get("is_error", False),
            }
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
            continue
        if message["role"] == "assistant" and message.get("tool_calls"):
            blocks: list[dict[str, Any]] = []
            if message.get("content"):
                blocks.append({"type": "text", "text": message["content"]})
            blocks += [
                {
                    "type": "tool_use",
                    "id": c.id,
                    "name": c.name,
                    "input": json.loads(c.arguments or "{}", strict=False),
                }
                for c in message["tool_calls"]
            ]
            out.append({"role": "assistant", "content": blocks})
            continue
        out.append({"role": message["role"], "content": message.get("content") or ""})
    return out


def make_provider(
    kind: str,
    model: str,
    url: str = "",
    key: str = "",
    *,
    timeout: float | None = None,
    max_retries: int | None = None,
) -> Provider:
    """The provider the settings name; ``timeout`` (seconds per request)
    and ``max_retries`` are the SDK's, left to it when not given."""
    if kind not in ("openai", "anthropic"):
        raise ConfigError(
            "no LLM is configured: set MEMORO_LLM=openai (any OpenAI-compatible endpoint,"
            " with MEMORO_LLM_URL) or MEMORO_LLM=anthropic, and MEMORO_LLM_MODEL"
        )
    if not model:
        raise ConfigError(f"MEMORO_LLM is {kind}: set MEMORO_LLM_MODEL to the model to chat with")
    if kind == "openai":
        return OpenAIProvider(model, url or None, key, timeout=timeout, max_retries=max_retries)
    return AnthropicProvider(model, url or None, key, timeout=timeout, max_retries=max_retries)
