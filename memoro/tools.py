"""The tools the model can call, each defined once here. The OpenAI
and Anthropic shapes (and, later, MCP's) are derived from these definitions;
``execute`` runs a call for the authenticated user it is handed and
returns the text the model reads, which every front end shows unchanged.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memoro import block, inputs
from memoro.errors import InvalidInput, UnknownTool
from memoro.models import (
    SEARCH_DEFAULT,
    Conversation,
    DeleteResult,
    Outcome,
    SearchHits,
    Writer,
    WriteResult,
    utc_text,
)
from memoro.prompt import memory_section
from memoro.words import plural


class Memoro(Protocol):
    """What the tools need from the service (``memoro.service.Memoro``);
    declared here so that the tools depend on no front end or service."""

    def write_block(
        self, user_id: str, text: str, *, writer: Writer, epoch: int | None = None
    ) -> WriteResult: ...

    def delete_block(
        self, user_id: str, *, writer: Writer, epoch: int | None = None
    ) -> DeleteResult: ...

    def search(
        self,
        user_id: str,
        query: str,
        *,
        limit: int,
        after: str | None = None,
        before: str | None = None,
    ) -> SearchHits: ...

    def recent_conversations(
        self, user_id: str, *, limit: int, before: str | None = None
    ) -> list[Conversation]: ...


@dataclass(frozen=True)
class ToolResult:
    """What a tool call returns to the model."""

    text: str
    is_error: bool = False

    def __str__(self) -> str:
        return self.text


class _BadArguments(Exception):
    pass


@dataclass(frozen=True)
class ToolSpec:
    """A tool as a model sees it: name, description and the JSON Schema of
    its arguments, in each provider's shape."""

    name: str
    description: str
    parameters: dict[str, Any]

    def openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def anthropic(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.parameters}


class Arguments(BaseModel):
    """A tool's arguments: the fields give the JSON Schema the model reads
    and validate what it sends; ``problems`` says, per field, what a bad
    value must be instead (the model reads it and tries again)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    problems: ClassVar[dict[str, str]] = {}

    @classmethod
    def schema_for_models(cls) -> dict[str, Any]:
        """The JSON Schema of the arguments, without pydantic's titles; an
        optional argument shows its type alone (leaving it out is how a
        model says "none")."""
        schema = cls.model_json_schema()
        properties = {
            name: _without_null({k: v for k, v in field.items() if k != "title"})
            for name, field in schema.get("properties", {}).items()
        }
        return {
            "type": "object",
            "properties": properties,
            "required": schema.get("required", []),
            "additionalProperties": False,
        }


def _without_null(field: dict[str, Any]) -> dict[str, Any]:
    """``{"anyOf": [X, {"type": "null"}], "default": None, …}`` as X with
    the rest (description…), without the null default."""
    options = field.get("anyOf")
    if not options or {"type": "null"} not in options or len(options) != 2:
        return field
    (kept,) = (o for o in options if o != {"type": "null"})
    rest = {k: v for k, v in field.items() if k != "anyOf" and not (k == "default" and v is None)}
    return {**kept, **rest}


Run = Callable[[Memoro, str, Any, "int | None"], "str | ToolResult"]
"""A tool's body ``(memoro, user_id, arguments, epoch)``: the text the model
reads, or a ToolResult when it may be an error (a refused write). ``epoch``
is the user's epoch when the work making the call began (a chat turn), which
its writes hand on: once the user is erased since, they raise UserErased and
store nothing; None checks nothing."""


@dataclass(frozen=True, kw_only=True)
class Tool(ToolSpec):
    """One of memoro's tools: its spec, its arguments and how to run it for
    a user."""

    arguments: type[Arguments]
    run: Run
    without_user: str | None = None
    """What the tool returns when the user could not be confirmed; ``None``
    makes that an error."""


def tool(
    arguments: type[Arguments], description: str, *, without_user: str | None = None
) -> Callable[[Run], Tool]:
    """Make a typed function ``(memoro, user_id, arguments, epoch) -> text``
    (or a ToolResult) a Tool
    named after it, its schema and validation from ``arguments``."""

    def define(run: Run) -> Tool:
        return Tool(
            run.__name__,
            description,
            arguments.schema_for_models(),
            arguments=arguments,
            run=run,
            without_user=without_user,
        )

    return define


# -- rendering results as the text the model reads ---------------------------


def _line_list(prefix: str, found: tuple[str, ...]) -> list[str]:
    return [f"{prefix} {line}" if line.strip() else f"{prefix} (blank line)" for line in found]


def render_write(result: WriteResult) -> str:
    """The text a write returns, to the model and to every other caller."""
    section = memory_section(result.block)
    if result.outcome is Outcome.UNCHANGED:
        return (
            "No change: the block you sent is identical to the stored block; nothing was"
            f" written.\n\n{section}"
        )
    if result.rejected:
        return "\n".join(result.warnings) + f"\n\nThe stored block:\n{section}"
    parts = [
        f"Saved. {plural(len(result.removed), 'line')} removed,"
        f" {plural(len(result.added), 'line')} added."
    ]
    if result.removed:
        parts.append(
            "Removed lines — check that each removal was intended; if one was not, write"
            " the block again with that line restored:"
        )
        parts += _line_list("-", result.removed)
    else:
        parts.append("Removed lines: none.")
    if result.added:
        parts.append("Added lines:")
        parts += _line_list("+", result.added)
    parts.append(f"\nThe block as your system prompt now shows it:\n{section}")
    return "\n".join(parts)


def render_delete(result: DeleteResult) -> str:
    if not result.deleted:
        return "There was no personal memory to delete; nothing changed."
    return (
        f"Deleted the whole personal memory block ({plural(result.removed_count, 'line')})."
        " Nothing is remembered about the user now. This cannot be undone."
    )


def window_text(after: str | None, before: str | None) -> str:
    """A search's time window in words, as the caller wrote its bounds."""
    if after and before:
        return f" from {after} to before {before}"
    if after:
        return f" from {after} on"
    if before:
        return f" before {before}"
    return ""


