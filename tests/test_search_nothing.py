"""Nothing matches is an answer (C9): a search whose best match is not
relevant enough on the query's own scale returns no hits, and every
interface says so in the same words."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from memoro.auth import Signer
from memoro.cli import cli
from memoro.history.embed import LocalEmbedder
from memoro.history.fusion import Mode, relevant
from memoro.service import Memoro
from memoro.settings import Settings
from memoro.store.sqlite import SqliteStore
from memoro.tools import render_search
from memoro.web.security import AuthConfig
from tests.web_server import SECRET, running

HISTORY = [
    ("Which flight should I take to Lisbon in May?", "TAP at 9:40 from Oslo, seat 12A."),
    ("How long should I boil an egg for a soft yolk?", "About six and a half minutes."),
    ("My sourdough starter smells like acetone.", "It is hungry: feed it twice a day."),
    ("Can you review my cover letter for the nurse job?", "Lead with your ICU years."),
    ("What is a good stretch for a stiff lower back?", "Try cat-cow, slowly, ten times."),
    ("Recommend a novel like The Remains of the Day.", "Try Stoner by John Williams."),
    ("How do I repot a monstera?", "One size up, chunky soil, water after a day."),
    ("Explain compound interest to my kid.", "Money that earns money on its money."),
    ("My bike chain keeps slipping.", "The cassette is worn; replace chain and cassette."),
    ("What should I pack for a winter hike?", "Layers, a thermos, microspikes."),
    ("How do I remove a red wine stain?", "Salt first, then cold water and soap."),
    ("Plan a birthday party for a six-year-old.", "Treasure hunt, pizza, one craft table."),
    ("Is it worth learning Rust after Python?", "Yes, for systems work and speed."),
    ("Write a haiku about autumn rain.", "Grey drops on red leaves / the gutter hums."),
    ("How do I ask my landlord to fix the heating?", "In writing, with dates and photos."),
    ("Best way to learn Spanish verbs?", "Spaced repetition, ten verbs a day."),
    ("My cat scratches the sofa.", "Put a sisal post right next to it."),
    ("What's a quick vegetarian dinner?", "Chickpea curry with spinach, 20 minutes."),
    ("How do I set up a budget spreadsheet?", "Income, fixed costs, then envelopes."),
    ("Help me name my podcast about gardening.", "Dirt Talk, or The Compost Heap."),
    ("How do I tune a ukulele?", "G C E A, the G string above middle C."),
    ("Tips for a job interview at a bank?", "Know their quarterly numbers."),
    ("What's the capital of Australia?", "Canberra, not Sydney."),
    ("How often should I water tomatoes?", "Deeply, every two or three days."),
    ("Suggest a board game for four adults.", "Wingspan or Codenames."),
]
NONSENSE = ["zzqxv", "qwpf lkjh", "xkcdq vrrtz plomb", "bnmv"]
NEVER_DISCUSSED = [
    "What did my dentist say about the crown on my molar?",
    "Which saxophone mouthpiece did I buy?",
]


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return LocalEmbedder()


@pytest.fixture
def model_memoro(tmp_path: Path, local: LocalEmbedder) -> Iterator[Memoro]:
    """The service with the real local model over a varied history."""
    service = Memoro(
        SqliteStore(tmp_path / "memoro.db"), Settings(home=tmp_path), embedder=local, worker=False
    )
    for i, (question, answer) in enumerate(HISTORY):
        service.record_turn("ann", f"c{i}", question, answer)
    service.index_pending()
    yield service
    service.close()


def test_c9_nonsense_and_the_never_discussed_find_nothing_real_questions_their_turn(
    model_memoro: Memoro,
) -> None:
    for query in NONSENSE + NEVER_DISCUSSED:
        for mode in ("hybrid", "keyword", "semantic"):
            assert model_memoro.search("ann", query, mode=mode) == [], (query, mode)
    for query, expected in [
        ("which flight did we pick to Lisbon", "TAP at 9:40"),  # words
        ("my kitty is ruining the couch", "sisal post"),  # meaning
        ("plane seat to Portugal", "seat 12A"),
    ]:
        hits = model_memoro.search("ann", query)
        assert hits and expected in hits[0].text, query


def test_c9_every_interface_says_nothing_matches_in_the_same_words(
    model_memoro: Memoro, tmp_path: Path
) -> None:
    said = model_memoro.execute_tool("ann", "conversation_search", {"query": "zzqxv"})
    assert not said.is_error
    assert said.text == (
        "No past conversation matches 'zzqxv': nothing said before is close enough to it."
        " Answer from this conversation, or ask the user; do not guess what was said before."
    )
    assert render_search("zzqxv", model_memoro.search("ann", "zzqxv")) == said.text
    env = {"MEMORO_HOME": str(tmp_path)}
    # a person at the command line is told in a person's words (the advice
    # on what to answer is the model's), on stderr: stdout stays empty
    printed = CliRunner().invoke(cli, ["search", "-u", "ann", "zzqxv"], env=env)
    assert printed.exit_code == 0 and printed.stdout == ""
    assert printed.stderr == "Nothing in ann's past conversations matches 'zzqxv'.\n"
    as_json = CliRunner().invoke(cli, ["search", "-u", "ann", "zzqxv", "--json"], env=env)
    assert '"hits": []' in as_json.output
    token = Signer(SECRET).issue("ann")
    with (
        running(model_memoro, AuthConfig.build("token", SECRET, "local")) as url,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as http,
    ):
        assert http.get("/v1/search", params={"q": "zzqxv"}).json() == {
            "hits": [],
            "warnings": [],
        }
        tool = http.post("/v1/tools/conversation_search", json={"arguments": {"query": "zzqxv"}})
        assert tool.json() == {"text": said.text, "is_error": False}


def test_c9_coverage_weighs_the_query_words_by_how_rare_they_are(history: Memoro) -> None:
    history.record_turn("ann", "c", "the heron at the lake", "ok")
    for i in range(30):
        history.record_turn("ann", f"n{i}", f"note {i} about the lake", "fine")
    history.index_pending()
    store = history.store
    assert store.keyword_search("ann", "heron lake", 10).coverage == pytest.approx(1.0)
    # 'lake' is in every chunk, 'heron' in one: holding 'lake' alone is little
    lake = store.keyword_search("ann", "lake zebra", 10).coverage
    heron = store.keyword_search("ann", "heron zebra", 10).coverage
    assert 0 < lake < 0.1 < heron < 0.6
    assert store.keyword_search("ann", "zebra", 10).coverage == 0.0
    # a short history is weighed as if it had 20 chunks: its words do not look common
    history.record_turn("bob", "c", "the heron at the lake", "ok")
    history.index_pending()
    short = store.keyword_search("bob", "heron regret", 10).coverage
    assert 0.3 < short < 0.5


def test_c9_relevance_is_read_on_the_querys_own_scale() -> None:
    # keyword side: the share of the query the best match holds
    assert relevant(Mode.HYBRID, 0.3, 0.0, 0.0)
    assert not relevant(Mode.HYBRID, 0.29, 0.0, 0.0)
    assert not relevant(Mode.SEMANTIC, 0.9, None, None)  # semantic mode ignores keywords
    # without vectors a paraphrase has only its words: any match counts
    assert relevant(Mode.KEYWORD, 0.05, None, None)
    assert relevant(Mode.HYBRID, 0.05, None, None)
    assert not relevant(Mode.KEYWORD, 0.0, None, None)
    # semantic side: how far the best cosine rises from the query's median towards 1
    assert relevant(Mode.HYBRID, 0.1, 0.40, 0.20)  # (0.40 - 0.20) / 0.80 = 0.25
    assert not relevant(Mode.HYBRID, 0.1, 0.39, 0.20)
    assert relevant(Mode.HYBRID, 0.1, 0.86, 0.80)  # a model whose cosines sit high
    assert not relevant(Mode.HYBRID, 0.1, 0.84, 0.80)
    assert relevant(Mode.SEMANTIC, 0.0, 0.40, 0.20)
    # no word of the query anywhere in the history: meaning alone must go past half way
    assert not relevant(Mode.HYBRID, 0.0, 0.59, 0.20)
    assert relevant(Mode.HYBRID, 0.0, 0.61, 0.20)
    assert not relevant(Mode.KEYWORD, 0.0, 0.99, 0.0)  # keyword mode ignores vectors
    # a short history has no median: a cosine above the noise floor counts
    assert relevant(Mode.HYBRID, 0.0, 0.21, None)
    assert not relevant(Mode.HYBRID, 0.0, 0.19, None)
    assert relevant(Mode.SEMANTIC, 0.0, 0.01, None)
    # the thresholds can be moved, for measuring
    assert relevant(Mode.HYBRID, 0.1, 0.0, 0.0, keyword_evidence=0.1)
    assert not relevant(Mode.HYBRID, 0.1, 0.40, 0.20, semantic_evidence=0.3)
