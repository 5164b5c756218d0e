"""The system prompt (P1–P5)."""

from __future__ import annotations

import sqlite3

from memoro.prompt import BASE_PROMPT
from memoro.service import Memoro
from memoro.store.sqlite import SqliteStore


def test_p1_the_prompt_is_rebuilt_from_storage_on_every_turn(memoro: Memoro) -> None:
    assert "Name: Ann" not in memoro.system_prompt("ann").text
    memoro.write_block("ann", "Name: Ann", writer="user")  # e.g. from the settings page
    assert memoro.system_prompt("ann").text.endswith("Name: Ann")
    memoro.write_block("ann", "Name: Annie", writer="model")  # e.g. another conversation
    assert memoro.system_prompt("ann").text.endswith("Name: Annie")


def test_p1_a_second_process_sees_an_edit_on_its_next_turn(memoro: Memoro) -> None:
    store = memoro.store
    assert isinstance(store, SqliteStore)
    other = Memoro(SqliteStore(store.path), embedder=None, worker=False)
    assert "Name: Ann" not in other.system_prompt("ann").text
    memoro.write_block("ann", "Name: Ann", writer="user")
    assert other.system_prompt("ann").text.endswith("Name: Ann")
    other.close()


def test_p2_the_block_is_in_the_system_prompt_not_a_message(memoro: Memoro) -> None:
    memoro.write_block("ann", "Name: Ann", writer="user")
    (message,) = memoro.system_prompt("ann").openai()
    assert message["role"] == "system" and "Name: Ann" in message["content"]


def test_p3_the_header_shows_the_count_against_the_limit(memoro: Memoro) -> None:
    memoro.write_block("ann", "Name: Ann\n" + "x" * 1224, writer="user")
    assert (
        "Personal memory (1,234/4,000 characters)\nName: Ann\n" in memoro.system_prompt("ann").text
    )


def test_p3_an_empty_memory_still_has_its_header(memoro: Memoro) -> None:
    assert "Personal memory (0/4,000 characters)" in memoro.system_prompt("ann").text


def test_m3_the_block_is_normalized_again_when_loaded(memoro: Memoro) -> None:
    """Text that reached the database some other way is cleaned on load."""
    store = memoro.store
    assert isinstance(store, SqliteStore)
    raw = sqlite3.connect(store.path)
    raw.execute(
        "INSERT INTO memory_blocks VALUES ('ann', ?, '2026-01-01T00:00:00+00:00', 'user')",
        ("Name: A\u200bnn\U000e0049\r\n",),
    )
    raw.commit()
    raw.close()
    prompt = memoro.system_prompt("ann").text
    assert prompt.endswith("Personal memory (9/4,000 characters)\nName: Ann")


def test_p4_stable_parts_first_and_the_block_last(memoro: Memoro) -> None:
    memoro.write_block("ann", "Name: Ann", writer="user")
    prompt = memoro.system_prompt("ann", instructions="You are the helpdesk agent.")
    assert prompt.text.index(BASE_PROMPT) < prompt.text.index("You are the helpdesk agent.")
    assert prompt.text.index("helpdesk") < prompt.text.index("Personal memory (")
    assert prompt.text.endswith("Name: Ann")


def test_p4_the_stable_prefix_is_byte_identical_when_the_block_changes(memoro: Memoro) -> None:
    memoro.write_block("ann", "Name: Ann", writer="user")
    before = memoro.system_prompt("ann", instructions="Be brief.")
    memoro.write_block("ann", "Name: Annie\nTeam: blue", writer="model")
    after = memoro.system_prompt("ann", instructions="Be brief.")
    assert before.stable == after.stable
    assert after.openai()[0]["content"].startswith(before.stable)


def test_p4_anthropic_cache_breakpoint_sits_before_the_block(memoro: Memoro) -> None:
    memoro.write_block("ann", "Name: Ann", writer="user")
    stable, personal = memoro.system_prompt("ann").anthropic()
    assert stable["cache_control"] == {"type": "ephemeral"}
    assert "Personal memory (" not in stable["text"]
    assert "cache_control" not in personal
    assert personal["text"].startswith("Personal memory (9/4,000 characters)")


def test_p5_the_base_prompt_says_to_write_in_the_same_turn() -> None:
    assert "in this same turn" in BASE_PROMPT
    assert "I'll remember that" in BASE_PROMPT and "stores nothing" in BASE_PROMPT


def test_m10_m11_the_base_prompt_carries_what_not_to_write() -> None:
    assert "one date, one ticket or one question" in BASE_PROMPT
    assert "current-user tool" in BASE_PROMPT and "whole login address" in BASE_PROMPT
