"""What every stored turn passes, live or imported, pure: the id checks,
the input policy (``memoro.inputs``) for its text and time, the size limit,
and a key from its content for imports that bring none.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from memoro import inputs
from memoro.errors import InvalidInput, InvalidUser
from memoro.models import NewTurn

MAX_TURN_CHARS = 1_000_000
MAX_TITLE = 500
"""Characters of a conversation's title kept (a title is shown in lists)."""


def check_user(user_id: object) -> str:
    """Return ``user_id`` if it can name a user, else raise InvalidUser."""
    return inputs.check_id(user_id, "user", InvalidUser)


def check_conversation(conversation_id: object) -> str:
    """Return ``conversation_id`` if it can name a conversation."""
    return inputs.check_id(conversation_id, "conversation")


def now() -> datetime:
    return datetime.now(UTC)


def checked_turn(turn: NewTurn, at: object, *, keyed: bool = False) -> NewTurn:
    """``turn``, ended ``at`` (as the caller wrote it: a datetime, an ISO
    8601 string or None for now), as the input policy (memoro.inputs) stores
    it — with a key from its content when ``keyed`` and it has none — else
    InvalidInput."""
    conversation_id = check_conversation(turn.conversation_id)
    key = None if turn.key is None else inputs.check_id(turn.key, "turn key")
    question, answer = turn.question, turn.answer
    if not isinstance(question, str) or not isinstance(answer, str):
        raise InvalidInput("question and answer must be strings")
    if len(question) + len(answer) > MAX_TURN_CHARS:
        raise InvalidInput(f"a turn holds at most {MAX_TURN_CHARS:,} characters")
    question, answer = inputs.clean_text(question), inputs.clean_text(answer)
    if not (question.strip() or answer.strip()):
        raise InvalidInput("a turn needs a question or an answer")
    given = inputs.turn_time(at)
    if key is None and keyed:
        stamp = given.isoformat() if given else None
        content = json.dumps([conversation_id, question, answer, stamp])
        import hashlib  # for imported turns alone

        key = "import:" + hashlib.sha256(content.encode()).hexdigest()
    title = turn.title
    if title is not None:
        if not isinstance(title, str):
            raise InvalidInput("a conversation's title must be a string")
        title = " ".join(inputs.clean_text(title).split())[:MAX_TITLE] or None
    return NewTurn(conversation_id, question, answer, given or now(), key, title)
