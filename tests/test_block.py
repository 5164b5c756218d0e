"""The block's pure rules: normalization (M3), the count (M2), the header
(P3), the line diff (M7) and audit truncation (M9)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memoro import block
from tests.conftest import block_vectors

VECTORS = block_vectors()

# Characters that exercise every branch of normalization, mixed with anything.
SPECIAL = [
    *"\r\n\t \u0085\u2028\u2029\u00a0\u3000\u200b\u200c\u200d\u200e\u202e\u2066\u2060"
    "\ufeff\u00ad\u034f\u061c\u3164\ufe0e\ufe0f\u0000\u0007\u007f\u009b\ufdd0\uffff"
    "\ud800\udc00a\u0628\u0915\u094d\u00e9\u0301\u2764\u845b",
    *["\U0001f600", "\U0001f3fd", "\U0001f308", "\U000e0041", "\U000e0100", "\U0001f1ef"],
]

any_text = st.text(
    alphabet=st.one_of(st.sampled_from(SPECIAL), st.characters(codec=None, exclude_categories=())),
    max_size=60,
)


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_normalization_matches_the_shared_vectors(vector: dict[str, object]) -> None:
    assert block.normalize(str(vector["input"])) == vector["normalized"]
    assert block.char_count(str(vector["input"])) == vector["count"]


def test_vectors_cover_both_sides_of_the_limit() -> None:
    counts = {v["count"] for v in VECTORS}
    assert {block.LIMIT, block.LIMIT + 1} <= counts


@given(any_text)
def test_normalization_is_idempotent_and_never_raises(text: str) -> None:
    once = block.normalize(text)
    assert block.normalize(once) == once


@given(any_text)
def test_normalized_text_has_no_controls_surrogates_or_edge_whitespace(text: str) -> None:
    out = block.normalize(text)
    assert "\r" not in out
    assert all(c in "\n\t" or ord(c) >= 0x20 for c in out)
    assert not any(0xD800 <= ord(c) <= 0xDFFF for c in out)
    assert not any(0xE0000 <= ord(c) <= 0xE007F for c in out)
    assert out == "" or (out[0] not in " \n\t\u00a0" and out[-1] not in " \n\t\u00a0")
    out.encode("utf-8")  # always storable


@given(any_text)
def test_count_is_code_points_of_the_normalized_text(text: str) -> None:
    assert block.char_count(text) == len(block.normalize(text))


def test_header_shows_count_against_the_limit_with_separators() -> None:
    assert block.header(1234) == "Personal memory (1,234/4,000 characters)"
    assert block.header(0) == "Personal memory (0/4,000 characters)"


def test_etag_depends_only_on_normalized_content() -> None:
    assert block.etag("a\r\nb") == block.etag("a\nb")
    assert block.etag("a") != block.etag("b")
    assert block.etag(None) == block.etag("")


def test_audit_line_is_cut_to_200_characters() -> None:
    assert block.audit_line("x" * 200) == "x" * 200
    cut = block.audit_line("y" * 500)
    assert len(cut) == block.AUDIT_LINE_CHARS
    assert cut.startswith("y" * 199)


def test_line_diff_reports_removed_and_added_lines_in_order() -> None:
    diff = block.line_diff("Name: Bob\nTeam: A\nCity: Oslo", "Name: Robert\nTeam: A\nLang: nb")
    assert diff.removed == ("Name: Bob", "City: Oslo")
    assert diff.added == ("Name: Robert", "Lang: nb")


def test_line_diff_of_identical_blocks_is_empty() -> None:
    diff = block.line_diff("a\nb", "a\nb")
    assert diff.removed == diff.added == diff.hunks == ()


lines_st = st.lists(st.sampled_from(["a", "b", "c", "", "Name: Ann", "x y"]), max_size=12)


@given(lines_st, lines_st)
def test_line_diff_is_exactly_what_turns_old_into_new(old: list[str], new: list[str]) -> None:
    old_text, new_text = "\n".join(old), "\n".join(new)
    a, b = block.lines(old_text), block.lines(new_text)
    diff = block.line_diff(old_text, new_text)
    rebuilt: list[str] = []
    cursor = 0
    for hunk in diff.hunks:
        kept = a[cursor : hunk.old_start]
        assert kept == b[len(rebuilt) : len(rebuilt) + len(kept)]
        rebuilt += kept
        rebuilt += b[hunk.new_start : hunk.new_end]
        cursor = hunk.old_end
    rebuilt += a[cursor:]
    assert rebuilt == b
    assert diff.removed == tuple(x for h in diff.hunks for x in a[h.old_start : h.old_end])
    assert diff.added == tuple(x for h in diff.hunks for x in b[h.new_start : h.new_end])
    assert Counter(a) - Counter(diff.removed) + Counter(diff.added) == Counter(b)
