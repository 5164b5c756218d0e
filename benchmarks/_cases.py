"""The hostile inputs of the bad-input corpus (benchmarks/_bad_input.py):
texts, ids, times, tool arguments and tokens, each with the answer the
Python API must give — accepted, refused, or a rule's result."""

from __future__ import annotations

import json
from typing import Any

import jwt
from _server import SECRET

from memoro.auth import Sessions, Signer, TokenVerifier

OK, REFUSED, REJECTED, UNAUTHORIZED, ERROR = "accepted", "refused", "rejected", "401", "error"
SIGNER = Signer(SECRET)
VERIFIER = TokenVerifier(secret=SECRET)

# (conversation, question, answer, at, expected)
TURNS: list[tuple[Any, Any, Any, Any, str]] = [
    ("c1", "plain question", "plain answer", None, OK),
    ("c2", "half a pair \udcff here", "ok", None, OK),
    ("c3", "\ud800", "the answer stays", None, OK),
    ("c4", "\udcff", "\ud800", None, REFUSED),
    ("c5", "nul\x00here", "esc\x1b[2Jand bell\x07", None, OK),
    ("c6", "   ", "\t\n", None, REFUSED),
    ("c7", "\x00\x01", "\x7f\x9f", None, REFUSED),
    ("c8", "x" * 1_000_001, "", None, REFUSED),
    ("c9", "emoji 😀 and 👍🏽", "ok", None, OK),
    ("c10", "q", "a", "9999-12-31T23:59:59-14:00", REFUSED),
    ("c11", "q", "a", "0001-01-01T00:00:00+14:00", REFUSED),
    ("c12", "q", "a", "0000-06-01T00:00:00Z", REFUSED),
    ("c13", "q", "a", "10000-01-01T00:00:00Z", REFUSED),
    ("c14", "q", "a", "May 5", REFUSED),
    ("c15", "q", "a", "2025-13-01T00:00:00Z", REFUSED),
    ("c16", "q", "a", "2025-01-01T25:00:00Z", REFUSED),
    ("c17", "q", "a", "2025-01-31", REFUSED),
    ("c18", "q", "a", "", REFUSED),
    ("c19", "q", "a", "0001-01-03T00:00:00+23:59", OK),
    ("c20", "q", "a", "9999-12-29T23:59:59.999999-23:59", OK),
    ("c21", "q", "a", "2025-01-31t14:05:00z", OK),
    ("c22", "q", "a", "2025-01-31 14:05+02:00", OK),
    ("c23", "q", "a", "2025-01-31T14:05:00.123456789Z", OK),
    (".", "q", "a", None, REFUSED),
    ("..", "q", "a", None, REFUSED),
    ("a/b/c", "q", "a", None, OK),
    ("a/../b", "q", "a", None, OK),
    ("100% sure?#x", "q", "a", None, OK),
    ("ü é/😀", "q", "a", None, OK),
    ("tab\there", "q", "a", None, REFUSED),
    ("nul\x00id", "q", "a", None, REFUSED),
    ("x" * 255, "q", "a", None, OK),
    ("x" * 256, "q", "a", None, REFUSED),
    ("", "q", "a", None, REFUSED),
    ("   ", "q", "a", None, REFUSED),
    ("half\ud800", "q", "a", None, REFUSED),
]
BLOCKS: list[tuple[str, str]] = [
    ("Name: Ann", "saved"),
    ("Name: Ann \udcff", "saved"),
    ("\ud800", "empty"),
    ("", "empty"),
    ("   \u200b \t", "empty"),
    ("x" * 4000, "saved"),
    ("x" * 4001, "too_long"),
    ("a\r\nb\rc", "saved"),
    ("nul\x00 gone", "saved"),
    ("\x1b[31mred", "saved"),
    ("😀👍🏽 👨‍👩‍👧", "saved"),
    ("tag\U000e0041\U000e0042 hidden", "saved"),
    ("  padded  ", "saved"),
    ("\ufeffbom and soft\u00adhyphen", "saved"),
]
# (query, limit, expected)
SEARCHES: list[tuple[str, int, str]] = [
    ("heron", 5, OK),
    ("heron \udcff", 5, OK),
    ("x" * 4001, 5, REFUSED),
    ("", 5, OK),
    ("\x00heron\x1b", 5, OK),
    ("heron", 0, REFUSED),
    ("heron", 51, REFUSED),
    ("heron", 50, OK),
]
# (tool, raw JSON arguments, the model gets an error)
TOOLS: list[tuple[str, str, bool]] = [
    ("conversation_search", '{"query": "heron"}', False),
    ("conversation_search", '{"query": "\\udcff"}', True),
    ("conversation_search", '{"query": "heron \\ud800"}', False),
    ("conversation_search", '{"query": "heron", "limit": 0}', True),
    ("conversation_search", '{"query": "heron", "limit": 21}', True),
    ("conversation_search", '{"query": "heron", "limit": true}', True),
    ("conversation_search", '{"query": 5}', True),
    ("conversation_search", '{"query": "heron", "user": "bob"}', True),
    ("conversation_search", '{"\\udcff": 1, "query": "x"}', True),
    ("conversation_search", "{}", True),
    ("conversation_search", json.dumps({"query": "y" * 4001}), True),
    ("memory_write", '{"block": 5}', True),
    ("memory_write", '{"block": "Tool: \\udcffyes"}', False),
    ("memory_write", '{"block": ""}', True),  # refused (empty): an error result
    ("memory_write", "{}", True),
    ("memory_write", '{"block": "x", "extra": 1}', True),
    ("memory_delete_all", '{"anything": 1}', True),
]
OPENS = ["a/b", "ü é/😀", "100% sure?", ".", "..", "nul\x00", "tab\t", "x" * 256, "missing"]


def _token(claims: bytes, secret: str = SECRET) -> str:
    """A validly signed HS256 token whatever its claims are."""
    return jwt.api_jws.encode(claims, secret, algorithm="HS256")


TOKENS = [
    "garbage",
    "v1.e30.AAAA",
    "v1.a.b.c",
    _token(b"[1, 2]"),
    _token(b'"ann"'),
    _token(b'{"sub": "a\\u0000b", "exp": 99999999999}'),
    _token(b'{"sub": "ann", "exp": 99999999999}', "another-secret-" * 3),
    _token(b'{"sub": "ann"}'),
    jwt.encode({"sub": "ann", "exp": 99999999999}, None, algorithm="none"),
    SIGNER.issue("ann", ttl=-3600),
    Sessions(SECRET).start("ann")[0],
    "",
]
