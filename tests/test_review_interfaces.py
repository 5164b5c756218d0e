"""Memory review (M12) through every interface with the same names: HTTP
for the authenticated user only, the remote Python clients (sync and async)
and the CLI, each with the scripted model over real HTTP; errors in the one
envelope (404, 409, 412, 501, 502, 504) and CLI exit codes."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from memoro.cli import cli
from memoro.client import AsyncMemoroClient, MemoroClient
from memoro.errors import BlockChanged, ModelError, NoProposal
from memoro.models import Outcome, WriteSource
from memoro.service import Memoro
from memoro.settings import Settings
from memoro.store.sqlite import SqliteStore
from memoro.testing import HashEmbedder, ScriptedLLM, Step, call, say
from memoro.web.security import AuthConfig
from tests.test_client import SIGNER, Blocking
from tests.test_http import client
from tests.web_server import SECRET, running

BETTER = "Preferred name: Al\nLikes big tasks broken into small steps"


@pytest.fixture
def llm() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as served:
        yield served


def model(llm: ScriptedLLM, **more: Any) -> dict[str, Any]:
    return {
        "llm": "openai",
        "llm_url": llm.openai_url,
        "llm_model": "scripted",
        "llm_key": "test",
        "review_timeout": 60,  # a deadline only tests about it shorten
        **more,
    }


@pytest.fixture
def service(tmp_path: Path, llm: ScriptedLLM) -> Iterator[Memoro]:
    memoro = Memoro(
        SqliteStore(tmp_path / "memoro.db"),
        Settings(home=tmp_path, **model(llm)),
        embedder=HashEmbedder(),
        worker=False,
    )
    yield memoro
    memoro.close()


def _history(memoro: Memoro, user: str = "ann") -> None:
    memoro.write_block(user, "Preferred name: Al\nFocusing on project A this week", writer="model")
    memoro.record_turn(user, "plan", "I like to break big tasks into small steps.", "Noted.")


@pytest.fixture
def server(service: Memoro) -> Iterator[str]:
    with running(service, AuthConfig.build("token", SECRET, "local")) as url:
        yield url


def test_http_review_proposal_accept_and_dismiss_for_the_authenticated_user(
    server: str, service: Memoro, llm: ScriptedLLM
) -> None:
    _history(service)
    _history(service, "bob")
    llm.script(call("memory_write", {"block": BETTER}), call("memory_write", {"block": BETTER}))
    with client(server, "ann") as ann, client(server, "bob") as bob:
        assert ann.get("/v1/memory/proposal").json() == {"proposal": None}
        made = ann.post("/v1/memory/review", json={})
        assert made.status_code == 200, made.text
        proposal = made.json()["proposal"]
        assert proposal["removed"] == ["Focusing on project A this week"]
        assert proposal["added"] == ["Likes big tasks broken into small steps"]
        assert (proposal["stale"], proposal["applied"], proposal["turns_read"]) == (False, False, 1)
        assert ann.get("/v1/memory/proposal").json() == {"proposal": proposal}
        # another user never sees it, by any route
        missing = bob.get("/v1/memory/proposal")
        assert (missing.status_code, missing.json()) == (200, {"proposal": None})
        assert bob.post("/v1/memory/proposal/accept").status_code == 404
        assert bob.delete("/v1/memory/proposal").status_code == 404
        assert service.proposal("ann") is not None
        # accepting another proposal than the one shown saves nothing
        wrong = ann.post("/v1/memory/proposal/accept", headers={"If-Match": '"' + "0" * 32 + '"'})
        assert (wrong.status_code, wrong.json()["error"]["code"]) == (404, "no_proposal")
        accepted = ann.post(
            "/v1/memory/proposal/accept", headers={"If-Match": f'"{proposal["etag"]}"'}
        )
        assert accepted.status_code == 200, accepted.text
        assert accepted.json()["block"] == BETTER and accepted.json()["outcome"] == "saved"
        audit = ann.get("/v1/memory/audit").json()
        assert (audit[0]["writer"], audit[0]["source"]) == ("model", "review")
        assert audit[1]["source"] is None
        assert ann.get("/v1/memory/proposal").json() == {"proposal": None}
        # bob's own review, then dismissed
        assert bob.post("/v1/memory/review").status_code == 200  # no body: propose
        assert bob.delete("/v1/memory/proposal").status_code == 204
        assert bob.delete("/v1/memory/proposal").status_code == 404
    assert service.read_block("bob").text.endswith("this week")  # type: ignore[union-attr]


def test_http_a_stale_proposal_is_412_with_the_block_as_it_is_now(
    server: str, service: Memoro, llm: ScriptedLLM
) -> None:
    _history(service)
    llm.script(call("memory_write", {"block": BETTER}), say("NO CHANGE"))
    with client(server, "ann") as ann:
        ann.post("/v1/memory/review", json={"apply": False})
        ann.put("/v1/memory", json={"block": "Preferred name: Alfie"})
        assert ann.get("/v1/memory/proposal").json()["proposal"]["stale"] is True
        refused = ann.post("/v1/memory/proposal/accept")
        assert refused.status_code == 412
        error = refused.json()["error"]
        assert error["code"] == "block_changed" and error["current"] == "Preferred name: Alfie"
        assert "fresh review" in error["message"]
        fresh = ann.post("/v1/memory/review", json={"apply": True})
        assert fresh.status_code == 200 and fresh.json() == {"proposal": None}
        assert ann.get("/v1/memory/proposal").json() == {"proposal": None}
        assert ann.get("/v1/memory").json()["block"] == "Preferred name: Alfie"


def test_http_apply_saves_and_bad_input_is_422(
    server: str, service: Memoro, llm: ScriptedLLM
) -> None:
    _history(service)
    llm.script(call("memory_write", {"block": BETTER}))
    with client(server, "ann") as ann:
        for body in ({"apply": "yes"}, {"apply": 1}, [True]):
            bad = ann.post("/v1/memory/review", json=body)
            assert (bad.status_code, bad.json()["error"]["code"]) == (422, "invalid_input")
        assert llm.requests == []
        applied = ann.post("/v1/memory/review", json={"apply": True}).json()["proposal"]
        assert applied["applied"] is True
        assert ann.get("/v1/memory").json()["block"] == BETTER


def test_http_model_failures_are_502_and_504_in_the_envelope_and_change_nothing(
    tmp_path: Path,
) -> None:
    held = threading.Event()
    with ScriptedLLM([say("I'd rather not."), Step(text="thinking", hold=held)]) as llm:
        # the refusal under the usual deadline: on a loaded machine even a
        # model that answers at once may take more than a second to be heard
        patient = Memoro(
            SqliteStore(tmp_path / "m.db"),
            Settings(home=tmp_path, **model(llm)),
            embedder=None,
            worker=False,
        )
        _history(patient)
        with (
            running(patient, AuthConfig.build("token", SECRET, "local")) as url,
            client(url, "ann") as ann,
        ):
            refused = ann.post("/v1/memory/review")
            assert refused.status_code == 502
            assert refused.json()["error"]["code"] == "model_error"
        patient.close()
        memoro = Memoro(
            SqliteStore(tmp_path / "m.db"),
            Settings(home=tmp_path, **model(llm, review_timeout=1)),
            embedder=None,
            worker=False,
        )
        with (
            running(memoro, AuthConfig.build("token", SECRET, "local")) as url,
            client(url, "ann") as ann,
        ):
            slow = ann.post("/v1/memory/review")
            assert slow.status_code == 504
            assert slow.json()["error"]["code"] == "model_timeout"
            held.set()
            assert ann.get("/v1/memory/proposal").json() == {"proposal": None}
        memoro.close()
    down = Memoro.open(tmp_path / "down", embedder="keyword", worker=False, **model(llm))
    _history(down)
    with (
        running(down, AuthConfig.build("token", SECRET, "local")) as url,
        client(url, "ann") as ann,
    ):
        gone = ann.post("/v1/memory/review")
        assert (gone.status_code, gone.json()["error"]["code"]) == (502, "model_error")
    down.close()
    none = Memoro.open(tmp_path / "none", embedder="keyword", worker=False)
    with (
        running(none, AuthConfig.build("token", SECRET, "local")) as url,
        client(url, "ann") as ann,
    ):
        missing = ann.post("/v1/memory/review")
        assert (missing.status_code, missing.json()["error"]["code"]) == (501, "no_model")
    none.close()


def test_http_a_second_review_of_a_user_while_one_runs_is_409(
    server: str, service: Memoro, llm: ScriptedLLM
) -> None:
    _history(service)
    held = threading.Event()
    llm.script(Step(text="NO CHANGE", hold=held))
    with client(server, "ann") as ann, client(server, "ann") as again:
        first = threading.Thread(target=ann.post, args=("/v1/memory/review",))
        first.start()
        deadline = time.monotonic() + 60
        while not llm.requests:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        busy = again.post("/v1/memory/review")
        assert (busy.status_code, busy.json()["error"]["code"]) == (409, "review_running")
        held.set()
        first.join()


@pytest.mark.parametrize("apply", [False, True])
def test_http_a_review_whose_user_is_erased_meanwhile_is_409_user_erased(
    server: str, service: Memoro, llm: ScriptedLLM, apply: bool
) -> None:
    """DELETE /v1/me while the review waits on the model: the review
    answers 409 user_erased, never a proposal holding the erased block."""
    _history(service)
    held = threading.Event()
    llm.script(Step(tool_calls=[("memory_write", {"block": BETTER})], hold=held))
    answers: list[httpx.Response] = []
    with client(server, "ann") as ann, client(server, "ann") as erasing:
        review = threading.Thread(
            target=lambda: answers.append(ann.post("/v1/memory/review", json={"apply": apply}))
        )
        review.start()
        deadline = time.monotonic() + 60
        while not llm.requests:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert erasing.delete("/v1/me").status_code == 200
        held.set()
        review.join()
        (answer,) = answers
        assert answer.status_code == 409, answer.text
        assert answer.json()["error"]["code"] == "user_erased"
        assert "small steps" not in answer.text and "project A" not in answer.text
        assert erasing.get("/v1/memory/proposal").json() == {"proposal": None}
        assert erasing.get("/v1/memory").json()["block"] == ""


@pytest.mark.parametrize("kind", ["remote", "remote-async"])
def test_the_remote_clients_have_the_same_names_and_answers(
    server: str, service: Memoro, llm: ScriptedLLM, kind: str
) -> None:
    _history(service)
    memory: Any = (
        MemoroClient(server, SIGNER.issue)
        if kind == "remote"
        else Blocking(AsyncMemoroClient(server, SIGNER.issue))
    )
    llm.script(
        call("memory_write", {"block": BETTER}),
        say("NO CHANGE"),
        say("nope"),
        call("memory_write", {"block": BETTER + "\nWrites stories"}),
    )
    try:
        assert memory.proposal("ann") is None
        made = memory.review("ann")
        assert made is not None and made.added == ("Likes big tasks broken into small steps",)
        assert memory.proposal("ann").block == BETTER
        assert memory.review("ann") is None  # no change: the pending one is superseded
        with pytest.raises(ModelError, match="neither"):
            memory.review("ann")
        again = memory.review("ann")
        with pytest.raises(NoProposal):
            memory.accept_proposal("ann", expected=made.etag)
        result = memory.accept_proposal("ann", expected=again.etag)
        assert result.outcome is Outcome.SAVED
        assert memory.audit("ann")[0].source is WriteSource.REVIEW
        assert memory.dismiss_proposal("ann") is False
        service.store.restore_proposal(again)  # one made before a change
        memory.write_block("ann", "Preferred name: Alfie", writer="user")
        with pytest.raises(BlockChanged):
            memory.accept_proposal("ann")
        assert memory.proposal("ann").stale is True
        assert memory.dismiss_proposal("ann") is True
    finally:
        memory.close()


def _cli(home: Path, llm: ScriptedLLM | None, *args: str) -> Any:
    env = {"MEMORO_HOME": str(home), "MEMORO_EMBEDDER": "keyword"}
    if llm is not None:
        env |= {
            "MEMORO_LLM": "openai",
            "MEMORO_LLM_URL": llm.openai_url,
            "MEMORO_LLM_MODEL": "scripted",
            "MEMORO_LLM_KEY": "test",
        }
    return CliRunner().invoke(cli, list(args), env=env)


def test_the_cli_reviews_shows_accepts_and_dismisses(tmp_path: Path, llm: ScriptedLLM) -> None:
    memoro = Memoro.open(tmp_path, embedder="keyword", worker=False)
    _history(memoro)
    memoro.close()
    llm.script(call("memory_write", {"block": BETTER}))
    reviewed = _cli(tmp_path, llm, "memory", "review", "--user", "ann")
    assert reviewed.exit_code == 0, reviewed.output
    assert "Proposed, not saved: it removes 1 line, adds 1 line" in reviewed.stdout
    assert "  - Focusing on project A this week" in reviewed.stdout
    assert "  + Likes big tasks broken into small steps" in reviewed.stdout
    assert "read 1 turn" in reviewed.stdout
    shown = _cli(tmp_path, None, "memory", "proposal", "--user", "ann", "--json")
    assert shown.exit_code == 0 and '"block": "Preferred name: Al\\nLikes big' in shown.stdout
    accepted = _cli(tmp_path, None, "memory", "proposal", "--user", "ann", "--accept")
    assert accepted.exit_code == 0, accepted.output
    assert "Saved: removed 1 line, added 1 line" in accepted.stdout
    none = _cli(tmp_path, None, "memory", "proposal", "--user", "ann")
    assert (none.exit_code, none.stdout) == (0, "")
    assert "There is no proposal for ann." in none.stderr
    again = _cli(tmp_path, None, "memory", "proposal", "--user", "ann", "--accept")
    assert again.exit_code == 1 and "no memory proposal to accept" in again.stderr
    llm.script(say("NO CHANGE"))
    unchanged = _cli(tmp_path, llm, "memory", "review", "--user", "ann")
    assert unchanged.stdout == "Nothing should change: the model found the block up to date.\n"
    both = _cli(tmp_path, None, "memory", "proposal", "--accept", "--dismiss")
    assert both.exit_code == 2


def test_the_cli_apply_and_its_failures(tmp_path: Path, llm: ScriptedLLM) -> None:
    memoro = Memoro.open(tmp_path, embedder="keyword", worker=False)
    _history(memoro)
    memoro.close()
    no_model = _cli(tmp_path, None, "memory", "review", "--user", "ann")
    assert no_model.exit_code == 2 and "MEMORO_LLM" in no_model.stderr
    llm.script(say("I can't do that."))
    failed = _cli(tmp_path, llm, "memory", "review", "--user", "ann")
    assert failed.exit_code == 1
    assert "neither with a memory_write call nor with NO CHANGE" in failed.stderr
    assert "Traceback" not in failed.output
    llm.script(call("memory_write", {"block": BETTER}))
    applied = _cli(tmp_path, llm, "memory", "review", "--user", "ann", "--apply")
    assert applied.exit_code == 0, applied.output
    assert applied.stdout.startswith("Saved the review's block: it removes 1 line, adds 1 line")
    shown = _cli(tmp_path, None, "memory", "show", "--user", "ann")
    assert shown.stdout == BETTER + "\n"
    dismissed = _cli(tmp_path, None, "memory", "proposal", "--user", "ann", "--dismiss")
    assert dismissed.exit_code == 0 and "There is no proposal for ann." in dismissed.stderr


def test_a_server_on_auth_local_reviews_its_one_user(service: Memoro, llm: ScriptedLLM) -> None:
    _history(service, "me")
    llm.script(say("NO CHANGE"))
    with running(service, AuthConfig.build("local", "", "me")) as url:
        answer = httpx.post(url + "/v1/memory/review", json={"apply": False}, timeout=60)
    assert answer.status_code == 200 and answer.json() == {"proposal": None}


def test_failed_reviews_are_counted_in_memoro_status_and_metrics(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    from tests.test_ops import METRICS_TOKEN, SCRAPE, _sample

    settings = Settings(
        home=tmp_path,
        metrics_token=METRICS_TOKEN,
        review="propose",
        review_min_turns=1,
        review_every=0,
        **model(llm),
    )
    memoro = Memoro(SqliteStore(tmp_path / "memoro.db"), settings, embedder=None, worker=False)
    _history(memoro)
    _history(memoro, "bob")
    llm.script(say("Sure, done!"), call("memory_write", {"block": BETTER}))
    memoro.index_pending()
    assert len(llm.requests) == 2
    with (
        running(memoro, AuthConfig.build("token", SECRET, "local")) as url,
        httpx.Client(base_url=url) as http,
    ):
        scraped = http.get("/metrics", headers=SCRAPE).text
    assert _sample(scraped, "memoro_review_failing_users") == 1
    assert _sample(scraped, "memoro_review_proposals") == 1
    assert _sample(scraped, "memoro_reviews_total", outcome="failed") >= 1
    assert _sample(scraped, "memoro_reviews_total", outcome="proposed") >= 1
    assert "ann" not in scraped and "bob" not in scraped
    memoro.close()
    env = {
        "MEMORO_HOME": str(tmp_path),
        "MEMORO_EMBEDDER": "keyword",
        "MEMORO_REVIEW": "propose",
    }
    shown = CliRunner().invoke(cli, ["status"], env=env)
    assert (
        "Memory reviews:  proposing; 1 proposal waiting for their user, 1 user reviewed,"
        " 1 user whose last review failed (1 failure in a row in all)" in shown.stdout
    )
    assert "the worker tries again later" in shown.stdout
    status = CliRunner().invoke(cli, ["status", "--json"], env=env)
    assert '"failing_users": 1' in status.stdout
