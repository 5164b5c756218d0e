"""What the session logs of coding-agent hosts (Claude Code, Codex CLI)
share, pure but for reading a file: a log is read line by line into turns,
each given out once it is finished and on the branch the user is on; the
reading's state is plain JSON, so it can go on later from where it stopped;
and which host wrote a log. The formats themselves: ``claude_code.py`` and
``codex.py``.

A turn is finished when the log says so (the host's end-of-turn line, or
Codex's answer labelled final), when a later prompt follows it, or when the
log has been quiet for ``SETTLE_SECONDS`` (``STALE_SECONDS`` while a tool
call still waits for its result). Until then it is not given out: its key
would keep a half-written answer out for good. For an import (the file as
it is, read once) a log that writes no end-of-turn lines — Codex CLI's
releases of late 2025 write none — has its last turn finished once its
visible answer is written: an answer came after its last tool call, no
call waits, and the answer is not labelled as commentary.
"""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import IO, Any, ClassVar, NamedTuple

from memoro.errors import InvalidInput
from memoro.imports import logfiles
from memoro.imports.logfiles import Overlong, Skim, read_lines
from memoro.imports.model import ImportedConversation, ImportedTurn, Tally
from memoro.imports.source import Source, json_members
from memoro.imports.times import BadTime, parse

SETTLE_SECONDS = 600.0
"""A log unchanged this long: its last turn is over (no host thinks for ten
minutes without writing a line)."""
STALE_SECONDS = 86_400.0
"""…unless a tool call waits for its result (a long build, say): then a day."""
TITLE_CHARS = 80
"""A title made from a first prompt: its first line, cut at a word."""

# Claude Code's own titles outrank a summary, which outranks a first prompt
PROMPT_TITLE, SUMMARY_TITLE, AI_TITLE, CUSTOM_TITLE = range(4)


@dataclass
class Opened:
    """A prompt and what answers it so far, until the turn is given out."""

    key: str
    conversation: str
    question: str
    at: object
    """The prompt's time as the log wrote it (parsed when given out)."""
    command: bool = False
    """A slash command: a turn only when the assistant answered it."""
    answers: list[str] = field(default_factory=list)
    answered_at: object = None
    ended: bool = False
    waiting: list[str] = field(default_factory=list)
    """Tool calls of this turn still waiting for their result."""
    tools_after: bool = False
    """A tool call or result came after its last answer: the model goes on."""
    tentative: bool = False
    """Its last answer is labelled commentary: more follows."""


