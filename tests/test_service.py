"""The service layer's rules for the block (M1–M9), on a real SQLite file."""

from __future__ import annotations

import threading

import pytest

from memoro import block
from memoro.errors import BlockChanged, InvalidInput, InvalidUser
from memoro.models import Operation, Outcome, Writer
from memoro.service import Memoro


def test_m1_a_markdown_heading_is_just_a_line(block_memoro: Memoro) -> None:
    result = block_memoro.write_block("ann", "# Accounts\ntracker: ann@example.com", writer="model")
    assert result.added == ("# Accounts", "tracker: ann@example.com")


def test_m2_count_uses_the_normalized_text(block_memoro: Memoro) -> None:
    result = block_memoro.write_block("ann", "\ufeff  Zoë 👍🏽\r\n", writer="user")
    assert result.block == "Zoë 👍🏽"
    assert result.count == 6


def test_m3_the_stored_text_is_normalized(block_memoro: Memoro) -> None:
    block_memoro.write_block("ann", "Name:\u200b Ann\r\nID: A\u202eB\U000e0041", writer="model")
    assert block_memoro.read_block("ann").text == "Name: Ann\nID: AB"  # type: ignore[union-attr]


def test_m4_over_the_limit_is_rejected_with_the_amount_to_cut(block_memoro: Memoro) -> None:
    block_memoro.write_block("ann", "keep me", writer="model")
    result = block_memoro.write_block("ann", "x" * 4001 + "\u200b" * 10, writer="model")
    assert result.outcome is Outcome.TOO_LONG
    assert (result.attempted_count, result.limit, result.over_by) == (4001, 4000, 1)
    assert "4,001" in result.warnings[0] and "4,000" in result.warnings[0]
    assert "Cut at least 1 character" in result.warnings[0]
    assert result.block == "keep me"
    assert block_memoro.read_block("ann").text == "keep me"  # type: ignore[union-attr]
    assert len(block_memoro.audit("ann")) == 1


def test_m4_exactly_the_limit_is_saved_never_truncated(block_memoro: Memoro) -> None:
    text = "a" * 3999 + "😀"
    result = block_memoro.write_block("ann", text, writer="model")
    assert result.saved
    assert block_memoro.read_block("ann").text == text  # type: ignore[union-attr]


def test_m5_an_empty_write_keeps_the_existing_block_and_says_how_to_delete(
    block_memoro: Memoro,
) -> None:
    block_memoro.write_block("ann", "Name: Ann", writer="model")
    for empty in ("", "   \n\t", "\u200b\ufeff\u2060"):
        result = block_memoro.write_block("ann", empty, writer="model")
        assert result.outcome is Outcome.EMPTY
        assert "memory_delete_all" in result.warnings[0]
        assert result.block == "Name: Ann"
    assert block_memoro.read_block("ann").text == "Name: Ann"  # type: ignore[union-attr]
    assert len(block_memoro.audit("ann")) == 1


def test_m5_an_empty_write_for_a_new_user_creates_no_row(block_memoro: Memoro) -> None:
    assert block_memoro.write_block("ann", " ", writer="user").outcome is Outcome.EMPTY
    assert block_memoro.read_block("ann") is None


def test_m6_delete_everything_removes_the_row(block_memoro: Memoro) -> None:
    block_memoro.write_block("ann", "a\nb\nc", writer="model")
    result = block_memoro.delete_block("ann", writer="user")
    assert (result.deleted, result.removed_count) == (True, 3)
    assert block_memoro.read_block("ann") is None


def test_m6_deleting_nothing_is_a_no_op(block_memoro: Memoro) -> None:
    result = block_memoro.delete_block("ann", writer="user")
    assert (result.deleted, result.removed_count) == (False, 0)
    assert block_memoro.audit("ann") == []


def test_m7_the_result_carries_the_saved_block_and_removed_and_added_lines(
    block_memoro: Memoro,
) -> None:
    block_memoro.write_block("ann", "Name: Ann\nTeam: blue\nCity: Oslo", writer="model")
    result = block_memoro.write_block("ann", "Name: Annie\nTeam: blue", writer="model")
    assert result.outcome is Outcome.SAVED
    assert result.block == "Name: Annie\nTeam: blue"
    assert result.removed == ("Name: Ann", "City: Oslo")
    assert result.added == ("Name: Annie",)
    assert (result.count, result.limit) == (22, 4000)


def test_m7_writing_the_identical_block_is_a_no_op_that_says_so(block_memoro: Memoro) -> None:
    block_memoro.write_block("ann", "Name: Ann", writer="model")
    result = block_memoro.write_block("ann", "  Name: Ann\r\n", writer="model")
    assert result.outcome is Outcome.UNCHANGED
    assert len(block_memoro.audit("ann")) == 1


