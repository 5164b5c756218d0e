"""The one shape of an error on every interface that speaks JSON (the HTTP
API, the pages' calls, MCP over HTTP, the chat stream):
``{"error": {"code": …, "message": …}}``, with extra fields where a status
needs them (a 412 carries the current block)."""

from __future__ import annotations

from typing import Any

from memoro import inputs


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    """The error envelope; the message may quote what the client sent, so it
    is kept encodable (no lone surrogates or NULs)."""
    return {"error": {"code": code, "message": inputs.clean_text(message), **extra}}
