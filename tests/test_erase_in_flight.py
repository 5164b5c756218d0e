"""Erasing a user while work of theirs is in flight (A1): after the erase
returns, nothing of the user comes back from work that began before it — an
import in this process or in another, an upload imported by a worker, an
indexing job or a reindex mid-batch, a saved index copy being written — on
SQLite and PostgreSQL. The erase cancels such work instead of waiting for
it: the work stops at its next write with a clear error (no traceback in any
log), and the id takes new work at once. Each erase here comes at a set
point (a hook that runs it on another service and thread and waits for it),
never after a sleep. ``memoro watch`` is in tests/test_watch_erase.py."""

from __future__ import annotations

import io
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from memoro.cli import cli
from memoro.client import MemoroClient
from memoro.errors import Busy, InvalidInput, UserErased
from memoro.imports import upload as upload_module
from memoro.models import NewTurn, UserDeletion
from memoro.service import Memoro
from memoro.settings import Settings
from memoro.store.memory import saved
from memoro.store.sqlite import SqliteStore
from memoro.testing import HashEmbedder
from tests.test_erase import Backend, backend, token_server  # noqa: F401 - fixtures
from tests.test_http import SIGNER, client
from tests.test_store_postgres_roles import roles  # noqa: F401 - a fixture
from tests.test_store_sqlite import upload


def export_of(tmp_path: Path, turns: int, answer: str = "noted") -> bytes:
    """memoro's own export of a user with a block and ``turns`` turns, in
    conversations of 600 (so an import's first batch ends mid-conversation)."""
    home = tmp_path / f"source-{turns}-{len(answer)}"
    with Memoro(
        SqliteStore(home / "memoro.db"), Settings(home=home), embedder=None, worker=False
    ) as source:
        source.write_block("src", "Name: Ann\nBadge: QUOKKA-7", writer="user")
        source.import_turns(
            "src",
            [
                NewTurn(f"c{i // 600}", f"WOMBAT question {i}", f"{answer} {i}", None, f"k{i}")
                for i in range(turns)
            ],
        )
        return "".join(source.export("src")).encode()


class Eraser:
    """Erases a user from another service (another server on the same
    database) on another thread, once, and waits for it to return."""

    def __init__(self, service: Memoro, user: str) -> None:
        self.service, self.user = service, user
        self.deleted: UserDeletion | None = None

    def __call__(self) -> None:
        if self.deleted is not None:
            return

        def erase() -> None:
            self.deleted = self.service.delete_user(self.user)

        thread = threading.Thread(target=erase)
        thread.start()
        thread.join()
        assert self.deleted is not None

    @property
    def done(self) -> bool:
        return self.deleted is not None


def nothing_of(backend: Backend, user: str) -> dict[str, int]:  # noqa: F811
    """The tables that hold a row of ``user``: none, after an erase."""
    return {table: n for table, n in backend.rows_of(user).items() if n}


@pytest.fixture
def services(backend: Backend) -> Iterator[tuple[Memoro, Memoro]]:  # noqa: F811
    """(the service doing the work, the one erasing), on one database."""
    working, erasing = backend.service(), backend.service()
    yield working, erasing
    working.close()
    erasing.close()


def test_an_import_erased_part_way_stores_nothing_more_and_says_so(
    backend: Backend,  # noqa: F811
    services: tuple[Memoro, Memoro],
    tmp_path: Path,
) -> None:
    working, erasing = services
    data = export_of(tmp_path, 1_200)
    erase = Eraser(erasing, "ann")

    def progress(done: int, size: int) -> None:
        erase()  # the set point: after the first batch of 500 was stored

    with pytest.raises(UserErased, match="ann was erased while this import ran, so it was"):
        working.import_file("ann", io.BytesIO(data), progress=progress)
    assert erase.deleted is not None and erase.deleted.turns == 500  # went with the erase
    assert nothing_of(backend, "ann") == {}  # the 700 read after it, and the block: none
    working.index_pending()
    assert nothing_of(backend, "ann") == {}
    # the id takes new work at once: the same import begun now stores it all
    report = working.import_file("ann", io.BytesIO(data))
    assert report.tally.imported == 1_200 and report.block == "restored"
    assert working.read_block("ann") is not None