def test_m8_without_a_precondition_the_later_save_wins(block_memoro: Memoro) -> None:
    block_memoro.write_block("ann", "from the settings page", writer="user")
    block_memoro.write_block("ann", "from the model", writer="model")
    assert block_memoro.read_block("ann").text == "from the model"  # type: ignore[union-attr]


def test_m8_a_stale_precondition_is_refused_and_changes_nothing(block_memoro: Memoro) -> None:
    block_memoro.write_block("ann", "start", writer="user")
    start_etag = block.etag("start")
    block_memoro.write_block("ann", "changed by the model", writer="model")
    with pytest.raises(BlockChanged) as refused:
        block_memoro.write_block("ann", "edited", writer="user", expected_etag=start_etag)
    assert refused.value.current == "changed by the model"
    assert block_memoro.read_block("ann").text == "changed by the model"  # type: ignore[union-attr]
    fresh = block.etag("changed by the model")
    assert block_memoro.write_block("ann", "edited", writer="user", expected_etag=fresh).saved


def test_m8_a_precondition_of_no_block_holds_only_while_there_is_none(block_memoro: Memoro) -> None:
    assert block_memoro.write_block(
        "ann", "first", writer="user", expected_etag=block.etag(None)
    ).saved
    with pytest.raises(BlockChanged):
        block_memoro.write_block("ann", "second", writer="user", expected_etag=block.etag(None))


def test_m8_clear_all_honours_a_precondition(block_memoro: Memoro) -> None:
    block_memoro.write_block("ann", "start", writer="user")
    with pytest.raises(BlockChanged):
        block_memoro.delete_block("ann", writer="user", expected_etag=block.etag("other"))
    assert block_memoro.read_block("ann") is not None


def test_m8_concurrent_writers_never_interleave_block_and_audit(block_memoro: Memoro) -> None:
    def write(n: int) -> None:
        for i in range(15):
            block_memoro.write_block("ann", f"writer {n} version {i}", writer="model")

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    latest = block_memoro.audit("ann", limit=1)[0]
    assert latest.added_lines == (block_memoro.read_block("ann").text,)  # type: ignore[union-attr]


def test_m9_the_writer_is_required_and_checked(block_memoro: Memoro) -> None:
    with pytest.raises(TypeError):
        block_memoro.write_block("ann", "x")  # type: ignore[call-arg]
    with pytest.raises(InvalidInput, match="writer must be"):
        block_memoro.write_block("ann", "x", writer="admin")
    with pytest.raises(InvalidInput, match="writer must be"):
        block_memoro.delete_block("ann", writer=None)  # type: ignore[arg-type]


def test_m9_each_write_records_writer_and_changed_lines(block_memoro: Memoro) -> None:
    block_memoro.write_block("ann", "a\nb", writer="model")
    block_memoro.write_block("ann", "a\nc", writer="user")
    newest, oldest = block_memoro.audit("ann")
    assert (oldest.writer, oldest.added_lines, oldest.removed_lines) == (
        Writer.MODEL,
        ("a", "b"),
        (),
    )
    assert (newest.writer, newest.removed_lines, newest.added_lines) == (
        Writer.USER,
        ("b",),
        ("c",),
    )


def test_m9_audit_lines_are_truncated(block_memoro: Memoro) -> None:
    block_memoro.write_block("ann", "z" * 900, writer="model")
    (entry,) = block_memoro.audit("ann")
    assert len(entry.added_lines[0]) == block.AUDIT_LINE_CHARS


def test_m9_delete_records_only_the_count_and_forgets_earlier_lines(block_memoro: Memoro) -> None:
    block_memoro.write_block("ann", "secret a\nsecret b", writer="model")
    block_memoro.write_block("ann", "secret a\nsecret c\nd", writer="user")
    block_memoro.delete_block("ann", writer="user")
    delete, second, first = block_memoro.audit("ann")
    assert (delete.operation, delete.removed_count, delete.removed_lines) == (
        Operation.DELETE,
        3,
        (),
    )
    for entry in (second, first):
        assert entry.removed_lines == entry.added_lines == ()
    assert (first.added_count, second.removed_count, second.added_count) == (2, 1, 2)
    assert (first.writer, second.writer) == (Writer.MODEL, Writer.USER)


@pytest.mark.parametrize("bad", ["", "   ", "a\nb", "x" * 256, None, 42])
def test_a_user_id_must_name_one_user(block_memoro: Memoro, bad: object) -> None:
    with pytest.raises(InvalidUser):
        block_memoro.read_block(bad)  # type: ignore[arg-type]


def test_a_non_string_block_is_invalid_input(block_memoro: Memoro) -> None:
    with pytest.raises(InvalidInput):
        block_memoro.write_block("ann", None, writer="user")  # type: ignore[arg-type]