class SessionLog:
    """One log file read into turns. A subclass reads its host's lines
    (``feed``); this class keeps the turns in the making, the prompts'
    branches and the titles, and gives turns out (``finish``)."""

    provider: ClassVar[str]

    def __init__(self, name: str) -> None:
        self.name = name
        self.opened: dict[str, Opened] = {}
        self.chain: dict[str, str | None] = {}
        """Every prompt's key → the prompt before it on its branch."""
        self.latest: str | None = None
        """The prompt the user is at: the branch ends there."""
        self.titles: dict[str, tuple[int, str]] = {}
        self.tools: dict[str, str] = {}
        """Tool calls waiting for a result → the key of their turn."""
        self.marks_ends = False
        """The log has said a turn ended (so it says so of every turn)."""
        self.lost: set[str] = set()
        """Prompts on lines too long to read: on the branch, never stored."""

    def feed(self, number: int, raw: Any, tally: Tally) -> None:
        """Read line ``number`` of the log (JSON already parsed)."""
        raise NotImplementedError

    def passed(self, skim: Skim, tally: Tally) -> None:
        """A line too long to read was passed over; ``skim`` is what its
        top level said (a format whose entries link to one another keeps
        the link it was)."""

    # -- for the formats ------------------------------------------------------

    def open(
        self,
        key: str,
        conversation: str,
        question: str,
        at: object,
        previous: str | None,
        *,
        command: bool = False,
    ) -> None:
        """A new prompt, after ``previous`` on its branch: the user is now there."""
        if key in self.chain:  # the same prompt again (a copy in a resumed log)
            return
        self.opened[key] = Opened(key, conversation, question, at, command)
        self.chain[key] = previous
        self.latest = key
        first_line = question.strip().split("\n", 1)[0] if question.strip() else ""
        if first_line and conversation not in self.titles:
            self.titles[conversation] = (PROMPT_TITLE, _short(first_line))

    def open_lost(self, key: str, previous: str | None) -> None:
        """A prompt on a line too long to read, after ``previous`` on its
        branch: its turn is lost, the branch goes on through it."""
        if key in self.chain:
            return
        self.chain[key] = previous
        self.latest = key
        self.lost.add(key)

    def answer(
        self, key: str | None, text: str, at: object, tally: Tally, *, tentative: bool = False
    ) -> None:
        """Visible reply text for the turn ``key`` opened (``tentative``:
        labelled as commentary, an answer still to come)."""
        if not text.strip():
            return
        if key is None:
            tally.skipped["replies to no prompt in the log"] += 1
        elif (turn := self.opened.get(key)) is not None:
            turn.answers.append(text)
            turn.answered_at = at or turn.answered_at
            turn.tools_after, turn.tentative = False, tentative
        elif key in self.lost:
            tally.skipped["replies to a prompt on a line too long to read"] += 1
        else:
            tally.skipped["replies written after their turn was stored"] += 1

    def end(self, key: str | None, *, marker: bool = True) -> None:
        """The turn ``key`` is over: the log says so (``marker``), or the
        user interrupted it."""
        self.marks_ends = self.marks_ends or marker
        if key is not None and (turn := self.opened.get(key)) is not None:
            turn.ended = True

    def call(self, key: str | None, call_id: object) -> None:
        """A tool call of turn ``key`` that waits for its result."""
        turn = self.opened.get(key) if key is not None else None
        if turn is not None:
            turn.tools_after = True
            if isinstance(call_id, str) and call_id:
                turn.waiting.append(call_id)
                self.tools[call_id] = turn.key

    def result(self, call_id: object) -> None:
        """A tool call's result came."""
        if isinstance(call_id, str) and (key := self.tools.pop(call_id, None)) is not None:
            turn = self.opened.get(key)
            if turn is not None and call_id in turn.waiting:
                turn.waiting.remove(call_id)
                turn.tools_after = True

    def title(self, conversation: str, text: object, rank: int) -> None:
        """A title the log gives a conversation; a higher ``rank`` wins, the
        later of two alike."""
        if isinstance(text, str) and text.strip():
            held = self.titles.get(conversation)
            if held is None or rank >= held[0]:
                self.titles[conversation] = (rank, " ".join(text.split()))

    def rewind(self, turns: int) -> None:
        """The user took back the last ``turns`` prompts of the branch."""
        for _ in range(max(turns, 0)):
            if self.latest is None:
                return
            self.latest = self.chain.get(self.latest)

    # -- giving turns out -----------------------------------------------------

    @property
    def waiting(self) -> bool:
        """Whether a turn is still being written (or not yet given out)."""
        return bool(self.opened)

    def finish(
        self, quiet: float, tally: Tally, *, whole: bool = False
    ) -> list[ImportedConversation]:
        """The turns finished by now — the log unchanged for ``quiet``
        seconds (``math.inf``: a log that is complete) — that lie on the
        branch the user is on, each given out once. Finished turns off the
        branch (edited or rewound away) are dropped and counted. ``whole``:
        the log is imported as it is (not followed), so in a log without
        end-of-turn lines a turn whose visible answer is written is finished."""
        seen: set[str] = set()
        at = self.latest
        while at is not None and at not in seen:
            seen.add(at)
            at = self.chain.get(at)
        found: dict[str, list[ImportedTurn]] = {}
        for key, turn in list(self.opened.items()):
            done = (
                key != self.latest
                or turn.ended
                or quiet >= STALE_SECONDS
                or (quiet >= SETTLE_SECONDS and not turn.waiting)
                or (whole and self._answered(turn))
            )
            if not done:
                continue
            del self.opened[key]
            for call_id in turn.waiting:
                self.tools.pop(call_id, None)
            if key not in seen:
                tally.skipped["turns rewound or edited away"] += 1
            elif turn.command and not turn.answers:
                tally.skipped["commands without a reply"] += 1
            elif (made := _turn(turn, tally)) is not None:
                found.setdefault(turn.conversation, []).append(made)
        return [
            ImportedConversation(c, self.titles.get(c, (0, None))[1], turns)
            for c, turns in found.items()
        ]

    def _answered(self, turn: Opened) -> bool:
        """Whether ``turn``'s visible answer is written, in a log that
        never says when a turn ends."""
        return (
            not self.marks_ends
            and bool(turn.answers)
            and not (turn.waiting or turn.tools_after or turn.tentative)
        )

    # -- state ------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """Everything needed to go on reading later, as JSON."""
        return {
            "opened": [asdict(turn) for turn in self.opened.values()],
            "chain": self.chain,
            "latest": self.latest,
            "titles": self.titles,
            "tools": self.tools,
            "marks_ends": self.marks_ends,
            "lost": sorted(self.lost),
        }

    def restore(self, state: dict[str, Any]) -> None:
        self.opened = {t["key"]: Opened(**t) for t in state["opened"]}
        self.chain = dict(state["chain"])
        self.latest = state["latest"]
        self.titles = {c: (int(r), str(t)) for c, (r, t) in state["titles"].items()}
        self.tools = dict(state["tools"])
        self.marks_ends = bool(state.get("marks_ends", False))
        self.lost = set(state.get("lost", []))


