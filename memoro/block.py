"""The personal memory block's rules, pure: normalization, the one
character count, the limit, the line diff, the header and
the ETag used as a precondition. No I/O lives here.

The tables below are the whole normalization policy; the settings page's
counter is generated from them so the browser and the server cannot disagree.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from difflib import SequenceMatcher
from itertools import pairwise

LIMIT = 4000
"""The most characters a block may hold."""

AUDIT_LINE_CHARS = 200
"""Lines recorded in the audit log are cut to this many characters."""

Ranges = tuple[tuple[int, int], ...]

# Default_Ignorable_Code_Point (Unicode 15.1 DerivedCoreProperties): invisible
# characters, including the Tags block used to smuggle hidden text.
IGNORABLE: Ranges = (
    (0x00AD, 0x00AD),  # soft hyphen
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x061C, 0x061C),  # arabic letter mark
    (0x115F, 0x1160),  # hangul fillers
    (0x17B4, 0x17B5),  # khmer inherent vowels
    (0x180B, 0x180F),  # mongolian variation selectors and vowel separator
    (0x200B, 0x200F),  # zero-width space, ZWNJ, ZWJ, LRM, RLM
    (0x202A, 0x202E),  # bidi embeddings and overrides
    (0x2060, 0x206F),  # word joiner, invisible operators, bidi isolates
    (0x3164, 0x3164),  # hangul filler
    (0xFE00, 0xFE0F),  # variation selectors
    (0xFEFF, 0xFEFF),  # byte order mark
    (0xFFA0, 0xFFA0),  # halfwidth hangul filler
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),  # shorthand format controls
    (0x1D173, 0x1D17A),  # musical symbol format controls
    (0xE0000, 0xE0FFF),  # tags, variation selectors supplement, reserved
)

# Variation selectors pick a glyph for the character before them (text or
# emoji style, CJK ideographic variants in Japanese names). One directly after
# a visible character is kept; any other is removed, so a run of them cannot
# carry hidden bytes.
VARIATION_SELECTORS: Ranges = (
    (0x180B, 0x180D),
    (0x180F, 0x180F),
    (0xFE00, 0xFE0F),
    (0xE0100, 0xE01EF),
)

ZWNJ = 0x200C
ZWJ = 0x200D

# Scripts whose spelling uses ZWNJ/ZWJ (Persian, Arabic, Syriac, N'Ko, the
# Indic scripts, Tibetan, Myanmar, Khmer, Mongolian). Between two letters of
# these scripts a joiner is part of the word and kept; in Latin, Cyrillic, CJK
# and elsewhere it only hides inside a word (an account ID) and is removed.
JOINING_SCRIPTS: Ranges = (
    (0x0600, 0x08FF),
    (0x0900, 0x0DFF),
    (0x0F00, 0x0FFF),
    (0x1000, 0x109F),
    (0x1780, 0x18AF),
    (0x1A20, 0x1AAF),
    (0xA8E0, 0xA8FF),
    (0xA9E0, 0xA9FF),
    (0xAA60, 0xAA7F),
    (0xFB50, 0xFDFF),
    (0xFE70, 0xFEFE),
)

# Extended_Pictographic (Unicode emoji-data): a ZWJ between two of these is an
# emoji ZWJ sequence (family, profession, rainbow flag) and is kept.
# fmt: off
PICTOGRAPHIC: Ranges = (
    (0x00A9, 0x00A9), (0x00AE, 0x00AE), (0x203C, 0x203C), (0x2049, 0x2049),
    (0x2122, 0x2122), (0x2139, 0x2139), (0x2194, 0x2199), (0x21A9, 0x21AA),
    (0x231A, 0x231B), (0x2328, 0x2328), (0x2388, 0x2388), (0x23CF, 0x23CF),
    (0x23E9, 0x23F3), (0x23F8, 0x23FA), (0x24C2, 0x24C2), (0x25AA, 0x25AB),
    (0x25B6, 0x25B6), (0x25C0, 0x25C0), (0x25FB, 0x25FE), (0x2600, 0x27BF),
    (0x2934, 0x2935), (0x2B05, 0x2B07), (0x2B1B, 0x2B1C), (0x2B50, 0x2B50),
    (0x2B55, 0x2B55), (0x3030, 0x3030), (0x303D, 0x303D), (0x3297, 0x3297),
    (0x3299, 0x3299), (0x1F000, 0x1F0FF), (0x1F10D, 0x1F10F), (0x1F12F, 0x1F12F),
    (0x1F16C, 0x1F171), (0x1F17E, 0x1F17F), (0x1F18E, 0x1F18E), (0x1F191, 0x1F19A),
    (0x1F1AD, 0x1F1E5), (0x1F201, 0x1F20F), (0x1F21A, 0x1F21A), (0x1F22F, 0x1F22F),
    (0x1F232, 0x1F23A), (0x1F23C, 0x1F23F), (0x1F249, 0x1F3FA), (0x1F400, 0x1F53D),
    (0x1F546, 0x1F64F), (0x1F680, 0x1F6FF), (0x1F774, 0x1F77F), (0x1F7D5, 0x1F7FF),
    (0x1F80C, 0x1F80F), (0x1F848, 0x1F84F), (0x1F85A, 0x1F85F), (0x1F888, 0x1F88F),
    (0x1F8AE, 0x1F8FF), (0x1F90C, 0x1F93A), (0x1F93C, 0x1F945), (0x1F947, 0x1FAFF),
    (0x1FC00, 0x1FFFD),
)
# fmt: on

# After a ZWJ-sequence member, a skin tone (U+1F3FB..U+1F3FF) or VS16 may
# come before the joiner.
EMOJI_LINKS: Ranges = ((0xFE0F, 0xFE0F), (0x1F3FB, 0x1F3FF))

# CR, NEL, LINE SEPARATOR and PARAGRAPH SEPARATOR all become "\n".
NEWLINES = frozenset({0x0D, 0x85, 0x2028, 0x2029})

# Stripped from both ends of the block. Explicit, so that the browser's
# String.trim and Python's str.strip (which differ) play no part.
EDGE_WHITESPACE = frozenset(
    {0x09, 0x0A, 0x20, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x202F, 0x205F, 0x3000}
)


class _RangeSet:
    """Membership of a code point in sorted, disjoint ranges."""

    def __init__(self, ranges: Ranges) -> None:
        flat = [cp for pair in ranges for cp in pair]
        if any(a > b for a, b in pairwise(flat)):
            raise ValueError("ranges must be sorted and disjoint")
        self._lows = [lo for lo, _ in ranges]
        self._highs = [hi for _, hi in ranges]

    def __contains__(self, cp: int) -> bool:
        i = bisect_right(self._lows, cp) - 1
        return i >= 0 and cp <= self._highs[i]


_IGNORABLE = _RangeSet(IGNORABLE)
_VARIATION_SELECTORS = _RangeSet(VARIATION_SELECTORS)
_JOINING_SCRIPTS = _RangeSet(JOINING_SCRIPTS)
_PICTOGRAPHIC = _RangeSet(PICTOGRAPHIC)
_EMOJI_LINKS = _RangeSet(EMOJI_LINKS)


def _is_control(cp: int) -> bool:
    return cp < 0x20 or 0x7F <= cp < 0xA0


def _is_noncharacter(cp: int) -> bool:
    return 0xFDD0 <= cp <= 0xFDEF or (cp & 0xFFFE) == 0xFFFE


def _is_joining_letter(cp: int) -> bool:
    return cp in _JOINING_SCRIPTS and cp not in _IGNORABLE


def _is_base(cp: int) -> bool:
    """A visible character a variation selector may follow."""
    return cp not in EDGE_WHITESPACE and cp not in _IGNORABLE


def _keep_joiner(cp: int, before: int | None, after: int | None) -> bool:
    if before is None or after is None:
        return False
    if _is_joining_letter(before) and _is_joining_letter(after):
        return True
    emoji_before = before in _PICTOGRAPHIC or before in _EMOJI_LINKS
    return cp == ZWJ and emoji_before and after in _PICTOGRAPHIC


def normalize(text: str) -> str:
    """Return the block as it is stored, shown and put in the prompt.

    Line endings become "\\n"; control characters other than "\\n" and "\\t",
    lone surrogates, noncharacters and invisible (default-ignorable)
    characters are removed, except the joiners and variation selectors that
    are part of an emoji or a word (see the tables above); then leading and
    trailing whitespace is stripped. Idempotent; never raises.
    """
    points = [ord(c) for c in text.replace("\r\n", "\n")]
    out: list[int] = []
    for i, cp in enumerate(points):
        if cp in NEWLINES:
            out.append(0x0A)
        elif _is_control(cp):
            if cp in (0x09, 0x0A):
                out.append(cp)
        elif 0xD800 <= cp <= 0xDFFF or _is_noncharacter(cp):
            continue
        elif cp in _VARIATION_SELECTORS:
            if out and _is_base(out[-1]):
                out.append(cp)
        elif cp in (ZWJ, ZWNJ):
            after = points[i + 1] if i + 1 < len(points) else None
            if _keep_joiner(cp, out[-1] if out else None, after):
                out.append(cp)
        elif cp not in _IGNORABLE:
            out.append(cp)
    start, end = 0, len(out)
    while start < end and out[start] in EDGE_WHITESPACE:
        start += 1
    while end > start and out[end - 1] in EDGE_WHITESPACE:
        end -= 1
    return "".join(map(chr, out[start:end]))


def without_controls(text: str) -> str:
    """``text`` with control characters other than newline and tab removed:
    past turns are stored as sent, but shown without terminal escapes."""
    return "".join(c for c in text if c in "\n\t" or not _is_control(ord(c)))


def char_count(text: str) -> int:
    """The one character count: code points of the normalized text."""
    return len(normalize(text))


def header(count: int) -> str:
    """The block's header in the prompt."""
    return f"Personal memory ({count:,}/{LIMIT:,} characters)"


