"""Imports and the export through the service, on every backend (I1–I5):
turns keep their titles and keys, importing again adds nothing, a newer
export adds only what is new, and memoro's export imports back losslessly."""

from __future__ import annotations

import io
import json
import time
import zipfile
from pathlib import Path
from typing import Any

from memoro import block
from memoro.models import Proposal, Writer
from memoro.service import Memoro
from memoro.turns import now

FIXTURES = Path(__file__).parent / "fixtures" / "imports"


def export_of(memoro: Memoro, user: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads("".join(memoro.export(user)))
    return data


def test_an_export_is_imported_with_titles_and_found_by_search(history: Memoro) -> None:
    report = history.import_file("ann", FIXTURES / "chatgpt-conversations.json")
    assert report.format == "chatgpt"
    assert (report.tally.imported, report.tally.already_there) == (5, 0)
    listed = {c.id: c for c in history.list_conversations("ann")}
    assert listed["chatgpt:c0ffee00-0000-4000-8000-000000000001"].title == "Trip to Lisbon"
    assert listed["chatgpt:c0ffee00-0000-4000-8000-000000000003"].turns == 2
    history.index_pending()
    (hit,) = history.search("ann", "Belém tower", limit=1)
    assert hit.conversation_id == "chatgpt:c0ffee00-0000-4000-8000-000000000001"
    assert history.list_conversations("bob") == []


def test_importing_again_adds_nothing_and_a_newer_export_adds_only_the_new(
    history: Memoro, tmp_path: Path
) -> None:
    history.import_file("ann", FIXTURES / "claude-conversations.json")
    again = history.import_file("ann", FIXTURES / "claude-conversations.json")
    assert (again.tally.imported, again.tally.already_there) == (0, 3)

    newer = json.loads((FIXTURES / "claude-conversations.json").read_text())
    garden = newer[0]
    garden["chat_messages"] += [
        {
            "uuid": "m6",
            "sender": "human",
            "content": [{"type": "text", "text": "And basil?"}],
            "created_at": "2024-03-05T09:00:00Z",
            "parent_message_uuid": "m5",
        },
        {
            "uuid": "m7",
            "sender": "assistant",
            "content": [{"type": "text", "text": "Basil likes sun."}],
            "created_at": "2024-03-05T09:00:09Z",
            "parent_message_uuid": "m6",
        },
    ]
    garden["current_leaf_message_uuid"] = "m7"
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(newer))
    report = history.import_file("ann", path)
    assert (report.tally.imported, report.tally.already_there) == (1, 3)
    turns = history.conversation_turns("ann", "claude:a1a1a1a1-0000-4000-8000-000000000001")
    assert [t.question for t in turns][-1] == "And basil?"


def test_memoros_export_imports_back_losslessly(history: Memoro) -> None:
    history.write_block("ann", "Preferred name: Al", writer=Writer.MODEL)
    history.write_block("ann", "Preferred name: Al\nTracker: al@example.com", writer=Writer.USER)
    history.record_turn("ann", "live-chat", "What is my tracker account?", "al@example.com")
    history.import_file("ann", FIXTURES / "sillytavern-chat.jsonl")
    current = "Preferred name: Al\nTracker: al@example.com"
    proposed = current + "\nLikes herons"
    history.store.restore_proposal(
        Proposal("ann", proposed, block.etag(current), (), ("Likes herons",), now(), 2, 1, 7)
    )
    original = export_of(history, "ann")
    assert original["format"] == "memoro-export" and len(original["audit"]) == 2
    assert original["proposal"]["block"] == proposed

    data = "".join(history.export("ann")).encode()
    report = history.import_file("copy", io.BytesIO(data))
    assert report.format == "memoro" and report.block == "restored"
    copied = export_of(history, "copy")
    for key in ("user", "exported_at"):
        original.pop(key), copied.pop(key)
    (live,) = [c for c in copied["conversations"] if c["id"] == "live-chat"]
    assert live["turns"][0]["key"].startswith("import:")  # a live turn's key: from its content
    live["turns"][0]["key"] = None
    assert copied == original
    stored, copied_block = history.read_block("ann"), history.read_block("copy")
    assert stored is not None and copied_block is not None
    assert (copied_block.text, copied_block.updated_at, copied_block.updated_by) == (
        stored.text,
        stored.updated_at,
        stored.updated_by,
    )
    restored = history.proposal("copy")
    assert restored is not None and not restored.stale and restored.block == proposed

    # into the same user again: nothing new, and the block is left alone
    again = history.import_file("ann", io.BytesIO(data))
    assert again.tally.imported == 0 and again.tally.already_there == 3
    assert again.block.startswith("not restored")
    assert len(history.audit("ann")) == 2