def _turn(turn: Opened, tally: Tally) -> ImportedTurn | None:
    answer = "\n\n".join(turn.answers)
    if not turn.question.strip() and not answer.strip():
        return None
    try:
        at = parse(turn.answered_at) or parse(turn.at)
    except BadTime as exc:
        tally.fail(turn.key, str(exc))
        return None
    return ImportedTurn(turn.key, turn.question, answer, at)


def _short(line: str) -> str:
    line = " ".join(line.split())
    if len(line) <= TITLE_CHARS:
        return line
    cut = line[:TITLE_CHARS].rsplit(" ", 1)[0] or line[:TITLE_CHARS]
    return cut.rstrip(" ,.;:") + "…"


# -- reading a log ---------------------------------------------------------------


def json_line(raw: bytes, first: bool = False) -> tuple[Any, str | None]:
    """A line's JSON value, or why it is none."""
    try:
        return json.loads(raw.decode("utf-8-sig" if first else "utf-8")), None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"not a JSON line ({exc})"
    except RecursionError:
        return None, "nested too deep"


@dataclass
class Fed:
    """What ``feed_stream`` read."""

    read: int = 0
    """Bytes of the lines read (a line too long to read included)."""
    lines: int = 0
    rest: bytes = b""
    """A last line without its line break, left unread: it may still be
    being written."""
    skipping: Skim | None = None
    """It stopped inside a line too long to read (its end not written yet,
    or a stop came): the next read goes on passing over it, from this."""
    done: bool = True
    """It read to the end (else it stopped at its budget, between lines)."""


def feed_stream(
    stream: IO[bytes],
    log: SessionLog,
    tally: Tally,
    *,
    first: int = 1,
    skipping: Skim | None = None,
    budget: int | None = None,
    stop: Callable[[], bool] | None = None,
) -> Fed:
    """Feed ``log`` the complete lines of ``stream`` (numbered from
    ``first``), up to about ``budget`` bytes. A line longer than
    ``MAX_LINE_BYTES`` is passed over and counted as a problem, and what
    its top level said is given to the log; ``stop`` is asked while
    passing over one."""
    fed = Fed(skipping=skipping)  # nothing more written yet: still inside that line
    number = first - 1
    for raw in read_lines(stream, skipping=skipping, stop=stop):
        if isinstance(raw, Overlong):
            fed.read += raw.size
            fed.skipping = None if raw.ended else raw.skim
            if raw.start:
                tally.fail(
                    f"{log.name}:{number + 1}",
                    f"{logfiles.too_long()}, passed over",
                )
            if not raw.ended:
                fed.done = not raw.stopped
                return fed
            log.passed(raw.skim, tally)
            fed.lines += 1
            number += 1
        elif not raw.endswith(b"\n"):
            fed.rest = raw
            return fed
        else:
            fed.read += len(raw)
            fed.lines += 1
            number += 1
            if raw.strip():
                value, why = json_line(raw, number == 1)
                if why is not None:
                    tally.fail(f"{log.name}:{number}", why)
                elif not isinstance(value, dict):
                    tally.fail(f"{log.name}:{number}", "not a JSON object")
                else:
                    log.feed(number, value, tally)
        if budget is not None and fed.read >= budget:
            fed.done = False
            return fed
    return fed


def read_member(source: Source, member: str, log: SessionLog, tally: Tally) -> None:
    """Feed ``log`` a whole log in ``source``; a last line without its line
    break is read if it is whole JSON (a log that ends so), else left out
    as still being written."""
    with source.stream(member) as stream:
        fed = feed_stream(stream, log, tally)
    if fed.rest.strip():
        value, why = json_line(fed.rest, fed.lines == 0)
        if why is None and isinstance(value, dict):
            log.feed(fed.lines + 1, value, tally)
        else:
            tally.skipped["unfinished last line"] += 1


