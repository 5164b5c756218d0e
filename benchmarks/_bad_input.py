"""The bad-input corpus of benchmarks/reliability.py: hostile texts, ids,
times, tool arguments and tokens, each sent through every interface that
takes it — the Python API, HTTP, MCP over stdio and over HTTP, the CLI. The
Python API's answer is the reference; every other interface must give the
same one (accepted and stored alike, or refused with the same message before
anything is stored), never a 5xx, a traceback or no answer."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx
from _cases import (
    BLOCKS,
    ERROR,
    OK,
    OPENS,
    REFUSED,
    REJECTED,
    SEARCHES,
    SIGNER,
    TOKENS,
    TOOLS,
    TURNS,
    UNAUTHORIZED,
    VERIFIER,
)
from _place import Place, Row
from _server import start, stop
from click.testing import CliRunner

from memoro.cli import cli
from memoro.errors import InvalidInput, Unauthorized

Outcome = tuple[str, Any]


def _surrogate_free(*values: Any) -> bool:
    return all(not any(0xD800 <= ord(c) < 0xE000 for c in str(v)) for v in values)


def _argv_safe(*values: Any) -> bool:
    """Whether a real command line could carry these (no NUL, valid UTF-8)."""
    return all(isinstance(v, str) and "\x00" not in v for v in values) and _surrogate_free(*values)


def _path(conversation: str) -> str:
    # a client would drop a literal "." or ".." segment: send them escaped
    quoted = quote(conversation, safe="")
    return quoted.replace(".", "%2E") if conversation in (".", "..") else quoted


class Stdio:
    """A raw JSON-RPC client of `memoro mcp` (the SDK's own client cannot send
    a lone surrogate, which is the point)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memoro", "mcp"],
            env={**os.environ, **env},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.buffer, self.next_id = b"", 0
        client = {"name": "reliability", "version": "1"}
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}
        self.request("initialize", json.dumps(hello))
        self._send('{"jsonrpc": "2.0", "method": "notifications/initialized"}')

    def _send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: str) -> dict[str, Any] | None:
        """The answer, or None after 20 s without one."""
        self.next_id += 1
        self._send(_rpc(self.next_id, method, params))
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 20
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                return None
            self.buffer += os.read(self.proc.stdout.fileno(), 65536)
        line, self.buffer = self.buffer.split(b"\n", 1)
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def _rpc(id_: int, method: str, params: str) -> str:
    return f'{{"jsonrpc": "2.0", "id": {id_}, "method": "{method}", "params": {params}}}'


def _call(name: str, raw: str) -> str:
    return f'{{"name": "{name}", "arguments": {raw}}}'


def _mcp(answer: dict[str, Any] | None) -> Outcome:
    if answer is None:
        return ERROR, "no answer"
    if "error" in answer:
        return ERROR, answer["error"]
    result = answer["result"]
    text = re.sub(r"\(turn \d+\)", "", result["content"][0]["text"])  # ids differ per user
    return ("tool-error" if result.get("isError") else "tool-ok"), text


def _tool_text(text: str, stored: Callable[[], Any]) -> Outcome:
    """What a memory_write tool text says became of the block."""
    if text.startswith(("Saved.", "No change")):
        return OK, stored()
    if text.startswith("Not saved"):
        return REJECTED, "too_long" if "the limit is" in text else "empty"
    return ERROR, text


MCP_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-06-18",
}
USERS = ("py", "http", "http-tool", "cli", "stdio", "mcp-http")


