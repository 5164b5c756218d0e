"""The two development sets of conversation search, each turned into memoro
data by the recipe of ``shared/data/README.md`` (so numbers are comparable
with the README's reference points):

- **LoCoMo** (a JSON list of ``sample_id`` / ``conversation`` / ``qa``): one
  user per conversation, one memoro conversation per session, a turn = two
  consecutive messages ("<speaker>: <text> [shares: <caption>]"), the
  session's date as the turn's time; hits are the turns holding an evidence
  ``dia_id``. Folds: leave one conversation (= user) out.
- **LongMemEval S** (gzipped JSON, items with ``question_id`` /
  ``haystack_sessions``): one user per question, one conversation per
  haystack session (its ``haystack_dates`` entry as the turn's time, UTC), a
  turn = a user message and the assistant message right after it (a message
  without such a partner is a turn alone); hits are the turns holding a
  ``has_answer`` message, sessions the ``answer_session_ids``; ``_abs``
  (abstention) questions and questions without a ``has_answer`` turn are not
  scored — their haystacks are still ingested, as users whose history does
  not hold the answer. Folds: leave one question type out (every question
  is its own user, so the question types are the distinct kinds of need a
  ranking has to carry across; five types teach, the sixth is scored).

Each scorable question is a dict: ``user``, ``question``, ``category``,
``turns`` (relevant turn ids), ``sessions``, ``turn_session``, ``fold`` and
``date`` (when the question is asked, for LongMemEval; None for LoCoMo).
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memoro import Memoro
from memoro.models import NewTurn

LOCOMO_CATEGORIES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
LONGMEMEVAL_TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "knowledge-update",
    "temporal-reasoning",
)
ALL_BUT_ADVERSARIAL = "all but adversarial"
"""LoCoMo's usual primary metric leaves adversarial questions out."""


@dataclass(frozen=True)
class DataSet:
    name: str
    categories: tuple[str, ...]
    fold_by: str
    """What one fold leaves out: "conversation" or "question type"."""
    ingest: Callable[[Memoro, list[dict[str, Any]]], list[dict[str, Any]]]
    extra_groups: tuple[str, ...] = ()
    """Overall groups besides "overall" (LoCoMo: all but adversarial)."""


def read(path: Path) -> tuple[DataSet, list[dict[str, Any]]]:
    """The data set in ``path`` (either format, told apart by its items)."""
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as f:
            data = json.load(f)
    else:
        data = json.loads(path.read_text("utf-8"))
    if not isinstance(data, list) or not data:
        raise SystemExit(f"{path}: expected a JSON list of LoCoMo or LongMemEval items")
    if "question_id" in data[0]:
        return LONGMEMEVAL, data
    if "sample_id" in data[0]:
        return LOCOMO, data
    raise SystemExit(f"{path}: neither LoCoMo (sample_id) nor LongMemEval (question_id) items")


# -- LoCoMo ----------------------------------------------------------------


def evidence_ids(raw: list[str]) -> list[str]:
    """Normalise evidence ids: split "D8:6; D9:17", fix "D:11:26", "D30:05"."""
    found = []
    for item in raw:
        for part in re.split(r"[;,\s]+", item):
            match = re.fullmatch(r"D:?(\d+):0*(\d+)", part.strip())
            if match:
                found.append(f"D{int(match[1])}:{int(match[2])}")
    return found


def message_text(message: dict[str, Any]) -> str:
    text = f"{message['speaker']}: {message['text']}"
    if message.get("blip_caption"):
        text += f" [shares: {message['blip_caption']}]"
    return text


