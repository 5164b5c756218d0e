"""What the framework adapters' tests share: memoro embedded or behind a
real server (the remote client over loopback HTTP), the system prompt a
scripted model was sent, the turns a user has, and a docs page's first
example run as it is written."""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memoro.auth import Signer
from memoro.cli import cli
from memoro.client import MemoroClient
from memoro.prompt import memory_section
from memoro.service import Memoro
from memoro.testing import ScriptedLLM
from memoro.web.security import AuthConfig
from tests.web_server import SECRET, running

DOCS = Path(__file__).parents[2] / "docs" / "integrations"
KINDS = ["embedded", "remote"]


@dataclass
class Memories:
    memory: Any
    """What the adapter is given: the embedded Memoro or a MemoroClient."""
    service: Memoro
    """The service behind it, to read what was stored and run indexing."""


def serve(kind: str, service: Memoro) -> Iterator[Memories]:
    """``service`` as it is, or behind a real server on loopback reached by
    the remote client, which signs a token for each user it acts for."""
    if kind == "embedded":
        yield Memories(service, service)
        return
    with (
        running(service, AuthConfig.build("token", SECRET, "local")) as url,
        MemoroClient(url, Signer(SECRET).issue) as client,
    ):
        yield Memories(client, service)


def system_text(body: dict[str, Any]) -> str:
    """The system prompt of one model request: the Responses API's
    ``instructions``, or the system messages of a Chat Completions request."""
    if "input" in body:
        return str(body.get("instructions") or "")
    return "\n\n".join(
        str(m["content"]) for m in body["messages"] if m["role"] in ("system", "developer")
    )


def ends_with_block(body: dict[str, Any], block: str | None) -> bool:
    """The request's system prompt ends with this block under its header,
    then the line with today's date."""
    pattern = (
        re.escape(memory_section(block)) + r"\n\nToday is [A-Za-z]+, \d{4}-\d{2}-\d{2} \(UTC\)\.$"
    )
    return re.search(pattern, system_text(body)) is not None


def tool_outputs(body: dict[str, Any]) -> list[str]:
    """The tool results a request hands back to the model, in order."""
    if "input" in body:
        items = body["input"] if isinstance(body["input"], list) else []
        return [str(i["output"]) for i in items if i.get("type") == "function_call_output"]
    return [str(m["content"]) for m in body["messages"] if m["role"] == "tool"]


def offered(body: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """The tools a request offers: name → (description, JSON Schema)."""
    found = {}
    for tool in body.get("tools", []):
        spec = tool.get("function", tool)
        found[spec["name"]] = (spec.get("description"), spec["parameters"])
    return found


def run_first_example(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm: ScriptedLLM
) -> Memoro:
    """Execute the first Python block of ``docs/integrations/<page>`` as it
    is written, with MEMORO_HOME in ``tmp_path`` and the OpenAI-compatible
    client pointed at ``llm``; return the memory it opened."""
    text = (DOCS / page).read_text("utf-8")
    code = re.search(r"```python\n(.*?)```", text, re.S)
    assert code, f"{page} has no python example"
    monkeypatch.setenv("MEMORO_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_BASE_URL", llm.openai_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    namespace: dict[str, Any] = {"__name__": "__example__"}
    exec(compile(code[1], page, "exec"), namespace)
    memory = namespace["memory"]
    assert isinstance(memory, Memoro)
    return memory


CHECK = "## Check it worked"
_TIME = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC")


def check_section(page: str) -> tuple[list[str], str]:
    """The commands of the section ``docs/integrations/<page>`` ends with,
    which show that its example worked, and the output the page says they
    print."""
    text = (DOCS / page).read_text("utf-8")
    _, found, section = text.rpartition(f"\n{CHECK}\n")
    assert found, f"{page} does not end with a {CHECK!r} section"
    assert "\n## " not in section, f"{CHECK!r} is not the last section of {page}"
    commands = re.search(r"```sh\n(.*?)```", section, re.S)
    printed = re.search(r"```text\n(.*?)```", section, re.S)
    assert commands and printed, f"{page}: {CHECK!r} needs the commands and what they print"
    lines = [line.split("#")[0].strip() for line in commands[1].splitlines()]
    return [line for line in lines if line], printed[1]


def check_it_worked(page: str, home: Path) -> None:
    """Run the commands a page ends with, as a newcomer would after its
    example (with the same MEMORO_HOME), and compare what they print with
    what the page shows (any time matches a time; tabs print as spaces)."""
    commands, shown = check_section(page)
    printed = ""
    for command in commands:
        words = shlex.split(command)
        assert words[0] == "memoro", command
        result = CliRunner().invoke(cli, words[1:], env={"MEMORO_HOME": str(home)})
        assert result.exit_code == 0, result.output
        printed += result.stdout

    def plain(text: str) -> str:
        return re.sub(r"[ \t]+", " ", _TIME.sub("<time>", text))

    assert plain(printed) == plain(shown)


def indexed(memory: Memoro, deadline: float = 60.0) -> None:
    """Wait until the background worker has indexed every recorded turn."""
    end = time.monotonic() + deadline
    while memory.pending_jobs():
        assert time.monotonic() < end, "the turns were never indexed"
        time.sleep(0.01)


def assert_block_last(body: dict[str, Any], block: str | None) -> None:
    """A Chat Completions request's system prompt ends with this block,
    its system messages all come before the conversation, and no user
    message carries the block."""
    assert ends_with_block(body, block)
    roles = [m["role"] for m in body["messages"]]
    begun = next((i for i, r in enumerate(roles) if r not in ("system", "developer")), len(roles))
    assert not {"system", "developer"} & set(roles[begun:]), "a system message mid-conversation"
    for message in body["messages"]:
        if message["role"] == "user":
            assert "Personal memory (" not in str(message["content"])


def turns(service: Memoro, user_id: str) -> list[tuple[str, str]]:
    """Every recorded turn of a user, oldest conversation first."""
    return [
        (turn.question, turn.answer)
        for conversation in reversed(service.list_conversations(user_id))
        for turn in service.conversation_turns(user_id, conversation.id)
    ]
