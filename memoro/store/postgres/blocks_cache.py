"""Blocks for the prompt fetch, kept in this process's memory and dropped
the moment PostgreSQL says a user's block changed.

Every turn of every chat fetches its user's block, and on PostgreSQL each
read is a round trip through the pool, a thread hop and a database
process: a third of what one SQLite server serves. So each server keeps the
blocks it has read, and a trigger on ``memory_blocks`` (migration 14)
NOTIFYs ``memoro_blocks`` with a digest of the user's id at every commit
that changes one, whichever server, worker or SQL session wrote it.

Why a cached block is current:

* a listener thread, on its own connection, drops a user's entry for each
  notification; every second it notifies itself and listens only while it
  hears that back, so a broken connection, or a pooler that moved LISTEN
  to another session, is noticed within a second; while it is not
  listening (starting, reconnecting, deaf, closed) nothing is cached or
  served from cache, and the cache is emptied each time it starts
  listening again;
* a hit is served only while the listener's socket has nothing unread and
  the listener holds nothing it has read but not yet handled (``_taking``):
  a notification already delivered but not yet handled makes it a miss,
  whether it still waits on the socket, was read off it along with the
  listener's own ping, or is between being read and its entry dropped;
* a block read from the database is kept only if no notification was
  handled while it was being read (``_epoch``), so a read that raced a
  write never puts the old text back;
* this process's own writes drop the user's entry when they commit;
* a hit is served only if the listener heard itself within the last two
  seconds, so a connection that hangs without breaking stops the cache
  within two seconds too.

What remains is the time PostgreSQL takes to deliver a NOTIFY to another
server after the writer's commit returns: well under a millisecond on an
idle database, a few under load; a turn after a settings-page edit comes
far later than that.
"""

from __future__ import annotations

import hashlib
import logging
import select
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import psycopg

from memoro.models import StoredBlock
from memoro.store.base import Known
from memoro.store.postgres._db import ALIVE, one_line

log = logging.getLogger("memoro.store")

CHANNEL = "memoro_blocks"
APPLICATION = "memoro block cache"
"""The listener connection's application_name (pg_stat_activity)."""
_PING = "ping:"
"""Payloads of the listener's own notifications start so (a digest never does)."""
EVERYONE = "*"
"""The payload a TRUNCATE sends: every user's block may have changed."""
HEARTBEAT = 1.0
"""Seconds between the listener's checks that its connection still works."""
_WAKE = 0.1
"""Seconds the listener waits at a time, so closing never waits longer."""
ENTRIES = 10_000
"""Blocks kept, least recently fetched dropped first (≤ 4,000 characters each)."""


def digest(user_id: str) -> str:
    """What a notification names a user by: the trigger's sha256 of the id."""
    return hashlib.sha256(user_id.encode()).hexdigest()


class BlockCache:
    """Current blocks of recently fetched users, for one store."""

    def __init__(self, url: str, entries: int = ENTRIES) -> None:
        self._url = url
        self._entries = entries
        self._blocks: OrderedDict[str, Known] = OrderedDict()
        self._lock = threading.Lock()
        self._epoch = 0
        """Notifications handled (and listener restarts): a read that saw it
        move may have raced a write."""
        self._socket: int | None = None
        """The listener's socket while it is listening, else None."""
        self._taking = False
        """Whether the listener may hold notifications it has read off the
        socket and not handled yet (set before it reads, cleared once it
        has handled all it read)."""
        self._heard_at = 0.0
        """When the listener last heard its own notification (monotonic)."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def get(self, user_id: str) -> Known | None:
        """The user's block if it is known to be current, without waiting."""
        self._start()
        socket = self._socket
        if (
            socket is None
            or self._taking
            or _unread(socket)
            or time.monotonic() > self._heard_at + 2 * HEARTBEAT
        ):
            return None
        key = digest(user_id)
        with self._lock:
            known = self._blocks.get(key)
            if known is not None:
                self._blocks.move_to_end(key)
            return known

    def read(self, user_id: str, read: Callable[[str], StoredBlock | None]) -> StoredBlock | None:
        """``read(user_id)`` from the database, kept for the next fetch when
        no change was announced meanwhile."""
        self._start()
        with self._lock:
            epoch, listening = self._epoch, self._socket is not None
        block = read(user_id)
        if listening:
            with self._lock:
                if self._epoch == epoch and self._socket is not None:
                    self._blocks[digest(user_id)] = Known(block)
                    if len(self._blocks) > self._entries:
                        self._blocks.popitem(last=False)
        return block

    def changed(self, user_id: str) -> None:
        """This process committed a change to the user's block."""
        self._drop(digest(user_id))

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=HEARTBEAT + 5)

    def _start(self) -> None:
        if self._thread is None and not self._stop.is_set():
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._listen, name="memoro-blocks", daemon=True
                    )
                    self._thread.start()

    def _drop(self, key: str) -> None:
        with self._lock:
            self._epoch += 1
            if key == EVERYONE:
                self._blocks.clear()
            else:
                self._blocks.pop(key, None)

    def _listening(self, socket: int | None) -> None:
        """Start or stop serving from the cache, emptied either way."""
        with self._lock:
            self._epoch += 1
            self._blocks.clear()
            self._socket = socket

    def _listen(self) -> None:
        lost = False
        while not self._stop.is_set():
            try:
                with psycopg.connect(
                    self._url, autocommit=True, application_name=APPLICATION, **ALIVE
                ) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    if lost:
                        log.info("the block cache listens again")
                        lost = False
                    self._hear(conn)
            except (psycopg.Error, _Deaf) as exc:
                if not lost and not self._stop.is_set():  # once, not every second it stays so
                    log.warning("the block cache stopped listening: %s", one_line(exc))
                    lost = True
                self._stop.wait(HEARTBEAT)

    def _hear(self, conn: psycopg.Connection[Any]) -> None:
        """Drop the entries each notification names. Every second the
        listener sends itself a notification and serves from the cache only
        while it hears it back: a connection that broke, or a pooler that
        moved the LISTEN to another session, turns the cache off."""
        socket = conn.pgconn.socket
        try:
            while not self._stop.is_set():
                ping = f"{_PING}{uuid.uuid4().hex}"
                # the round trip may read others' notifications off the
                # socket (psycopg keeps them for notifies()): taking from here
                self._taking = True
                conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, ping))
                heard = False
                until = time.monotonic() + HEARTBEAT
                while time.monotonic() < until and not self._stop.is_set():
                    if not self._taking:
                        if not select.select([socket], [], [], _WAKE)[0]:
                            continue
                        self._taking = True  # before the bytes leave the socket
                    for note in conn.notifies(timeout=0):  # what was read, without waiting
                        if note.payload == ping:
                            heard = True
                            self._heard_at = time.monotonic()
                            if self._socket is None:
                                self._listening(conn.pgconn.socket)
                        elif not note.payload.startswith(_PING):
                            self._drop(note.payload)
                    self._taking = False
                if not heard and not self._stop.is_set():
                    raise _Deaf(f"its own notification did not arrive within {HEARTBEAT:g} s")
        finally:
            self._listening(None)
            self._taking = False


class _Deaf(Exception):
    """The listener did not hear its own notification."""


def _unread(socket: int) -> bool:
    """Whether the listener's socket holds bytes it has not read yet."""
    try:
        return bool(select.select([socket], [], [], 0)[0])
    except (OSError, ValueError):  # closed between the check and here
        return True