NO_MATCH = (
    "No past conversation matches {query}{window}: nothing said before is close enough to it."
    " Answer from this conversation, or ask the user; do not guess what was said before."
)
"""What a search that found nothing says, to the model and on every other
interface."""


def render_search(
    query: str, hits: SearchHits, after: str | None = None, before: str | None = None
) -> str:
    """The text a conversation search returns."""
    notes = "".join(f"Note: {w}\n" for w in hits.warnings)
    window = window_text(after, before)
    if not hits:
        return notes + NO_MATCH.format(query=repr(query), window=window)
    parts = [f"{notes}Found {plural(len(hits), 'past turn')} for {query!r}{window}, best first:"]
    for i, hit in enumerate(hits, 1):
        when = utc_text(hit.at)
        place = "" if hit.seq is None else f" (turn {hit.seq})"  # its place in its conversation
        parts.append(f"\n{i}. conversation {hit.conversation_id!r}, {when}{place}:")
        parts.append(block.without_controls(hit.text))
    return "\n".join(parts)


def render_recent(conversations: list[Conversation], before: str | None = None) -> str:
    """The text ``recent_conversations`` returns."""
    window = window_text(None, before)
    if not conversations:
        return f"There are no past conversations{window}."
    n = len(conversations)
    head = "latest conversation" if n == 1 else f"{n:,} latest conversations"
    parts = [f"The user's {head}{window}{'' if n == 1 else ', latest first'}:"]
    for i, c in enumerate(conversations, 1):
        title = f" {block.without_controls(c.title)!r}" if c.title else ""
        span = utc_text(c.first_at)
        if c.last_at != c.first_at:
            span += f" to {utc_text(c.last_at)}"
        parts.append(f"\n{i}. conversation {c.id!r}{title}: {plural(c.turns, 'turn')}, {span}")
        if c.preview:
            parts.append(f"   First line: {block.without_controls(c.preview)}")
    return "\n".join(parts)


