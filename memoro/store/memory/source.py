"""What a backend hands the in-memory indexes: one consistent read of one
user's indexed history. The generation and every row read through one
snapshot agree, and rows newer than an id are exactly what was indexed
since a read that saw up to that id (a backend makes a user's new chunk
and vector ids grow in commit order)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # a backend opens without NumPy; its snapshots' readers load it
    import numpy as np
    import numpy.typing as npt

    Ints = npt.NDArray[np.int64]
    Floats = npt.NDArray[np.float32]


@dataclass(frozen=True)
class ChunkRows:
    """Chunks with their packed keyword terms (``ChunkTerms.pack``): each
    ``terms`` entry holds the 8-byte term ids, ``counts`` the 4-byte counts;
    ``lengths`` and ``question_lengths`` count the chunk's terms and how
    many of them are its turn's question's.
    ``places`` is (conversation id, seq) of each chunk's turn when read as
    new rows, else empty."""

    ids: list[int]
    turns: list[int]
    terms: list[bytes]
    counts: list[bytes]
    lengths: list[int]
    question_lengths: list[int]
    places: list[tuple[str, int]]

    @classmethod
    def of(cls, rows: Sequence[Sequence[Any]]) -> ChunkRows:
        """Rows of (id, turn id, term ids, counts, length, question length),
        optionally then (conversation id, seq)."""
        ids, turns, terms, counts, lengths, asked, *place = (
            list(c) for c in zip(*rows, strict=True)
        )
        places = list(zip(place[0], place[1], strict=True)) if place else []
        return cls(ids, turns, terms, counts, lengths, asked, places)

    @classmethod
    def none(cls) -> ChunkRows:
        return cls([], [], [], [], [], [], [])


@dataclass(frozen=True)
class VectorRows:
    """Vectors (one a row, float32) of visible chunks, with their ids."""

    ids: Ints
    chunks: Ints
    turns: Ints
    vectors: Floats


@dataclass(frozen=True)
class Since:
    """What a user's cached indexes hold: the chunks up to id ``chunk`` and,
    with a ``model``, its vectors up to id ``vector``."""

    chunk: int
    model: str | None
    vector: int


@dataclass(frozen=True)
class Changes:
    """What a user's indexes lack since a ``Since``, from one read: the
    user's generation, the visible chunks with higher ids (with places) and
    the model's vectors with higher ids."""

    generation: int
    chunks: ChunkRows
    vectors: list[VectorRows]


def changes(rows: Snapshot, since: Since) -> Changes:
    """``Changes`` read through ``rows``, a statement each (a backend may
    read them in one round trip instead)."""
    vectors = list(rows.vectors(since.model, since.vector)) if since.model else []
    return Changes(rows.generation(), rows.new_chunks(since.chunk), vectors)


class Snapshot(Protocol):
    """One read transaction over one user's history."""

    def chunk_count(self) -> int:
        """How many chunks the user has (deleted conversations' included
        until they are purged)."""

    def generation(self) -> int:
        """How many times the user's chunks or vectors were removed or
        replaced: an index built at another generation is stale."""

    def turns(self) -> tuple[list[tuple[int, str, int]], set[str]]:
        """Every turn of the user as (id, conversation id, seq), and the
        ids of the conversations the user deleted."""

    def chunks(self) -> Iterator[ChunkRows]:
        """Every chunk of the user, in batches (deleted conversations' too:
        the caller leaves them out by turn)."""

    def new_chunks(self, after: int) -> ChunkRows:
        """The visible chunks with an id above ``after``, with places."""

    def vectors(self, model: str, after: int) -> Iterator[VectorRows]:
        """The visible chunks' vectors from ``model`` with an id above
        ``after``, in batches."""

    def vector_model(self) -> str | None:
        """The model of some vector of the user, if any."""

    def saved(self, kind: str) -> bytes | None:
        """The saved copy of the user's index ``kind`` (``saved.py``) if
        one was saved at the current generation."""