def _upload(memoro: Memoro, user: str, data: bytes, name: str, format: str = "auto") -> str:
    upload = memoro.start_upload(user, name)
    for start in range(0, len(data), 700_000):  # arrives in pieces, stored in 1 MiB parts
        upload.write(data[start : start + 700_000])
    return memoro.finish_upload(upload, format).id


def test_an_uploaded_export_waits_in_the_database_and_a_worker_imports_it(
    history: Memoro, tmp_path: Path
) -> None:
    conversations = json.loads((FIXTURES / "chatgpt-conversations.json").read_text())
    # over 2 MiB, so the file spans several stored parts
    padding = [
        {**conversations[2], "id": f"pad{i}", "conversation_id": f"pad{i}", "title": "x" * 8000}
        for i in range(300)
    ]
    path = tmp_path / "export.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("conversations.json", json.dumps(conversations + padding))
    data = path.read_bytes()
    assert len(data) > 2 * 2**20
    import_id = _upload(history, "ann", data, "export.zip")
    queued = history.import_status("ann", import_id)
    assert queued is not None and (queued.status.value, queued.size) == ("queued", len(data))
    assert history.import_status("bob", import_id) is None  # another user's
    history.index_pending()  # the import job, then indexing the turns it stored
    done = history.import_status("ann", import_id)
    assert done is not None and done.status.value == "done" and done.report is not None
    assert (done.report["format"], done.report["imported"]) == ("chatgpt", 5 + 300 * 2)
    assert done.read_bytes == done.size
    assert [i.id for i in history.list_imports("ann")] == [import_id]
    assert history.search("ann", "Belém tower", limit=1)
    # the uploaded bytes are gone once the import is done
    assert history.store.upload_part("ann", import_id, 0) is None


def test_an_upload_that_is_no_export_fails_with_the_reason_and_is_not_retried(
    history: Memoro,
) -> None:
    import_id = _upload(history, "ann", b"just some text", "notes.txt")
    history.index_pending()
    failed = history.import_status("ann", import_id)
    assert failed is not None and failed.status.value == "failed"
    assert failed.error is not None and "cannot tell which export" in failed.error
    assert history.pending_jobs() == 0


def test_an_upload_over_the_limit_is_refused_and_nothing_is_kept(history: Memoro) -> None:
    import pytest

    from memoro.errors import TooLarge

    upload = history.start_upload("ann", "big.zip")
    upload.limit = 1000
    with pytest.raises(TooLarge):
        upload.write(b"x" * 1001)
    upload.abandon()
    assert history.import_status("ann", upload.id) is None
    assert history.list_imports("ann") == []


def test_an_import_interrupted_by_a_dead_worker_runs_again_and_stores_each_turn_once(
    history: Memoro,
) -> None:
    from memoro.history.worker import Worker

    data = (FIXTURES / "claude-conversations.json").read_bytes()
    import_id = _upload(history, "ann", data, "conversations.json")
    # a worker claims the job and dies holding it: its lease runs out
    (job,) = history.store.claim_jobs("dead", 0.05, 1)
    assert job.kind == "import_file"
    history.import_file("ann", FIXTURES / "claude-conversations.json")  # it had stored them all
    worker = Worker(history.store, None, handlers={"import_file": history._run_import})
    deadline = time.monotonic() + 60
    while history.import_status("ann", import_id).status.value != "done":  # type: ignore[union-attr]
        assert time.monotonic() < deadline
        worker.run_until_idle()
    report = history.import_status("ann", import_id).report  # type: ignore[union-attr]
    assert report is not None and (report["imported"], report["already_there"]) == (0, 3)
    assert sum(c.turns for c in history.list_conversations("ann")) == 3


