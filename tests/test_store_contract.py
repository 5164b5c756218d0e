"""The Store contract: every backend must pass these (M1, M6, M9)."""

from __future__ import annotations

import threading

import pytest

from memoro.models import AuditRecord, Operation, Writer
from memoro.store.base import Store


def _write(block_store: Store, user: str, text: str, writer: Writer = Writer.MODEL) -> None:
    with block_store.block_transaction(user) as tx:
        tx.put(text, AuditRecord(writer, Operation.WRITE, (), (text,), 0, 1))


def test_a_user_with_nothing_remembered_has_no_row(block_store: Store) -> None:
    assert block_store.read_block("ann") is None
    assert block_store.list_audit("ann") == []


def test_one_row_per_user_and_the_later_put_replaces_it(block_store: Store) -> None:
    _write(block_store, "ann", "first")
    _write(block_store, "ann", "second", Writer.USER)
    stored = block_store.read_block("ann")
    assert stored is not None
    assert (stored.text, stored.updated_by) == ("second", Writer.USER)


def test_users_never_see_each_other(block_store: Store) -> None:
    _write(block_store, "ann", "ann's block")
    _write(block_store, "bob", "bob's block")
    assert block_store.read_block("ann").text == "ann's block"  # type: ignore[union-attr]
    assert [e.added_lines for e in block_store.list_audit("bob")] == [("bob's block",)]


def test_put_records_its_audit_entry_in_the_same_transaction(block_store: Store) -> None:
    with block_store.block_transaction("ann") as tx:
        tx.put("a\nb", AuditRecord(Writer.USER, Operation.WRITE, ("old",), ("a", "b"), 1, 2))
    (entry,) = block_store.list_audit("ann")
    assert (entry.writer, entry.operation) == (Writer.USER, Operation.WRITE)
    assert (entry.removed_lines, entry.added_lines) == (("old",), ("a", "b"))
    assert (entry.removed_count, entry.added_count) == (1, 2)


def test_an_error_inside_the_transaction_rolls_back_block_and_audit(block_store: Store) -> None:
    _write(block_store, "ann", "kept")
    with pytest.raises(RuntimeError), block_store.block_transaction("ann") as tx:
        tx.put("lost", AuditRecord(Writer.MODEL, Operation.WRITE, ("kept",), ("lost",), 1, 1))
        raise RuntimeError("crash between put and commit")
    assert block_store.read_block("ann").text == "kept"  # type: ignore[union-attr]
    assert len(block_store.list_audit("ann")) == 1


def test_delete_removes_the_row_and_blanks_earlier_audit_lines(block_store: Store) -> None:
    _write(block_store, "ann", "secret line")
    _write(block_store, "bob", "bob keeps this")
    with block_store.block_transaction("ann") as tx:
        tx.delete(AuditRecord(Writer.USER, Operation.DELETE, (), (), 1, 0))
    assert block_store.read_block("ann") is None
    delete, write = block_store.list_audit("ann")
    assert (delete.operation, delete.removed_count, delete.writer) == (
        Operation.DELETE,
        1,
        Writer.USER,
    )
    assert (write.operation, write.added_count) == (Operation.WRITE, 1)
    assert write.added_lines == write.removed_lines == ()
    assert block_store.list_audit("bob")[0].added_lines == ("bob keeps this",)


def test_audit_is_listed_newest_first_and_limited(block_store: Store) -> None:
    for i in range(5):
        _write(block_store, "ann", f"v{i}")
    entries = block_store.list_audit("ann", limit=3)
    assert [e.added_lines for e in entries] == [("v4",), ("v3",), ("v2",)]


def test_unicode_survives_the_round_trip(block_store: Store) -> None:
    text = "Name: Zoë 👩🏽\u200d💻\nشهر: تهران\n東京"
    _write(block_store, "ann", text)
    assert block_store.read_block("ann").text == text  # type: ignore[union-attr]
    assert block_store.list_audit("ann")[0].added_lines == (text,)


def test_concurrent_transactions_on_one_user_serialize(block_store: Store) -> None:
    """Read-modify-write inside block_transaction never loses an update."""
    _write(block_store, "ann", "0")

    def bump() -> None:
        for _ in range(20):
            with block_store.block_transaction("ann") as tx:
                current = tx.current()
                assert current is not None
                n = int(current.text) + 1
                tx.put(str(n), AuditRecord(Writer.MODEL, Operation.WRITE, (), (str(n),), 0, 1))

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert block_store.read_block("ann").text == "80"  # type: ignore[union-attr]
    assert len(block_store.list_audit("ann", limit=1000)) == 81