def etag(text: str | None) -> str:
    """A precondition token for a block's content; ``None`` is no block."""
    import hashlib  # OpenSSL's: loaded when an ETag is asked for, not with every command

    data = normalize(text).encode("utf-8") if text else b""
    return hashlib.sha256(data).hexdigest()[:32]


def lines(text: str) -> list[str]:
    """The block's lines; an empty block has none."""
    return text.split("\n") if text else []


@dataclass(frozen=True)
class Hunk:
    """One change: old lines ``[old_start, old_end)`` become new lines
    ``[new_start, new_end)``."""

    old_start: int
    old_end: int
    new_start: int
    new_end: int


@dataclass(frozen=True)
class LineDiff:
    """What a whole rewrite changed, line by line."""

    removed: tuple[str, ...]
    added: tuple[str, ...]
    hunks: tuple[Hunk, ...]


def line_diff(old: str, new: str) -> LineDiff:
    """The lines removed from ``old`` and added in ``new``, in order."""
    a, b = lines(old), lines(new)
    hunks = tuple(
        Hunk(i1, i2, j1, j2)
        for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
        if tag != "equal"
    )
    removed = tuple(line for h in hunks for line in a[h.old_start : h.old_end])
    added = tuple(line for h in hunks for line in b[h.new_start : h.new_end])
    return LineDiff(removed, added, hunks)


def audit_line(line: str) -> str:
    """A line as the audit log keeps it: at most AUDIT_LINE_CHARS characters."""
    if len(line) <= AUDIT_LINE_CHARS:
        return line
    return line[: AUDIT_LINE_CHARS - 1] + "…"