def describe(name: str, text: str, is_error: bool) -> str:
    """What a tool call did, in words for the person watching (the Chat page,
    ``memoro chat``), from the result the model read."""
    first = text.split("\n", 1)[0]
    if name == "memory_write":
        if first.startswith("Not saved: "):
            return "Memory not saved: " + first.removeprefix("Not saved: ")
        if is_error:
            return "Memory not changed: " + first.removeprefix("Error: ")
        saved = re.match(r"Saved\. ([\d,]+) lines? removed, ([\d,]+) lines? added", first)
        if saved:
            removed, added = (int(n.replace(",", "")) for n in saved.groups())
            done = [f"removed {plural(removed, 'line')}"] if removed else []
            done += [f"added {plural(added, 'line')}"] if added else []
            return "Memory saved: " + (", ".join(done) or "no line changed")
        if first.startswith("No change"):
            return "Memory unchanged: the assistant wrote the same block again"
        return "Memory not saved: " + first.removeprefix("Not saved: ")
    if name == "memory_delete_all":
        if text.startswith("Deleted"):
            return "Memory cleared: everything remembered was deleted"
        return "Memory not cleared: " + first.removeprefix("Error: ")
    if name == "conversation_search":
        if is_error:
            return "Search refused: " + first.removeprefix("Error: ")
        found = re.match(r"(?:Note: .*\n)*Found (\d+) past turns? for (.*), best first:", text)
        if found:
            return (
                f"Searched past conversations for {found[2]}: {plural(int(found[1]), 'turn')} found"
            )
        missed = re.search(r"^No past conversation matches (.*?): nothing said before", text, re.M)
        if missed:
            return f"Searched past conversations for {missed[1]}: nothing found"
        return "Searched past conversations: " + first
    if name == "recent_conversations":
        if is_error:
            return "Listing refused: " + first.removeprefix("Error: ")
        listed = re.match(r"The user's (?:latest conversation|([\d,]+) latest conversations)", text)
        if listed:
            n = int((listed[1] or "1").replace(",", ""))
            return f"Listed the latest conversations: {plural(n, 'conversation')}"
        return "Listed the latest conversations: none"
    return f"Used {name}" + (f" (failed: {first.removeprefix('Error: ')})" if is_error else "")


# -- the tools ---------------------------------------------------------------


SEARCH_MAX = 20
"""The most past turns one search returns to the model (fewer than the
service allows, so results fit the model's context)."""


class MemoryWrite(Arguments):
    problems = {"block": "'block' must be a string: the whole new block"}

    block: str = Field(description="The entire new personal memory block, as it should be stored.")


class MemoryDeleteAll(Arguments):
    pass


BOUND = (
    "an ISO 8601 date (2025-01-31: its first moment) or date-time (2025-01-31T14:00:00Z);"
    " UTC unless it carries an offset"
)


class ConversationSearch(Arguments):
    problems = {
        "query": "'query' must be a non-empty string",
        "limit": f"'limit' must be a whole number from 1 to {SEARCH_MAX}",
        "after": f"'after' must be {BOUND}",
        "before": f"'before' must be {BOUND}",
    }

    query: str = Field(description="What to look for: words, an exact ID, or a description.")
    limit: int = Field(
        default=SEARCH_DEFAULT,
        ge=1,
        le=SEARCH_MAX,
        description=f"How many past turns to return (1–{SEARCH_MAX}, default {SEARCH_DEFAULT}).",
    )
    after: str | None = Field(
        default=None,
        description=f"Only turns at or after this time: {BOUND}. Leave out for no lower bound.",
    )
    before: str | None = Field(
        default=None,
        description=f"Only turns before this time (not at it): {BOUND}. Yesterday is"
        " after=<yesterday's date>, before=<today's date>. Leave out for no upper bound.",
    )

    @field_validator("query")
    @classmethod
    def _not_blank(cls, query: str) -> str:
        if not query.strip():
            raise ValueError("blank")
        return query