class Corpus:
    """The interfaces, each acting for its own user on one database."""

    def __init__(self, where: Place, url: str) -> None:
        self.row = Row("bad-input corpus (Python API, HTTP, MCP stdio and HTTP, CLI)")
        self.memoro = where.memoro()
        self.url = url
        self.env = where.env()
        self.stdio = Stdio({**self.env, "MEMORO_LOCAL_USER": "stdio"})
        self.http = {u: httpx.Client(base_url=url, timeout=30) for u in USERS}
        for user, client in self.http.items():
            client.headers["Authorization"] = f"Bearer {SIGNER.issue(user)}"

    def close(self) -> None:
        self.stdio.close()
        for client in self.http.values():
            client.close()
        self.memoro.close()

    def cli(self, *args: str, input: str | None = None) -> tuple[int, str]:
        result = CliRunner().invoke(cli, list(args), input=input, env=self.env)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            return 99, f"{type(result.exception).__name__}: {result.exception}"
        return result.exit_code, result.output

    def post(self, user: str, path: str, raw: str, **headers: str) -> httpx.Response:
        headers = {"Content-Type": "application/json", **headers}
        return self.http[user].post(path, content=raw.encode(), headers=headers)

    def check(
        self, case: str, expected: Outcome, reference: Outcome, answers: dict[str, Outcome]
    ) -> None:
        """The Python API gave ``expected`` (its value when one is given),
        and every other interface the very same answer."""
        self.row.tried += 1 + len(answers)
        if reference[0] != expected[0] or (expected[1] is not None and reference[1] != expected[1]):
            self.row.fail(
                f"{case}: the Python API gave {str(reference)[:120]}, expected {expected}"
            )
        for interface, got in answers.items():
            if reference[0] == REFUSED:
                same = got[0] == REFUSED and str(reference[1]) in str(got[1])
            else:
                same = got == reference
            if not same:
                self.row.fail(f"{case} via {interface}: {str(got)[:120]} ≠ {str(reference)[:120]}")

    @staticmethod
    def answer(response: httpx.Response, accepted: Callable[[], Any]) -> Outcome:
        if response.status_code == 422:
            return REFUSED, response.json()["error"]["message"]
        return (OK, accepted()) if response.is_success else (ERROR, response.status_code)

    def last_turn(self, user: str, conversation: Any, with_time: bool) -> Any:
        try:
            turns = self.memoro.conversation_turns(user, conversation)
        except InvalidInput:
            return None
        if not turns:
            return None
        last = turns[-1]
        return (last.question, last.answer, last.at.isoformat() if with_time else None)

    def block(self, user: str) -> str | None:
        stored = self.memoro.read_block(user)
        return stored.text if stored else None

    def turns(self) -> None:
        for n, (conversation, question, answer, at, expected) in enumerate(TURNS):
            body = {"conversation": conversation, "question": question, "answer": answer, "at": at}

            def stored(user: str, conversation: Any = conversation, at: Any = at) -> Any:
                return self.last_turn(user, conversation, at is not None)

            try:
                self.memoro.record_turn("py", conversation, question, answer, at=at)
                reference: Outcome = (OK, stored("py"))
            except InvalidInput as exc:
                reference = (REFUSED, str(exc))
            except Exception as exc:  # any other error is a failure
                reference = (ERROR, repr(exc))
            response = self.post("http", "/v1/turns", json.dumps(body))
            answers = {"HTTP": self.answer(response, lambda stored=stored: stored("http"))}
            if _argv_safe(conversation):
                stdin = json.dumps({"question": question, "answer": answer, "at": at})
                args = ("turn", "add", "-u", "cli", "-c", conversation, "--no-index")
                code, output = self.cli(*args, input=stdin)
                answers["CLI"] = {0: (OK, stored("cli")), 1: (REFUSED, output)}.get(
                    code, (ERROR, output)
                )
            self.check(f"turn {n}", (expected, None), reference, answers)
            if reference[0] == REFUSED and any(stored(u) for u in ("py", "http", "cli")):
                self.row.fail(f"turn {n}: refused, yet a turn was stored")

    def blocks(self) -> None:
        for n, (text, expected) in enumerate(BLOCKS):
            result = self.memoro.write_block("py", text, writer="user")
            reference: Outcome = (
                (REJECTED, result.outcome.value) if result.rejected else (OK, self.block("py"))
            )
            args = json.dumps({"block": text})
            put = self.http["http"].put(
                "/v1/memory", content=args, headers={"Content-Type": "application/json"}
            )
            answers: dict[str, Outcome] = {
                "HTTP": (REJECTED, put.json()["outcome"])
                if put.status_code == 422
                else self.answer(put, lambda: self.block("http")),
            }
            tool = self.post("http-tool", "/v1/tools/memory_write", f'{{"arguments": {args}}}')
            answers["HTTP tool"] = _tool_text(tool.json()["text"], lambda: self.block("http-tool"))
            for interface, user, said in (
                (
                    "MCP stdio",
                    "stdio",
                    _mcp(self.stdio.request("tools/call", _call("memory_write", args))),
                ),
                ("MCP HTTP", "mcp-http", self.mcp_http("mcp-http", _call("memory_write", args), n)),
            ):
                # a refused write is an error result whose text says why
                refused = said[0] == "tool-error" and str(said[1]).startswith("Not saved")
                answers[interface] = (
                    _tool_text(said[1], lambda user=user: self.block(user))
                    if said[0] == "tool-ok" or refused
                    else said
                )
            if _argv_safe(text):
                code, output = self.cli("memory", "set", "-u", "cli", input=text)
                answers["CLI"] = (
                    (OK, self.block("cli"))
                    if code == 0
                    else (REJECTED, "too_long" if "the limit is" in output else "empty")
                    if code == 1
                    else (ERROR, output)
                )
            want = (OK, None) if expected == "saved" else (REJECTED, expected)
            self.check(f"block {n}", want, reference, answers)

    def mcp_http(self, user: str, params: str, n: int) -> Outcome:
        response = self.post(user, "/mcp", _rpc(n, "tools/call", params), **MCP_HEADERS)
        return (
            _mcp(response.json()) if response.status_code == 200 else (ERROR, response.status_code)
        )

    def searches(self) -> None:
        for n, (query, limit, expected) in enumerate(SEARCHES):
            try:
                hits = self.memoro.search("py", query, limit=limit)
                reference: Outcome = (OK, [h.conversation_id for h in hits])
            except InvalidInput as exc:
                reference = (REFUSED, str(exc))
            answers: dict[str, Outcome] = {}
            if _surrogate_free(query):
                got = self.http["http"].get("/v1/search", params={"q": query, "limit": limit})
                answers["HTTP"] = self.answer(
                    got, lambda got=got: [h["conversation"] for h in got.json()["hits"]]
                )
            if _argv_safe(query) and 1 <= limit <= 50:
                code, output = self.cli(
                    "search", "-u", "cli", query, "--limit", str(limit), "--json"
                )
                answers["CLI"] = (
                    (OK, [h["conversation"] for h in json.loads(output)["hits"]])
                    if code == 0
                    else (REFUSED if code == 1 else ERROR, output)
                )
            self.check(f"search {n}", (expected, None), reference, answers)

    def tools(self) -> None:
        for n, (name, raw, is_error) in enumerate(TOOLS):
            result = self.memoro.execute_tool("py", name, json.loads(raw))
            text = re.sub(r"\(turn \d+\)", "", result.text)
            reference = ("tool-error" if result.is_error else "tool-ok", text)
            got = self.post("http", f"/v1/tools/{name}", f'{{"arguments": {raw}}}')
            body = got.json() if got.is_success else {}
            answers = {
                "HTTP": (
                    (
                        "tool-error" if body["is_error"] else "tool-ok",
                        re.sub(r"\(turn \d+\)", "", body["text"]),
                    )
                    if got.is_success
                    else (ERROR, got.status_code)
                ),
                "MCP stdio": _mcp(self.stdio.request("tools/call", _call(name, raw))),
                "MCP HTTP": self.mcp_http("mcp-http", _call(name, raw), 1000 + n),
            }
            expected = ("tool-error" if is_error else "tool-ok", None)
            self.check(f"tool {n} {name}", expected, reference, answers)

    def opens(self) -> None:
        for n, conversation in enumerate(OPENS):
            try:
                turns = self.memoro.conversation_turns("py", conversation)
                reference: Outcome = (OK, [t.question for t in turns])
            except InvalidInput as exc:
                reference = (REFUSED, str(exc))
            got = self.http["http"].get("/v1/conversations/" + _path(conversation))
            answers = {
                "HTTP": (OK, [])
                if got.status_code == 404
                else self.answer(got, lambda got=got: [t["question"] for t in got.json()])
            }
            if _argv_safe(conversation):
                code, output = self.cli(
                    "conversations", "show", "-u", "cli", conversation, "--json"
                )
                answers["CLI"] = (
                    (OK, [t["question"] for t in json.loads(output)])
                    if code == 0
                    else (OK, [])
                    if "no conversation" in output
                    else (REFUSED if code == 1 else ERROR, output)
                )
            expected = OK if n < 3 or conversation == "missing" else REFUSED
            self.check(f"open {n}", (expected, None), reference, answers)

    def tokens(self) -> None:
        for n, token in enumerate(TOKENS):
            try:
                VERIFIER.verify(token)
                reference: Outcome = (OK, None)
            except Unauthorized:
                reference = (UNAUTHORIZED, None)
            bearer = {"Authorization": f"Bearer {token}"} if token else {}
            with httpx.Client(base_url=self.url, timeout=30) as anonymous:
                api = anonymous.get("/v1/memory", headers=bearer)
                rpc = _rpc(1, "tools/list", "{}")
                mcp = anonymous.post("/mcp", content=rpc, headers={**bearer, **MCP_HEADERS})
                page = anonymous.get("/login", params={"token": token})
            answers: dict[str, Outcome] = {}
            for interface, response in (("HTTP", api), ("MCP HTTP", mcp), ("login page", page)):
                challenged = response.headers.get("WWW-Authenticate", "").startswith("Bearer")
                answers[interface] = (
                    (UNAUTHORIZED, None)
                    if response.status_code == 401 and challenged
                    else (ERROR, response.status_code)
                )
            if "text/html" not in page.headers.get("content-type", ""):
                answers["login page"] = (ERROR, "not a readable page")
            self.check(f"token {n}", (UNAUTHORIZED, None), reference, answers)


def corpus(where: Place) -> Row:
    """Every case through every interface that takes it."""
    where.fresh()
    memoro = where.indexer()
    for user in USERS:
        memoro.record_turn(user, "birds", "the heron by the river", "grey and tall")
        for conversation in OPENS[:3]:
            memoro.record_turn(user, conversation, f"in {conversation}", "ok")
    memoro.index_pending()
    memoro.close()
    url, server = start(where.env())
    run = Corpus(where, url)
    try:
        for part in (run.turns, run.blocks, run.searches, run.tools, run.opens, run.tokens):
            try:
                part()
            except Exception as exc:  # a crash of the corpus itself is a failure too
                run.row.tried += 1
                run.row.fail(f"{part.__name__}: {exc!r}")
    finally:
        run.close()
        stop(server)
    return run.row
