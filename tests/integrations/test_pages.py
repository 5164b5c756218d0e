"""Every adapter page ends with the commands that show its example worked
and what they print; each adapter's docs test runs them after the example."""

from __future__ import annotations

import pytest

from tests.integrations.memories import DOCS, check_section


@pytest.mark.parametrize("page", sorted(path.name for path in DOCS.glob("*.md")))
def test_each_adapter_page_ends_with_the_lines_that_show_it_worked(page: str) -> None:
    commands, printed = check_section(page)
    assert commands == ["memoro memory show --user alice", "memoro conversations list --user alice"]
    block, conversation = printed.splitlines()
    assert block == "Preferred name: Al"
    assert conversation.endswith("\t1 turn\tlast 2026-12-05 09:14 UTC\tCall me Al from now on.")
