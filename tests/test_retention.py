"""Retention (the hardening issue's optional part): with MEMORO_RETAIN_DAYS
set, the worker deletes every user's conversations whose newest turn is
older than that, as the user's own deletion would (C6 at once, the purge
after, D4), and keeps the rest, on both backends; on PostgreSQL only the
worker role can reach across users to do it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memoro.errors import ConfigError
from memoro.service import Memoro
from memoro.settings import Settings
from memoro.store.sqlite import SqliteStore
from memoro.testing import HashEmbedder
from tests.test_store_postgres_roles import roles  # noqa: F401 - a fixture

NOW = datetime.now(UTC)
OLD = NOW - timedelta(days=400)


def _record(service: Memoro, user: str) -> None:
    """An old conversation, a recent one, and one that began long ago but
    went on recently."""
    service.record_turn(user, "old", f"{user} planned the heron survey", "ok", at=OLD)
    service.record_turn(user, "old", f"{user} counted herons twice", "ok", at=OLD)
    service.record_turn(user, "new", f"{user} planned the otter survey", "ok", at=NOW)
    service.record_turn(user, "revived", f"{user} asked about kingfishers", "ok", at=OLD)
    service.record_turn(user, "revived", f"{user} saw a kingfisher again", "ok", at=NOW)


def _conversations(service: Memoro, user: str) -> list[str]:
    return sorted(c.id for c in service.list_conversations(user))


def test_conversations_past_the_period_are_deleted_for_every_user(history: Memoro) -> None:
    for user in ("ann", "bob"):
        _record(history, user)
    history.index_pending()
    assert "old" in {h.conversation_id for h in history.search("ann", "herons")}
    assert history.store.expire_conversations(NOW - timedelta(days=365)) == 2
    for user in ("ann", "bob"):
        # gone from search and lists at once, before the purge (C6)
        assert _conversations(history, user) == ["new", "revived"]
        assert {h.conversation_id for h in history.search(user, "herons")} <= {"new", "revived"}
        assert history.search(user, "otter survey")
        assert history.conversation_turns(user, "old") == []
    history.index_pending()  # the purges
    assert history.store.expire_conversations(NOW - timedelta(days=365)) == 0
    assert _conversations(history, "ann") == ["new", "revived"]
    # an id past retention is usable again at once
    history.record_turn("ann", "old", "a fresh start", "ok")
    assert "old" in _conversations(history, "ann")


def test_a_turn_recorded_after_the_listing_keeps_its_conversation(
    history: Memoro, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep lists a user's old conversations, then deletes them one by
    one: a turn recorded in between (acknowledged, at now) into a listed
    conversation must keep it and be kept — the age is tested again by the
    deletion itself, in its own transaction."""
    for n in range(10):
        history.record_turn("ann", f"old-{n}", f"heron count {n}", "ok", at=OLD)
    history.index_pending()  # the sweep visits users with an indexed turn
    store = history.store
    delete = store.delete_conversation
    acknowledged = {}

    def between(user_id: str, conversation_id: str, **options: Any) -> bool:
        if conversation_id in {"old-0", "old-3", "old-9"}:  # the hook: a turn arrives now
            turn = history.record_turn(user_id, conversation_id, "a live question", "answer")
            acknowledged[conversation_id] = turn
        return delete(user_id, conversation_id, **options)

    monkeypatch.setattr(store, "delete_conversation", between)
    assert store.expire_conversations(NOW - timedelta(days=365)) == 7
    assert _conversations(history, "ann") == ["old-0", "old-3", "old-9"]
    for conversation_id, turn in acknowledged.items():
        turns = history.conversation_turns("ann", conversation_id)
        assert [t.question for t in turns] == [
            conversation_id.replace("old-", "heron count "),
            "a live question",
        ]
        assert turns[-1].id == turn.turn_id
    history.index_pending()  # the purges of the seven
    assert _conversations(history, "ann") == ["old-0", "old-3", "old-9"]
    assert history.search("ann", "live question", mode="keyword")


def test_the_worker_applies_the_period_it_is_given(tmp_path: Path) -> None:
    def service(days: int) -> Memoro:
        settings = Settings(home=tmp_path, retain_days=days)
        store = SqliteStore(tmp_path / "memoro.db")
        return Memoro(store, settings, embedder=HashEmbedder(), worker=False)

    kept = service(0)  # 0 keeps everything for ever
    _record(kept, "ann")
    kept.index_pending()
    assert _conversations(kept, "ann") == ["new", "old", "revived"]
    kept.close()

    longer = service(500)
    longer.index_pending()
    assert _conversations(longer, "ann") == ["new", "old", "revived"]
    longer.close()

    year = service(365)
    year.index_pending()  # a worker's first sweep comes at once
    assert _conversations(year, "ann") == ["new", "revived"]
    year.close()
    # purged from the file too (D4): none of its text is left in any row
    conn = SqliteStore(tmp_path / "memoro.db").db.connect()
    assert (
        conn.execute("SELECT count(*) FROM turns WHERE question LIKE '%heron%'").fetchone()[0] == 0
    )
    assert conn.execute("SELECT count(*) FROM conversations WHERE id = 'old'").fetchone()[0] == 0


def test_only_the_worker_role_reaches_across_users_on_postgresql(
    roles: tuple[Memoro, Memoro],  # noqa: F811 - the fixture imported above
) -> None:
    app, worker = roles
    cutoff = NOW + timedelta(days=1)  # every conversation is older than this
    assert app.store.expire_conversations(cutoff) == 0  # the app role sees no user to visit
    assert _conversations(app, "ann") == ["kept"]
    assert worker.store.expire_conversations(cutoff) == 2  # ann's and bob's "kept"
    assert _conversations(app, "ann") == _conversations(app, "bob") == []


@pytest.mark.parametrize("value", ["x", "-1", "1.5", "36501", " 7"])
def test_a_period_that_is_not_a_whole_number_of_days_is_refused(value: str) -> None:
    with pytest.raises(ConfigError, match="MEMORO_RETAIN_DAYS must be a whole number"):
        Settings.from_env({"MEMORO_RETAIN_DAYS": value})


def test_the_period_is_read_from_the_environment() -> None:
    assert Settings.from_env({"MEMORO_RETAIN_DAYS": "30"}).retain_days == 30
    assert Settings.from_env({}).retain_days == 0