@tool(
    MemoryWrite,
    description=f"""\
Replace the user's personal memory block with the whole block you send. The block is shown \
at the end of your system prompt on every turn of every conversation with this user; \
nothing else you say survives the end of this conversation.

Call it in the same turn in which the user gives or corrects the name they want to be called, \
or another lasting fact — "I'll remember" without this call stores nothing.

Rules:
- Send the entire block you want to end up with, not only the new line: keep every line \
that still holds. If a line already covers the fact, edit that line instead of adding another.
- Do not write anything tied to one date, one ticket or one question ("focusing on project A \
this week").
- Write an account or ID in an outside system only when it is confirmed, by that service's \
current-user tool or by a lookup keyed on the user's whole login address; never a guessed ID \
or one spelled almost the same.
- The limit is {block.LIMIT:,} characters. A longer block is rejected, not cut, and nothing \
changes: merge or shorten lines and write again.
- An empty block is not saved; to forget everything, use memory_delete_all.

The result lists the lines this write removed and added. Read the removed lines and make sure \
each removal was intended.""",
)
def memory_write(memoro: Memoro, user_id: str, args: MemoryWrite, epoch: int | None) -> ToolResult:
    result = memoro.write_block(user_id, args.block, writer=Writer.MODEL, epoch=epoch)
    # refused (empty or over the limit): an error, so neither host nor model takes it for a save
    return ToolResult(render_write(result), is_error=result.rejected)


@tool(
    MemoryDeleteAll,
    description="""\
Delete the user's whole personal memory block. Use it only when the user asks you to forget \
everything about them. It cannot be undone. To remove or change some lines, use memory_write \
with the lines that should stay.""",
)
def memory_delete_all(
    memoro: Memoro, user_id: str, args: MemoryDeleteAll, epoch: int | None
) -> str:
    return render_delete(memoro.delete_block(user_id, writer=Writer.MODEL, epoch=epoch))


@tool(
    ConversationSearch,
    description="""\
Search this user's past conversations. Earlier conversations are not in your context; call \
this when the user refers to something discussed before ("that query we wrote last time", \
"as I told you last week") or when an answer depends on what was said then, instead of \
guessing or asking again. Keyword and semantic search run together, so both exact strings \
(IDs, names, error messages) and paraphrases are found. Returns the best-matching past turns, \
each with its conversation, time and text, best first — or says that nothing matches, when no \
past turn is close enough: then nothing relevant was said before. When the user names a time \
("yesterday", "last March"), pass it as after / before, worked out from today's date in your \
system prompt. Only this user's conversations are searched.""",
    without_user="No past conversations are available: the user could not be confirmed.",
)
def conversation_search(
    memoro: Memoro, user_id: str, args: ConversationSearch, epoch: int | None
) -> str:
    hits = memoro.search(
        user_id, args.query, limit=args.limit, after=args.after, before=args.before
    )
    return render_search(args.query, hits, args.after, args.before)


RECENT_MAX = 20
"""The most conversations one listing returns to the model."""


class RecentConversations(Arguments):
    problems = {
        "limit": f"'limit' must be a whole number from 1 to {RECENT_MAX}",
        "before": f"'before' must be {BOUND}",
    }

    limit: int = Field(
        default=10,
        ge=1,
        le=RECENT_MAX,
        description=f"How many conversations to list (1–{RECENT_MAX}, default 10).",
    )
    before: str | None = Field(
        default=None,
        description=f"List the conversations as they stood before this time: {BOUND}."
        " Leave out for the latest.",
    )


@tool(
    RecentConversations,
    description="""\
List this user's latest past conversations, latest first: each with its id, title (if it has \
one), number of turns, first and last time, and its first line. Use it for "what did we talk \
about yesterday / last time?"; with before, the conversations as they stood before that time. \
To read what was said in one, call conversation_search with after / before around its times.""",
    without_user="No past conversations are available: the user could not be confirmed.",
)
def recent_conversations(
    memoro: Memoro, user_id: str, args: RecentConversations, epoch: int | None
) -> str:
    found = memoro.recent_conversations(user_id, limit=args.limit, before=args.before)
    return render_recent(found, args.before)