def session_time(text: str) -> datetime:
    return datetime.strptime(text, "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def ingest_locomo_sample(
    memoro: Memoro, sample: dict[str, Any]
) -> tuple[dict[str, int], dict[int, int]]:
    """Record one LoCoMo conversation as one user; return dia_id → turn id
    and turn id → session number."""
    user = sample["sample_id"]
    conversation = sample["conversation"]
    dia_turn: dict[str, int] = {}
    turn_session: dict[int, int] = {}
    n = 1
    while f"session_{n}" in conversation:
        messages = conversation[f"session_{n}"]
        at = session_time(conversation[f"session_{n}_date_time"])
        for i in range(0, len(messages), 2):
            pair = messages[i : i + 2]
            question = message_text(pair[0])
            answer = message_text(pair[1]) if len(pair) > 1 else ""
            recorded = memoro.record_turn(
                user, f"session_{n}", question, answer, at=at, key=f"{user}:{pair[0]['dia_id']}"
            )
            turn_session[recorded.turn_id] = n
            for message in pair:
                dia_turn[message["dia_id"]] = recorded.turn_id
        n += 1
    return dia_turn, turn_session


def ingest_locomo(memoro: Memoro, data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    questions = []
    for sample in data:
        dia_turn, turn_session = ingest_locomo_sample(memoro, sample)
        for qa in sample["qa"]:
            turns = {dia_turn[i] for i in evidence_ids(qa["evidence"]) if i in dia_turn}
            if not turns:
                continue
            questions.append(
                {
                    "user": sample["sample_id"],
                    "question": qa["question"],
                    "category": LOCOMO_CATEGORIES[qa["category"]],
                    "turns": turns,
                    "sessions": {turn_session[t] for t in turns},
                    "turn_session": turn_session,
                    "fold": sample["sample_id"],
                    "date": None,
                }
            )
    return questions


LOCOMO = DataSet(
    "LoCoMo",
    tuple(LOCOMO_CATEGORIES.values()),
    "conversation",
    ingest_locomo,
    extra_groups=(ALL_BUT_ADVERSARIAL,),
)


# -- LongMemEval -------------------------------------------------------------


def lme_time(text: str) -> datetime:
    """``"2023/05/20 (Sat) 02:21"``, read as UTC."""
    return datetime.strptime(text, "%Y/%m/%d (%a) %H:%M").replace(tzinfo=UTC)


def lme_turns(session: list[dict[str, Any]]) -> list[tuple[str, str, bool]]:
    """(question, answer, holds an answer) of each turn of a session."""
    turns = []
    i = 0
    while i < len(session):
        message = session[i]
        partner = session[i + 1] if i + 1 < len(session) else None
        if message["role"] == "user" and partner is not None and partner["role"] == "assistant":
            pair = [message, partner]
            question, answer = message["content"], partner["content"]
        else:
            pair = [message]
            question, answer = (
                (message["content"], "") if message["role"] == "user" else ("", message["content"])
            )
        turns.append((question, answer, any(m.get("has_answer") for m in pair)))
        i += len(pair)
    return turns


def ingest_longmemeval(memoro: Memoro, data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    questions = []
    for item in data:
        user = item["question_id"]
        new: list[NewTurn] = []
        where: list[tuple[str, bool]] = []  # (session id, holds an answer) of each turn
        for index, (session_id, date, session) in enumerate(
            zip(
                item["haystack_session_ids"],
                item["haystack_dates"],
                item["haystack_sessions"],
                strict=True,
            )
        ):
            at = lme_time(date)
            for n, (question, answer, has) in enumerate(lme_turns(session)):
                if not (question.strip() or answer.strip()):
                    continue
                new.append(NewTurn(session_id, question, answer, at, key=f"{index}:{n}"))
                where.append((session_id, has))
        recorded = memoro.import_turns(user, new)
        turn_session = {r.turn_id: s for r, (s, _) in zip(recorded, where, strict=True)}
        turns = {r.turn_id for r, (_, has) in zip(recorded, where, strict=True) if has}
        if user.endswith("_abs") or not turns:
            continue
        questions.append(
            {
                "user": user,
                "question": item["question"],
                "category": item["question_type"],
                "turns": turns,
                "sessions": set(item["answer_session_ids"]),
                "turn_session": turn_session,
                "fold": item["question_type"],
                "date": lme_time(item["question_date"]),
            }
        )
    return questions


LONGMEMEVAL = DataSet("LongMemEval", LONGMEMEVAL_TYPES, "question type", ingest_longmemeval)
