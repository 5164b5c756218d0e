"""The system prompt (P1–P5, C10's date line)."""

from __future__ import annotations

import re
import sqlite3
from datetime import UTC, datetime

import pytest

from memoro import service
from memoro.prompt import BASE_PROMPT, build_system_prompt
from memoro.service import Memoro
from memoro.store.sqlite import SqliteStore

TODAY = r"\n\nToday is [A-Z][a-z]+day, \d{4}-\d{2}-\d{2} \(UTC\)\.$"


def ends_with_block(text: str, block: str) -> bool:
    """The block is last but for the date line after it."""
    return re.search(re.escape(block) + TODAY, text) is not None


def test_p1_the_prompt_is_rebuilt_from_storage_on_every_turn(memoro: Memoro) -> None:
    assert "Name: Ann" not in memoro.system_prompt("ann").text
    memoro.write_block("ann", "Name: Ann", writer="user")  # e.g. from the settings page
    assert ends_with_block(memoro.system_prompt("ann").text, "Name: Ann")
    memoro.write_block("ann", "Name: Annie", writer="model")  # e.g. another conversation
    assert ends_with_block(memoro.system_prompt("ann").text, "Name: Annie")


def test_p1_a_second_process_sees_an_edit_on_its_next_turn(memoro: Memoro) -> None:
    store = memoro.store
    assert isinstance(store, SqliteStore)
    other = Memoro(SqliteStore(store.path), embedder=None, worker=False)
    assert "Name: Ann" not in other.system_prompt("ann").text
    memoro.write_block("ann", "Name: Ann", writer="user")
    assert ends_with_block(other.system_prompt("ann").text, "Name: Ann")
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
    assert ends_with_block(prompt, "Personal memory (9/4,000 characters)\nName: Ann")


def test_p4_stable_parts_first_and_the_block_last(memoro: Memoro) -> None:
    memoro.write_block("ann", "Name: Ann", writer="user")
    prompt = memoro.system_prompt("ann", instructions="You are the helpdesk agent.")
    assert prompt.text.index(BASE_PROMPT) < prompt.text.index("You are the helpdesk agent.")
    assert prompt.text.index("helpdesk") < prompt.text.index("Personal memory (")
    assert ends_with_block(prompt.text, "Name: Ann")


def test_p4_the_stable_prefix_is_byte_identical_when_the_block_changes(memoro: Memoro) -> None:
    memoro.write_block("ann", "Name: Ann", writer="user")
    before = memoro.system_prompt("ann", instructions="Be brief.")
    memoro.write_block("ann", "Name: Annie\nTeam: blue", writer="model")
    after = memoro.system_prompt("ann", instructions="Be brief.")
    assert before.stable == after.stable
    assert after.openai()[0]["content"].startswith(before.stable)


def test_p4_anthropic_cache_breakpoint_sits_before_the_block(memoro: Memoro) -> None:
    memoro.write_block("ann", "Name: Ann", writer="user")
    stable, personal, today = memoro.system_prompt("ann").anthropic()
    assert stable["cache_control"] == {"type": "ephemeral"}
    assert "Personal memory (" not in stable["text"]
    assert "cache_control" not in personal and "cache_control" not in today
    assert personal["text"].startswith("Personal memory (9/4,000 characters)")
    assert today["text"].startswith("Today is ")


def test_c10_the_prompt_ends_with_todays_date_in_utc(
    memoro: Memoro, monkeypatch: pytest.MonkeyPatch
) -> None:
    memoro.write_block("ann", "Name: Ann", writer="user")
    # 23:30 on Friday 31 January in UTC is already Saturday in Tokyo: the date is UTC's
    monkeypatch.setattr(service, "now", lambda: datetime(2025, 1, 31, 23, 30, tzinfo=UTC))
    prompt = memoro.system_prompt("ann", instructions="Be brief.")
    assert prompt.today == "Today is Friday, 2025-01-31 (UTC)."
    assert prompt.text.endswith("Name: Ann\n\nToday is Friday, 2025-01-31 (UTC).")
    assert prompt.openai()[0]["content"] == prompt.text
    monkeypatch.setattr(service, "now", lambda: datetime(2025, 2, 1, 0, 0, tzinfo=UTC))
    tomorrow = memoro.system_prompt("ann", instructions="Be brief.")
    # a new day changes only the last line: the cached prefix and the block stay
    assert tomorrow.stable == prompt.stable and tomorrow.memory == prompt.memory
    assert tomorrow.text.startswith(prompt.stable + "\n\n" + prompt.memory + "\n\n")
    assert tomorrow.today == "Today is Saturday, 2025-02-01 (UTC)."


def test_c10_a_prompt_built_without_a_day_has_no_date_line() -> None:
    built = build_system_prompt("Name: Ann")
    assert built.today == "" and built.text.endswith("Name: Ann")
    assert len(built.anthropic()) == 2


def test_c10_the_base_prompt_says_how_to_use_the_date() -> None:
    assert "after / before" in BASE_PROMPT and "recent_conversations" in BASE_PROMPT


def test_p5_the_base_prompt_says_to_write_in_the_same_turn() -> None:
    assert "in this same turn" in BASE_PROMPT
    assert "I'll remember that" in BASE_PROMPT and "stores nothing" in BASE_PROMPT


def test_m10_m11_the_base_prompt_carries_what_not_to_write() -> None:
    assert "one date, one ticket or one question" in BASE_PROMPT
    assert "current-user tool" in BASE_PROMPT and "whole login address" in BASE_PROMPT
