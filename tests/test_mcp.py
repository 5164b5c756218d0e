"""memoro over MCP with the SDK's own client: in process, over stdio (a real
subprocess) and over streamable HTTP (a real socket)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from anyio.streams.text import TextReceiveStream
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from memoro import tools
from memoro.auth import Signer
from memoro.mcp_server import MEMORY_URI, MemoroMCP
from memoro.prompt import memory_section
from memoro.service import Memoro
from memoro.web.security import AuthConfig
from tests.web_server import SECRET, running

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _text(result: Any) -> str:
    return str(result.content[0].text)


async def test_tools_are_listed_exactly_as_in_the_openai_and_anthropic_shapes(
    web_service: Memoro,
) -> None:
    async with Client(MemoroMCP(web_service, user="ann")) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    openai = {t["function"]["name"]: t["function"] for t in tools.openai_tools()}
    anthropic = {t["name"]: t for t in tools.anthropic_tools()}
    assert set(listed) == set(openai) == set(anthropic)
    for name, tool in listed.items():
        assert tool.description == openai[name]["description"] == anthropic[name]["description"]
        assert tool.input_schema == openai[name]["parameters"] == anthropic[name]["input_schema"]


async def test_one_definition_changes_all_three_shapes(
    web_service: Memoro, monkeypatch: pytest.MonkeyPatch
) -> None:
    changed = dataclasses.replace(tools.MEMORY_WRITE, description="changed in one place")
    monkeypatch.setitem(tools.TOOLS, "memory_write", changed)
    async with Client(MemoroMCP(web_service, user="ann")) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    assert listed["memory_write"].description == "changed in one place"
    assert tools.openai_tools()[0]["function"]["description"] == "changed in one place"
    assert tools.anthropic_tools()[0]["description"] == "changed in one place"


async def test_write_read_back_and_the_rules_warnings(web_service: Memoro) -> None:
    async with Client(MemoroMCP(web_service, user="ann")) as client:
        await client.call_tool("memory_write", {"block": "Name: Ann\nTeam: blue"})
        result = await client.call_tool("memory_write", {"block": "Name: Annie\nTeam: blue"})
        assert not result.is_error
        assert "- Name: Ann\n" in _text(result) and "+ Name: Annie\n" in _text(result)
        too_long = await client.call_tool("memory_write", {"block": "x" * 4001})
        assert too_long.is_error and "Cut at least 1 character" in _text(too_long)
        empty = await client.call_tool("memory_write", {"block": " "})
        assert empty.is_error and "memory_delete_all" in _text(empty)
        resource = await client.read_resource(MEMORY_URI)
        expected = memory_section("Name: Annie\nTeam: blue")
        assert resource.contents[0].text == expected
        prompt = await client.get_prompt("personal_memory")
        assert prompt.messages[0].content.text == expected
    assert web_service.read_block("ann").text == "Name: Annie\nTeam: blue"  # type: ignore[union-attr]


async def test_the_tool_text_is_the_same_as_every_other_path(web_service: Memoro) -> None:
    async with Client(MemoroMCP(web_service, user="ann")) as client:
        via_mcp = _text(await client.call_tool("memory_write", {"block": "x" * 4100}))
    assert via_mcp == web_service.execute_tool("ann", "memory_write", {"block": "x" * 4100}).text


async def test_search_finds_a_recorded_turn_and_arguments_cannot_pick_a_user(
    web_service: Memoro,
) -> None:
    web_service.record_turn("ann", "c1", "my kayak is called Otter", "nice")
    web_service.record_turn("bob", "c1", "bob's kayak is called Heron", "ok")
    web_service.index_pending()
    async with Client(MemoroMCP(web_service, user="ann")) as client:
        found = _text(await client.call_tool("conversation_search", {"query": "kayak"}))
        assert "Otter" in found and "Heron" not in found
        spoof = await client.call_tool("conversation_search", {"query": "kayak", "user": "bob"})
        assert spoof.is_error and "Heron" not in _text(spoof)


async def test_over_stdio_with_a_real_subprocess(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "MEMORO_HOME": str(tmp_path),
        "MEMORO_EMBEDDER": "keyword",
        "MEMORO_LOCAL_USER": "desk",
    }
    params = StdioServerParameters(command=sys.executable, args=["-m", "memoro", "mcp"], env=env)
    async with Client(params) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == set(tools.TOOLS)
        written = _text(await client.call_tool("memory_write", {"block": "Editor: vim"}))
        assert written.startswith("Saved.") and "+ Editor: vim" in written
        resource = await client.read_resource(MEMORY_URI)
        assert resource.contents[0].text.endswith("Editor: vim")
    with Memoro.open(tmp_path, embedder=None, worker=False) as check:
        assert check.read_block("desk").text == "Editor: vim"  # type: ignore[union-attr]


SURROGATE_CALLS = [
    ("memory_write", '{"block": "Editor: vim\\udcff"}'),
    ("conversation_search", '{"query": "\\ud800"}'),
    ("memory_write", '{"\\udfff": 1}'),
]


def _rpc(id_: int, name: str, arguments: str) -> str:
    params = f'{{"name": "{name}", "arguments": {arguments}}}'
    return f'{{"jsonrpc": "2.0", "id": {id_}, "method": "tools/call", "params": {params}}}'


async def test_over_stdio_a_lone_surrogate_in_arguments_is_answered_like_everywhere(
    tmp_path: Path,
) -> None:
    """The SDK's parser refuses the escape and used to drop the message: the
    host waited forever. Each call is now answered, as the HTTP API answers."""
    env = {
        **os.environ,
        "MEMORO_HOME": str(tmp_path),
        "MEMORO_EMBEDDER": "keyword",
        "MEMORO_LOCAL_USER": "desk",
    }
    proc = await anyio.open_process([sys.executable, "-m", "memoro", "mcp"], env=env)
    assert proc.stdin is not None and proc.stdout is not None
    lines = TextReceiveStream(proc.stdout)
    buffered = ""

    async def answer() -> dict[str, Any]:
        nonlocal buffered
        with anyio.fail_after(30):
            while "\n" not in buffered:
                buffered += await lines.receive()
        line, buffered = buffered.split("\n", 1)
        reply: dict[str, Any] = json.loads(line)
        return reply

    async def send(text: str) -> None:
        await proc.stdin.send((text + "\n").encode())  # type: ignore[union-attr]

    try:
        client = {"name": "raw", "version": "1"}
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}
        await send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello}))
        assert "result" in await answer()
        await send('{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        texts = []
        for i, (name, arguments) in enumerate(SURROGATE_CALLS, 1):
            await send(_rpc(i, name, arguments))
            reply = await answer()
            assert reply["id"] == i
            texts.append(reply["result"]["content"][0]["text"])
    finally:
        proc.kill()
        await proc.aclose()
    assert texts[0].startswith("Saved.") and "+ Editor: vim\n" in texts[0]
    assert texts[1] == "Error: 'query' must be a non-empty string. Nothing was changed."
    assert texts[2].startswith("Error: unknown argument(s)")
    with Memoro.open(tmp_path, embedder=None, worker=False) as check:
        assert check.read_block("desk").text == "Editor: vim"  # type: ignore[union-attr]
        expected = [check.execute_tool("other", n, json.loads(a)).text for n, a in SURROGATE_CALLS]
    assert [texts[1], texts[2]] == expected[1:]


def test_over_http_a_lone_surrogate_in_arguments_is_answered_as_over_stdio(
    token_url: str,
) -> None:
    headers = {
        "Authorization": f"Bearer {Signer(SECRET).issue('ann')}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-06-18",
    }
    for i, (name, arguments) in enumerate(SURROGATE_CALLS, 1):
        response = httpx.post(
            f"{token_url}/mcp", content=_rpc(i, name, arguments), headers=headers, timeout=60
        )
        assert response.status_code == 200, response.text
        text = response.json()["result"]["content"][0]["text"]
        assert text.startswith(("Saved.", "Error: 'query' must", "Error: unknown argument"))


@pytest.fixture
def token_url(web_service: Memoro) -> Iterator[str]:
    with running(web_service, AuthConfig.build("token", SECRET, "local")) as url:
        yield url


@asynccontextmanager
async def _http_client(url: str, user: str) -> AsyncIterator[Client]:
    token = Signer(SECRET).issue(user)
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
    ):
        yield client


async def test_over_http_two_tokens_never_see_each_other(token_url: str) -> None:
    async with _http_client(token_url, "ann") as ann:
        await ann.call_tool("memory_write", {"block": "Ann's secret: blue door"})
    async with _http_client(token_url, "bob") as bob:
        resource = await bob.read_resource(MEMORY_URI)
        assert "blue door" not in resource.contents[0].text
        assert "(0/4,000 characters)" in resource.contents[0].text
        cleared = _text(await bob.call_tool("memory_delete_all", {}))
        assert cleared.startswith("There was no personal memory")
    async with _http_client(token_url, "ann") as ann:
        resource = await ann.read_resource(MEMORY_URI)
        assert resource.contents[0].text.endswith("Ann's secret: blue door")


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer not-a-token", f"Bearer {Signer(SECRET).issue('ann', ttl=-3600)}"],
    ids=["missing", "garbage", "expired"],
)
def test_over_http_a_missing_or_bad_token_is_refused(
    token_url: str, authorization: str | None
) -> None:
    headers = {"Accept": "application/json, text/event-stream"}
    if authorization:
        headers["Authorization"] = authorization
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    response = httpx.post(f"{token_url}/mcp", json=body, headers=headers, timeout=60)
    assert response.status_code == 401


async def test_the_printed_host_config_runs_the_server_on_this_shells_data(
    tmp_path: Path,
) -> None:
    """A host starts `memoro mcp` with its own environment: the config that
    `memoro mcp --config` prints carries MEMORO_HOME and the other settings."""
    shell = {**os.environ, "MEMORO_HOME": str(tmp_path / "data"), "MEMORO_EMBEDDER": "keyword"}
    printed = subprocess.run(
        [sys.executable, "-m", "memoro", "mcp", "--config"],
        env=shell,
        capture_output=True,
        text=True,
        check=True,
    )
    server = json.loads(printed.stdout)["mcpServers"]["memoro"]
    assert server["args"] == ["mcp"]
    assert server["env"] == {"MEMORO_HOME": str(tmp_path / "data"), "MEMORO_EMBEDDER": "keyword"}
    params = StdioServerParameters(
        command=server["command"], args=server["args"], env=server["env"]
    )
    async with Client(params) as client:
        await client.call_tool("memory_write", {"block": "Editor: helix"})
    with Memoro.open(tmp_path / "data", embedder=None, worker=False) as check:
        assert check.read_block("local").text == "Editor: helix"  # type: ignore[union-attr]