def test_turns_handed_to_an_import_while_the_user_is_erased_are_not_stored(
    backend: Backend,  # noqa: F811
    services: tuple[Memoro, Memoro],
) -> None:
    working, erasing = services
    working.record_turn("ann", "live", "a live turn", "ok")
    erase = Eraser(erasing, "ann")

    def turns() -> Iterator[NewTurn]:
        for i in range(900):
            if i == 300:
                erase()  # the iterator the import reads waits for the erase
            yield NewTurn(f"c{i % 3}", f"WOMBAT {i}", "ok", None, f"k{i}")

    with pytest.raises(UserErased, match="ann was erased while this import ran"):
        working.import_turns("ann", turns())
    assert nothing_of(backend, "ann") == {}
    assert len(working.import_turns("ann", turns())) == 900  # new work after the erase


@pytest.mark.parametrize("when", ["after a batch", "between two parts"])
def test_an_upload_a_worker_imports_is_cancelled_by_an_erase(
    backend: Backend,  # noqa: F811
    services: tuple[Memoro, Memoro],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    when: str,
) -> None:
    """The worker reads the stored upload a part (1 MiB) at a time: what
    it had read before the erase is not stored after it, and the parts the
    erase took are no failure with a traceback but the cancelled import."""
    worker, server = services
    # one part, held whole by the reader, or two parts (1 MiB each at most)
    data = export_of(tmp_path, 1_200, answer="x" * (10 if when == "after a batch" else 900))
    assert (len(data) > 1 << 20) == (when == "between two parts")
    import_id = upload(server, "ann", "export.json", data)
    erase = Eraser(server, "ann")
    if when == "after a batch":
        record = worker.store.record_turns

        def recorded(*args: Any, **options: Any) -> Any:
            try:
                return record(*args, **options)
            finally:
                erase()

        monkeypatch.setattr(worker.store, "record_turns", recorded)
    else:
        part = worker.store.upload_part

        def read(user_id: str, import_id: str, number: int) -> bytes | None:
            if number == 1:
                erase()
            return part(user_id, import_id, number)

        monkeypatch.setattr(worker.store, "upload_part", read)
    with caplog.at_level(logging.INFO, logger="memoro"):
        worker.index_pending()
    assert erase.done
    assert nothing_of(backend, "ann") == {}
    assert server.import_status("ann", import_id) is None  # erased with the rest
    assert f"import {import_id} was cancelled: its user was erased" in caplog.text
    assert [
        r.getMessage() for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR
    ] == []
    monkeypatch.undo()
    again = upload(server, "ann", "export.json", export_of(tmp_path, 20))  # the id, at once
    worker.index_pending()
    assert server.import_status("ann", again).status.value == "done"  # type: ignore[union-attr]
    assert len(server.conversation_turns("ann", "c0")) == 20