def read_logs(
    source: Source,
    tally: Tally,
    logs: Mapping[str, Callable[[str], SessionLog]],
    expected: str,
) -> Iterator[ImportedConversation]:
    """The conversations of every log in ``source`` (a log, or a zip of a
    folder of them), each log read whole in its host's format (``logs``:
    host → its reader); a turn still being written is counted, for a later
    import to bring. In a zip each log's host is told from its first lines,
    as in a folder: a file of another host, or of none, is passed over and
    counted. A single log is read in the one format asked for."""
    quiet = quiet_seconds(source, time.time())
    only = next(iter(logs)) if len(logs) == 1 else None
    other: str | None = None
    read_one = untold = False
    for member in json_members(source, re.compile(r"\.jsonl$"), expected):
        host = only if only is not None and not source.is_zip else None
        if host is None:
            sniffed = detect(source, member)
            host = sniffed.host
            if host is None:
                if (why := sniffed.untold()) is not None:
                    tally.fail(member, f"{why}: not read")
                    untold = True
                else:
                    tally.skipped[f"files that are no {only or 'session'} log"] += 1
                continue
        if host not in logs:
            other = other or host
            tally.skipped[f"files that are no {only} log"] += 1
            continue
        reading = logs[host](member)
        read_member(source, member, reading, tally)
        tally.logs[host] += 1
        read_one = True
        for conversation in reading.finish(quiet, tally, whole=True):
            tally.conversations += 1
            yield conversation
        if reading.opened:
            tally.skipped["turns still being written, for a later import"] += len(reading.opened)
    if not read_one and other is not None:
        raise InvalidInput(
            f"{source.name or 'the zip'} looks like a {other} export, not {only}:"
            f" import it as {other} (or auto)"
        )
    if not read_one and not untold:
        raise InvalidInput(f"{source.name or 'the zip'} holds no {expected}")


def quiet_seconds(source: Source, now: float) -> float:
    """How long the file has not changed; an upload or a pipe is taken as
    complete (a copy of a log does not grow)."""
    if source.modified is None:
        return float("inf")
    return max(now - source.modified, 0.0)


# -- which host wrote a log ---------------------------------------------------------

_CLAUDE_KEYS = frozenset({"sessionId", "parentUuid", "leafUuid", "isSidechain"})
_CLAUDE_TYPES = frozenset(
    {"summary", "file-history-snapshot", "queue-operation", "custom-title", "ai-title"}
)
_CODEX_TYPES = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
)
DETECT_LINES = 5
DETECT_BYTES = 2**20
"""What is read of a log to tell its host past a line too long to read."""


def kind(value: object) -> str | None:
    """ "claude-code" or "codex" when a log line is plainly one of theirs."""
    if not isinstance(value, dict):
        return None
    if value.get("type") in _CLAUDE_TYPES or ("type" in value and value.keys() & _CLAUDE_KEYS):
        return "claude-code"
    if value.get("type") in _CODEX_TYPES and isinstance(value.get("payload"), dict):
        return "codex"
    if "record_type" in value or {"id", "timestamp", "instructions"} <= value.keys():
        return "codex"  # the flat rollouts of the first Codex CLI versions
    return None


class Sniffed(NamedTuple):
    host: str | None
    sure: bool
    """Enough was read to tell (a host, or none: its first lines, or what
    was read, say no host's)."""
    long_start: bool = False
    """Its first line is too long to read, and tells no host."""

    def untold(self) -> str | None:
        """Why it is no session log, when that is worth saying."""
        if self.host is None and self.long_start:
            return (
                f"its first line is longer than {logfiles.limit_words()} and tells no host,"
                " nor do the lines read after it"
            )
        return None


def sniff(stream: IO[bytes]) -> Sniffed:
    """Which host wrote the log ``stream`` starts. At most
    ``MAX_LINE_BYTES`` and ``DETECT_BYTES`` are read; a line too long to
    read tells its host by its top level, else the lines after it may."""
    head = stream.read(logfiles.MAX_LINE_BYTES + DETECT_BYTES)
    complete = 0
    long_start = False
    for number, raw in enumerate(read_lines(io.BytesIO(head)), 1):
        if number > DETECT_LINES:
            break
        if isinstance(raw, Overlong):
            if (found := kind(raw.skim.fields)) is not None:
                return Sniffed(found, True)
            long_start = long_start or number == 1
            complete += raw.ended
            continue
        if not raw.endswith(b"\n"):
            break  # being written, or cut off by DETECT_BYTES
        complete += 1
        if raw.strip():
            value, _ = json_line(raw, number == 1)
            if (found := kind(value)) is not None:
                return Sniffed(found, True)
    whole = len(head) == logfiles.MAX_LINE_BYTES + DETECT_BYTES
    return Sniffed(None, complete >= DETECT_LINES or whole, long_start)


def detect_stream(stream: IO[bytes]) -> str | None:
    """Which host wrote the log ``stream`` starts (``sniff``)."""
    return sniff(stream).host


def detect(source: Source, member: str) -> Sniffed:
    with source.stream(member) as stream:
        return sniff(stream)