def _jsonl(*turns: tuple[str, str, str]) -> io.BytesIO:
    lines = [
        json.dumps({"conversation": c, "question": q, "answer": a, "at": "2024-05-01T10:00:00Z"})
        for c, q, a in turns
    ]
    return io.BytesIO("\n".join(lines).encode())


def test_a_conversation_deleted_a_moment_ago_is_imported_afresh(history: Memoro) -> None:
    """Its id takes turns at once (issue 26): the deleted turns are purged,
    never mixed with the imported ones."""
    history.import_file("ann", _jsonl(("trip", "Flights?", "TAP"), ("garden", "Basil?", "Sun")))
    history.delete_conversation("ann", "trip")  # not yet purged
    report = history.import_file(
        "ann", _jsonl(("trip", "Hotel?", "Alfama"), ("garden", "Mint?", "Shade"))
    )
    assert (report.tally.imported, report.tally.already_there, report.tally.failed) == (2, 0, 0)
    assert [t.question for t in history.conversation_turns("ann", "trip")] == ["Hotel?"]
    assert [t.question for t in history.conversation_turns("ann", "garden")] == ["Basil?", "Mint?"]


def test_a_file_cut_short_keeps_what_was_stored_and_says_how_much(history: Memoro) -> None:
    import pytest

    from memoro.errors import InvalidInput
    from memoro.transfer import IMPORT_BATCH

    two_turns = json.loads((FIXTURES / "chatgpt-conversations.json").read_text())[2]
    many = [{**two_turns, "id": f"c{i}", "conversation_id": f"c{i}"} for i in range(400)]
    data = json.dumps(many).encode()
    with pytest.raises(InvalidInput, match=f"{IMPORT_BATCH} turns read before that were stored"):
        history.import_file("ann", io.BytesIO(data[: len(data) - 500]), format="chatgpt")
    stored = sum(c.turns for c in history.list_conversations("ann"))
    assert stored == IMPORT_BATCH
    whole = history.import_file("ann", io.BytesIO(data))
    assert (whole.tally.imported, whole.tally.already_there) == (800 - IMPORT_BATCH, IMPORT_BATCH)


def test_a_restored_block_and_audit_must_be_what_memoro_could_have_written(
    history: Memoro,
) -> None:
    history.write_block("ann", "Preferred name: Al", writer=Writer.MODEL)
    export = export_of(history, "ann")
    damaged = [
        {"block": {**export["block"], "text": "x" * 5000}},
        {"audit": [{**export["audit"][0], "removed_count": -5}]},
        {"audit": [{**export["audit"][0], "added_lines": ["a\x00b"]}]},
        {"audit": [{**export["audit"][0], "added_lines": ["y" * 100_000]}]},
    ]
    for n, change in enumerate(damaged):
        user = f"copy{n}"
        report = history.import_file(user, io.BytesIO(json.dumps({**export, **change}).encode()))
        assert report.block.startswith("not restored"), change
        assert history.read_block(user) is None and history.audit(user) == []
    assert history.import_file("copy", io.BytesIO(json.dumps(export).encode())).block == "restored"


def test_a_finished_import_is_never_reopened_and_an_unreadable_file_fails_with_a_reason(
    history: Memoro, monkeypatch: Any
) -> None:
    from memoro import imports
    from memoro.models import ImportState

    data = (FIXTURES / "claude-conversations.json").read_bytes()
    done_id = _upload(history, "ann", data, "a\x00b\x1b[31m.json")
    history.index_pending()
    # a second run that lost its lease reports progress after the first finished
    history.store.update_import("ann", done_id, ImportState.RUNNING, 0)
    done = history.import_status("ann", done_id)
    assert done is not None and done.status.value == "done" and done.read_bytes == done.size
    assert done.file_name == "ab[31m.json"  # control characters never stored

    def broken_reader(*args: object) -> Any:
        raise KeyError("question")

    monkeypatch.setattr(imports, "read", broken_reader)
    failed_id = _upload(history, "ann", data, "conversations.json")
    history.index_pending()
    failed = history.import_status("ann", failed_id)
    assert failed is not None and failed.status.value == "failed"
    assert failed.error is not None and "could not be read" in failed.error
    assert history.pending_jobs() == 0 and history.store.upload_part("ann", failed_id, 0) is None