@pytest.mark.parametrize("when", ["while it arrives", "as it begins"])
def test_an_upload_cut_short_by_an_erase_says_its_user_was_erased(
    backend: Backend,  # noqa: F811
    services: tuple[Memoro, Memoro],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    when: str,
) -> None:
    """It said "the upload was dropped before it finished" (a 422, as for a
    stale upload's sweep); and an erase between the upload taking the
    user's epoch and storing its first row let it arrive whole and be
    imported after the erase."""
    working, erasing = services
    data = export_of(tmp_path, 1_200, answer="x" * 900)  # two parts of 1 MiB at most
    erase = Eraser(erasing, "ann")
    cancelled = "ann was erased while this upload arrived, so it was cancelled: nothing of it"
    if when == "while it arrives":
        arriving = working.start_upload("ann", "export.json")
        arriving.write(data[: len(data) // 2 + 1])  # a part stored, then the erase
        erase()
        arriving.write(data[len(data) // 2 + 1 :])
        with pytest.raises(UserErased, match=cancelled):
            working.finish_upload(arriving, "auto")
    else:
        create = working.store.create_upload

        def created(*args: Any, **options: Any) -> None:
            erase()  # after the epoch was taken, before the upload's row is stored
            create(*args, **options)

        monkeypatch.setattr(working.store, "create_upload", created)
        with pytest.raises(UserErased, match=cancelled):
            working.start_upload("ann", "export.json")
        monkeypatch.undo()
    assert erase.done
    working.index_pending()
    assert nothing_of(backend, "ann") == {}
    again = upload(working, "ann", "export.json", export_of(tmp_path, 20))  # the id, at once
    working.index_pending()
    assert working.import_status("ann", again).status.value == "done"  # type: ignore[union-attr]


@pytest.mark.parametrize("erased_by", ["this process", "another process"])
def test_uploads_arriving_at_an_erase_hold_no_slot_and_end_at_their_next_bytes(
    backend: Backend,  # noqa: F811
    services: tuple[Memoro, Memoro],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    erased_by: str,
) -> None:
    """The id takes a new upload at once after an erase: two uploads still
    trickling in kept both of the user's slots (429) for as long as their
    client kept sending. They end instead, with UserErased, at their next
    bytes (an erase by another server is seen within ERASE_CHECK_SECONDS;
    none here, so the test need not wait)."""
    working, erasing = services
    if erased_by == "another process":
        monkeypatch.setattr(upload_module, "ERASE_CHECK_SECONDS", 0.0)
    arriving = [working.start_upload("ann", f"slow-{i}.json") for i in range(2)]
    for upload_ in arriving:
        upload_.write(b"[")
    with pytest.raises(Busy):
        working.start_upload("ann", "third.json")
    (working if erased_by == "this process" else erasing).delete_user("ann")
    again = working.start_upload("ann", "export.json")  # at once: no slot is held
    cancelled = "ann was erased while this upload arrived, so it was cancelled: nothing of it"
    for upload_ in arriving:
        with pytest.raises(UserErased, match=cancelled):
            upload_.write(b" " * 1000)
        upload_.close()  # as the server does once it has answered
    assert working._arriving == {"ann": [working._arriving["ann"][0]]}  # the new one's
    again.write(export_of(tmp_path, 20))
    imported = working.finish_upload(again, "auto").id
    working.index_pending()
    assert working.import_status("ann", imported).status.value == "done"  # type: ignore[union-attr]
    assert len(working.conversation_turns("ann", "c0")) == 20
    assert working._arriving == {}


def test_over_http_an_upload_cut_short_by_an_erase_is_409_user_erased(
    token_server: str,  # noqa: F811 - the fixture imported above
    web_service: Memoro,
    tmp_path: Path,
) -> None:
    data = export_of(tmp_path, 1_200, answer="x" * 900)
    boundary = "memoro-test-boundary"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file";'
        ' filename="export.json"\r\nContent-Type: application/json\r\n\r\n'
    ).encode()

    def body() -> Iterator[bytes]:
        yield head + data[: len(data) // 2]
        # the server has begun the upload (a busy machine may take a while to get there)
        deadline = time.monotonic() + 60
        while not web_service._arriving.get("ann"):
            assert time.monotonic() < deadline, "the upload never began"
            time.sleep(0.01)
        with client(token_server, "ann") as other:  # DELETE /v1/me while it arrives
            assert other.delete("/v1/me").status_code == 200
        yield data[len(data) // 2 :] + f"\r\n--{boundary}--\r\n".encode()

    with client(token_server, "ann") as ann:
        answer = ann.post(
            "/v1/imports",
            content=body(),
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        )
        assert answer.status_code == 409, answer.text
        assert answer.json()["error"]["code"] == "user_erased"
        assert "ann was erased while this upload arrived" in answer.json()["error"]["message"]
        assert ann.get("/v1/imports").json() == []
    web_service.index_pending()
    assert web_service.list_conversations("ann") == []


class ErasingEmbedder(HashEmbedder):
    """Embeds as HashEmbedder, after running ``before`` on its first call."""

    def __init__(self, before: Callable[[], None]) -> None:
        super().__init__()
        self.before = before

    def embed_documents(self, texts: Any) -> Any:
        self.before()
        return super().embed_documents(texts)


def test_an_indexing_batch_that_ends_after_the_erase_stores_nothing(
    backend: Backend,  # noqa: F811
) -> None:
    erasing = backend.service()
    indexing = Memoro(
        backend.open(),
        Settings(home=backend.tmp_path),
        embedder=ErasingEmbedder(Eraser(erasing, "ann")),
        worker=False,
    )
    for user in ("ann", "bob"):
        for i in range(5):
            indexing.record_turn(user, "c", f"{user} WOMBAT heron {i}", "ok")
    indexing.worker.threads = 1  # one batch holds every job: chunked, then embedded
    indexing.index_pending()
    assert nothing_of(backend, "ann") == {}
    assert len(indexing.search("bob", "heron", mode="semantic", limit=10)) == 5
    indexing.close()
    erasing.close()


def test_indexing_the_turns_of_work_whose_user_is_erased_meanwhile_says_so(
    backend: Backend,  # noqa: F811
) -> None:
    """Work that stored turns then indexes them itself (memoro import, memoro
    turn add): an erase during the indexing ends it with UserErased, as one
    during the storing does, rather than with a count of what is gone."""
    erasing = backend.service()
    indexing = Memoro(
        backend.open(),
        Settings(home=backend.tmp_path),
        embedder=ErasingEmbedder(Eraser(erasing, "ann")),
        worker=False,
    )
    epoch = indexing.user_epoch("ann")
    turns = [NewTurn("c", f"WOMBAT heron {i}", "ok", None, f"k{i}") for i in range(3)]
    indexing.import_turns("ann", turns, epoch=epoch)
    with pytest.raises(UserErased, match="ann was erased while this work ran"):
        indexing.index_user("ann", epoch=epoch)
    assert nothing_of(backend, "ann") == {}
    assert indexing.index_user("ann") == 0  # without an epoch: nothing left, nothing to say
    again = indexing.user_epoch("ann")  # new work after the erase is indexed
    indexing.import_turns("ann", turns, epoch=again)
    assert indexing.index_user("ann", epoch=again) == 0
    assert len(indexing.search("ann", "heron", mode="keyword", limit=10)) == 3
    indexing.close()
    erasing.close()


def test_a_reindex_that_ends_after_the_erase_stores_nothing(
    backend: Backend,  # noqa: F811
) -> None:
    """Vectors for chunks indexed without the model (or by another one):
    the erase comes while they are being embedded."""
    keywords = Memoro(backend.open(), Settings(home=backend.tmp_path), embedder=None, worker=False)
    for i in range(3):
        keywords.record_turn("ann", "c", f"WOMBAT heron {i}", "ok")
    keywords.index_pending()
    keywords.close()
    erasing = backend.service()
    reindexing = Memoro(
        backend.open(),
        Settings(home=backend.tmp_path),
        embedder=ErasingEmbedder(Eraser(erasing, "ann")),
        worker=False,
    )
    reindexing.reindex()
    assert nothing_of(backend, "ann") == {}  # not even the user's generation
    reindexing.close()
    erasing.close()


def test_a_saved_index_copy_written_across_the_erase_is_not_kept(
    backend: Backend,  # noqa: F811
    services: tuple[Memoro, Memoro],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worker brings a large user's index up to date after indexing and
    saves a copy of it on a thread; the erase comes between the build and
    the copy's write."""
    working, erasing = services
    monkeypatch.setattr(saved, "SAVE_MIN", 1)  # every user counts as large
    erase = Eraser(erasing, "ann")
    pack = saved.pack

    def packed(arrays: saved.Arrays) -> memoryview:
        erase()
        return pack(arrays)

    monkeypatch.setattr(saved, "pack", packed)
    for i in range(3):
        working.record_turn("ann", "c", f"WOMBAT heron {i}", "ok")
    working.index_pending()  # indexes, then prepares ann's index: the copy is saved
    working.store.saver.flush()  # type: ignore[attr-defined]
    assert erase.done
    assert nothing_of(backend, "ann") == {}


ERASED_IMPORT = (
    "Error: ann was erased while this import ran, so it was cancelled: nothing it read"
    " is kept (what it had stored went with the erase)"
)


def _import_erased(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: Path, at: str
) -> tuple[Result, Eraser, Memoro]:
    """``memoro import source`` for ann, erased by another process's
    service right after the first call of SqliteStore's method ``at``
    (``record_turns``: while storing; ``claim_jobs``: once its indexing
    took jobs). Returns the command's result, the eraser and that other
    service (open: the caller reads through it, then closes it)."""
    home = tmp_path / "home"
    env = {"MEMORO_HOME": str(home), "MEMORO_EMBEDDER": "keyword"}
    other = Memoro(
        SqliteStore(home / "memoro.db"), Settings(home=home), embedder=None, worker=False
    )
    erase = Eraser(other, "ann")
    method = getattr(SqliteStore, at)

    def then_erase(store: SqliteStore, *args: Any, **options: Any) -> Any:
        answer = method(store, *args, **options)
        if at != "claim_jobs" or answer:  # jobs were taken
            erase()
        return answer

    monkeypatch.setattr(SqliteStore, at, then_erase)
    result = CliRunner().invoke(cli, ["import", str(source), "-u", "ann", "--quiet"], env=env)
    monkeypatch.undo()
    return result, erase, other


def test_memoro_import_says_the_erase_cancelled_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``memoro import`` while ``memoro user delete`` runs elsewhere: one
    clear line and exit code 1, no traceback, nothing of the user left."""
    path = tmp_path / "export.json"
    path.write_bytes(export_of(tmp_path, 1_200))
    result, _, other = _import_erased(tmp_path, monkeypatch, path, "record_turns")
    assert result.exit_code == 1
    assert result.stderr.strip() == ERASED_IMPORT
    assert other.list_conversations("ann") == [] and other.read_block("ann") is None
    other.close()


def test_memoro_import_erased_while_it_indexes_says_so_as_while_it_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The import has stored every turn and indexes them here when the erase
    comes: the same line and exit code as an erase while storing, never
    "Imported … Indexed …" for a user who is gone."""
    path = tmp_path / "export.json"
    path.write_bytes(export_of(tmp_path, 30))
    result, erase, other = _import_erased(tmp_path, monkeypatch, path, "claim_jobs")
    assert erase.deleted is not None and erase.deleted.turns == 30  # all stored first
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert result.stderr.strip() == ERASED_IMPORT
    assert other.list_conversations("ann") == [] and other.read_block("ann") is None
    other.close()


def test_memoro_import_of_a_folder_of_logs_stops_whole_at_an_erase(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder is one import: an erase after its first log was stored
    stops it, rather than the next log starting anew for the reused id."""
    logs = tmp_path / "projects"
    shutil.copytree(Path(__file__).parent / "fixtures" / "imports" / "claude-code", logs)
    for log in logs.rglob("*.jsonl"):
        os.utime(log, (1e9, 1e9))  # long finished
    result, _, other = _import_erased(tmp_path, monkeypatch, logs, "record_turns")
    assert result.exit_code == 1, result.output
    assert "ann was erased while this import ran" in result.stderr
    assert other.list_conversations("ann") == []
    other.close()


def test_an_import_on_the_app_role_is_cancelled_by_an_erase_on_the_worker_role(
    roles: tuple[Memoro, Memoro],  # noqa: F811 - the fixture imported above
) -> None:
    """On PostgreSQL the epoch is under row-level security like every row
    of a user: a server's role takes and checks it as its own."""
    app, worker = roles
    erase = Eraser(worker, "ann")

    def turns() -> Iterator[NewTurn]:
        for i in range(20):
            if i == 10:
                erase()
            yield NewTurn("c", f"WOMBAT {i}", "ok", None, f"k{i}")

    with pytest.raises(UserErased):
        app.import_turns("ann", turns())
    assert app.list_conversations("ann") == [] and worker.list_conversations("ann") == []
    assert [c.id for c in app.list_conversations("bob")] == ["kept"]


def test_over_http_a_turn_of_work_begun_before_the_erase_is_refused(
    token_server: str,  # noqa: F811 - the fixture imported above
    web_service: Memoro,
) -> None:
    """A remote watcher's path: POST /v1/me/epoch when the work begins, the
    epoch with each turn; after DELETE /v1/me such a turn is 409 user_erased
    and stores nothing, on HTTP and through the Python client, while a
    turn without it, or with a new epoch, is stored at once."""
    turn = {"conversation": "c", "question": "WOMBAT", "answer": "ok"}
    with client(token_server, "ann") as ann:
        epoch = ann.post("/v1/me/epoch").json()["epoch"]
        assert ann.post("/v1/turns", json={**turn, "epoch": epoch}).status_code == 201
        assert ann.post("/v1/me/epoch").json() == {"epoch": epoch}  # the same work's
        with MemoroClient(token_server, SIGNER.issue("ann")) as remote:
            assert remote.user_epoch("ann") == epoch
            assert ann.delete("/v1/me").status_code == 200
            refused = ann.post("/v1/turns", json={**turn, "key": "k", "epoch": epoch})
            assert refused.status_code == 409, refused.text
            assert refused.json()["error"]["code"] == "user_erased"
            with pytest.raises(UserErased, match="ann was erased while this work ran"):
                remote.record_turn("ann", "c", "WOMBAT", "ok", epoch=epoch)
            assert web_service.list_conversations("ann") == []
            for bad in (True, 1.5, -1, "7", 2**53, [1]):
                answer = ann.post("/v1/turns", json={**turn, "epoch": bad})
                assert answer.status_code == 422, (bad, answer.text)
            again = remote.user_epoch("ann")  # new work, after the erase
            assert again != epoch
            assert remote.record_turn("ann", "c", "a new start", "ok", epoch=again).created
    with pytest.raises(InvalidInput, match="epoch must be a whole number"):
        web_service.record_turn("ann", "c", "q", "a", epoch=True)  # type: ignore[arg-type]
    assert [t.question for t in web_service.conversation_turns("ann", "c")] == ["a new start"]