MEMORY_WRITE = memory_write
MEMORY_DELETE_ALL = memory_delete_all
CONVERSATION_SEARCH = conversation_search
RECENT_CONVERSATIONS = recent_conversations

TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (MEMORY_WRITE, MEMORY_DELETE_ALL, CONVERSATION_SEARCH, RECENT_CONVERSATIONS)
}


def openai_tools() -> list[dict[str, Any]]:
    """memoro's tools in the OpenAI function-calling format."""
    return [tool.openai() for tool in TOOLS.values()]


def anthropic_tools() -> list[dict[str, Any]]:
    """memoro's tools in the Anthropic tool-use format."""
    return [tool.anthropic() for tool in TOOLS.values()]


def _arguments(tool: Tool, arguments: Mapping[str, Any] | str | None) -> Arguments:
    if arguments is None or arguments == "":
        arguments = {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments, strict=False)
        except json.JSONDecodeError as exc:
            raise _BadArguments(f"the arguments are not valid JSON ({exc.msg})") from None
    if not isinstance(arguments, Mapping):
        raise _BadArguments("the arguments must be a JSON object")
    args: dict[str, Any] = inputs.clean_json(arguments)  # text as on every path
    try:
        return tool.arguments.model_validate(args)
    except ValidationError as exc:
        raise _BadArguments(_problem(tool, exc)) from None


def checked_arguments(tool: Tool, arguments: Mapping[str, Any] | str | None) -> Arguments:
    """The arguments of a call to ``tool``, checked as a call the model makes
    in a chat is; InvalidInput says what is wrong, in words it can act on."""
    try:
        return _arguments(tool, arguments)
    except _BadArguments as exc:
        raise InvalidInput(str(exc)) from None


def _problem(tool: Tool, exc: ValidationError) -> str:
    """The first thing wrong with the arguments, in words the model can act on."""
    errors = exc.errors()
    unknown = sorted(str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden")
    if unknown:
        known = tool.parameters["properties"]
        return (
            f"unknown argument(s) {', '.join(unknown)}; {tool.name} takes only"
            f" {', '.join(known) or 'no arguments'}. The user is always the one in this"
            " conversation and cannot be chosen"
        )
    missing = [str(e["loc"][0]) for e in errors if e["type"] == "missing"]
    if missing:
        return f"missing argument(s): {', '.join(missing)}"
    name = str(errors[0]["loc"][0])
    return tool.arguments.problems.get(name, f"{name!r}: {errors[0]['msg']}")


def tool_named(name: str) -> Tool:
    """The tool called ``name``, else UnknownTool."""
    tool = TOOLS.get(name)
    if tool is None:
        raise UnknownTool(f"memoro has no tool named {name!r}; its tools are {', '.join(TOOLS)}")
    return tool


def execute(
    memoro: Memoro,
    user_id: str | None,
    name: str,
    arguments: Mapping[str, Any] | str | None,
    *,
    epoch: int | None = None,
) -> ToolResult:
    """Run the tool ``name`` for ``user_id`` (``None``: not confirmed). Bad
    arguments come back as an error result the model can read and correct.
    With ``epoch`` (see Run), a write for a user erased since raises
    UserErased: the work making the call is cancelled, not the model told."""
    tool = tool_named(name)
    if user_id is None:
        if tool.without_user is not None:
            return ToolResult(tool.without_user)
        return ToolResult(
            "Error: the user could not be confirmed, so nothing was changed.", is_error=True
        )
    try:
        out = tool.run(memoro, user_id, _arguments(tool, arguments), epoch)
    except (_BadArguments, InvalidInput) as exc:
        return ToolResult(f"Error: {exc}. Nothing was changed.", is_error=True)
    return out if isinstance(out, ToolResult) else ToolResult(out)
