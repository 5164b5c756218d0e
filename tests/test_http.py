"""The HTTP API over a real socket (uvicorn on loopback): authentication,
isolation between users, preconditions, limits and error shapes."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import jwt
import pytest

from memoro.auth import Sessions, Signer
from memoro.service import Memoro
from memoro.tools import anthropic_tools, openai_tools
from memoro.web.security import AuthConfig
from tests.web_server import SECRET, running

SIGNER = Signer(SECRET)


@pytest.fixture
def service(web_service: Memoro) -> Memoro:
    return web_service


@pytest.fixture
def token_server(service: Memoro) -> Iterator[str]:
    with running(service, AuthConfig.build("token", SECRET, "local")) as url:
        yield url


@pytest.fixture
def local_server(service: Memoro) -> Iterator[str]:
    with running(service, AuthConfig.build("local", "", "me")) as url:
        yield url


def client(url: str, user: str | None = None, token: str | None = None) -> httpx.Client:
    headers = {}
    if user is not None or token is not None:
        headers["Authorization"] = f"Bearer {token or SIGNER.issue(user or '')}"
    return httpx.Client(base_url=url, headers=headers, timeout=60)


ENDPOINTS = [
    ("GET", "/v1/memory", None),
    ("PUT", "/v1/memory", {"block": "x"}),
    ("DELETE", "/v1/memory", None),
    ("GET", "/v1/memory/audit", None),
    ("GET", "/v1/prompt", None),
    ("POST", "/v1/turns", {"conversation": "c", "question": "q", "answer": "a"}),
    ("GET", "/v1/conversations", None),
    ("GET", "/v1/conversations/c", None),
    ("DELETE", "/v1/conversations/c", None),
    ("GET", "/v1/search?q=x", None),
    ("POST", "/v1/tools/conversation_search", {"arguments": {"query": "x"}}),
]


@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS)
def test_no_token_is_401_on_every_endpoint(
    token_server: str, method: str, path: str, body: object
) -> None:
    with client(token_server) as http:
        response = http.request(method, path, json=body)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


@pytest.mark.parametrize(
    "token",
    [
        SIGNER.issue("ann", ttl=-3600),  # expired
        Signer("another-secret-that-is-long-enough-012345").issue("ann"),  # forged
        SIGNER.issue("ann")[:-3] + "AAA",  # tampered signature
        "v1.e30.AAAA",
        "not a token",
    ],
    ids=["expired", "forged", "tampered", "old-format", "garbage"],
)
def test_expired_forged_and_malformed_tokens_are_401(token_server: str, token: str) -> None:
    with client(token_server, token=token) as http:
        assert http.get("/v1/memory").status_code == 401


def test_a_session_token_is_not_accepted_as_a_bearer_token(token_server: str) -> None:
    session, _ = Sessions(SECRET).start("ann")
    with client(token_server, token=session) as http:
        assert http.get("/v1/memory").status_code == 401


def test_a_user_token_is_not_accepted_as_a_session(token_server: str) -> None:
    cookies = {"memoro_session": SIGNER.issue("ann")}
    with httpx.Client(base_url=token_server, cookies=cookies, timeout=60) as browser:
        assert browser.get("/v1/memory").status_code == 401


def test_user_a_never_reads_writes_searches_or_deletes_b_data(
    token_server: str, service: Memoro
) -> None:
    with client(token_server, "bob") as bob:
        assert bob.put("/v1/memory", json={"block": "Bob's secret block"}).status_code == 200
        bob.post("/v1/turns", json={"conversation": "bc", "question": "bob secret", "answer": "z"})
    service.index_pending()
    with client(token_server, "ann") as ann:
        assert ann.get("/v1/memory").json()["block"] == ""
        assert ann.get("/v1/memory/audit").json() == []
        assert "Bob's secret" not in ann.get("/v1/prompt").json()["text"]
        assert ann.get("/v1/conversations").json() == []
        assert ann.get("/v1/conversations/bc").status_code == 404
        assert ann.delete("/v1/conversations/bc").status_code == 404
        assert ann.get("/v1/search", params={"q": "bob secret"}).json()["hits"] == []
        spoof = ann.post(
            "/v1/tools/conversation_search", json={"arguments": {"query": "secret", "user": "bob"}}
        ).json()
        assert spoof["is_error"] and "Bob" not in spoof["text"]
        assert ann.put("/v1/memory?user=bob", json={"block": "ann's"}).status_code == 200
        assert ann.delete("/v1/memory").json()["deleted"] is True
    assert service.read_block("bob").text == "Bob's secret block"  # type: ignore[union-attr]
    assert [c.id for c in service.list_conversations("bob")] == ["bc"]


def test_a_stale_if_match_is_412_and_changes_nothing(token_server: str) -> None:
    with client(token_server, "ann") as http:
        first = http.put("/v1/memory", json={"block": "v1"})
        etag = first.headers["ETag"]
        assert http.put("/v1/memory", json={"block": "v2"}).status_code == 200
        stale = http.put("/v1/memory", json={"block": "v3"}, headers={"If-Match": etag})
        assert stale.status_code == 412
        assert stale.json()["error"] == {
            "code": "block_changed",
            "message": "Memory was changed elsewhere.",
            "current": "v2",
            "etag": http.get("/v1/memory").json()["etag"],
        }
        fresh = http.get("/v1/memory").headers["ETag"]
        assert http.put("/v1/memory", json={"block": "v3"}, headers={"If-Match": fresh}).is_success
        assert http.get("/v1/memory").json()["block"] == "v3"


def test_without_if_match_the_later_save_wins(token_server: str) -> None:
    with client(token_server, "ann") as http:
        http.put("/v1/memory", json={"block": "first"})
        http.put("/v1/memory", json={"block": "second"})
        assert http.get("/v1/memory").json()["block"] == "second"


def test_rejected_writes_are_422_with_the_reason(token_server: str) -> None:
    with client(token_server, "ann") as http:
        too_long = http.put("/v1/memory", json={"block": "x" * 4001})
        assert too_long.status_code == 422 and too_long.json()["over_by"] == 1
        empty = http.put("/v1/memory", json={"block": "  \u200b "})
        assert empty.status_code == 422 and empty.json()["outcome"] == "empty"


def test_an_oversized_body_is_413(token_server: str) -> None:
    with client(token_server, "ann") as http:
        big = json.dumps({"conversation": "c", "question": "x" * (5 * 1024 * 1024), "answer": ""})
        response = http.post("/v1/turns", content=big, headers={"Content-Type": "application/json"})
    assert response.status_code == 413 and response.json()["error"]["code"] == "too_large"


def test_a_chunked_body_over_4_mib_is_413_and_stores_nothing(
    token_server: str, service: Memoro
) -> None:
    def chunks() -> Iterator[bytes]:  # no Content-Length: Transfer-Encoding chunked
        yield b'{"conversation": "c", "question": "'
        for _ in range(5):
            yield b"x" * (1024 * 1024)
        yield b'", "answer": "a"}'

    with client(token_server, "ann") as http:
        response = http.post(
            "/v1/turns", content=chunks(), headers={"Content-Type": "application/json"}
        )
        assert "content-length" not in response.request.headers
        assert response.status_code == 413 and response.json()["error"]["code"] == "too_large"
        small = http.post(
            "/v1/turns",
            content=iter([b'{"conversation": "c", ', b'"question": "q", "answer": "a"}']),
            headers={"Content-Type": "application/json"},
        )
        assert small.status_code == 201  # a small chunked body is read whole
    assert [t.question for t in service.conversation_turns("ann", "c")] == ["q"]


@pytest.mark.parametrize(
    "claims",
    [
        b"[1, 2]",
        b'"ann"',
        b"17",
        b"null",
        b'{"sub": "a\\u0000b", "exp": 9999999999}',
        b'{"sub": 17, "exp": 9999999999}',
        b'{"sub": "ann"}',
    ],
    ids=["array", "string", "number", "null", "control-in-user", "numeric-user", "no-expiry"],
)
def test_a_validly_signed_token_with_claims_memoro_cannot_use_is_401(
    token_server: str, claims: bytes
) -> None:
    token = jwt.api_jws.encode(claims, SECRET, algorithm="HS256")
    with client(token_server, token=token) as http:
        response = http.get("/v1/memory")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="memoro", error="invalid_token"'


def test_every_401_says_how_to_authenticate(token_server: str) -> None:
    bare = 'Bearer realm="memoro"'
    with client(token_server) as http:
        assert http.get("/v1/memory").headers["WWW-Authenticate"] == bare
        page = http.get("/memory")
        assert page.status_code == 401 and page.headers["WWW-Authenticate"] == bare
        mcp = http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert mcp.status_code == 401 and mcp.headers["WWW-Authenticate"] == bare
    with client(token_server, token="not-a-token") as http:
        assert http.get("/v1/memory").headers["WWW-Authenticate"].endswith('"invalid_token"')


def test_a_405_lists_every_method_the_path_has(token_server: str) -> None:
    with client(token_server, "ann") as http:
        memory = http.patch("/v1/memory", json={})
        conversation = http.put("/v1/conversations/a/b", json={})
    assert memory.status_code == 405 and memory.headers["Allow"] == "DELETE, GET, HEAD, PUT"
    assert conversation.status_code == 405
    assert conversation.headers["Allow"] == "DELETE, GET, HEAD"
    static = httpx.post(f"{token_server}/static/style.css")
    assert static.status_code == 405 and static.headers["Allow"] == "GET, HEAD"


def test_head_answers_as_get_without_a_body(token_server: str) -> None:
    with client(token_server, "ann") as http:
        http.put("/v1/memory", json={"block": "Preferred name: Al"})
        for path in ("/v1/memory", "/healthz", "/docs", "/v1/export"):
            got, head = http.get(path), http.head(path)
            assert (head.status_code, head.content) == (got.status_code, b""), path
            assert head.headers["content-type"] == got.headers["content-type"], path
        assert http.head("/v1/memory").headers["etag"] == http.get("/v1/memory").headers["etag"]
        assert http.head("/v1/turns").status_code == 405  # a POST-only path
    assert httpx.head(f"{token_server}/v1/memory").status_code == 401  # still authenticated


def test_a_body_that_is_not_json_is_refused(token_server: str) -> None:
    with client(token_server, "ann") as http:
        response = http.put("/v1/memory", content="block=x", headers={"Content-Type": "text/plain"})
    assert response.status_code == 415


def test_invalid_input_is_a_json_error_with_a_stable_code(token_server: str) -> None:
    with client(token_server, "ann") as http:
        response = http.post("/v1/turns", json={"conversation": "", "question": 1})
        assert response.status_code == 422
        assert response.json()["error"]["code"] == "invalid_input"
        assert http.post("/v1/tools/nope", json={}).status_code == 404


@pytest.mark.parametrize("odd", ["1_0", " 1", "+1", "0.0", "１"])
@pytest.mark.parametrize(
    "path", ["/v1/conversations?offset=", "/v1/conversations?limit=", "/v1/memory/audit?limit="]
)
def test_a_whole_number_in_a_query_is_written_in_digits(
    local_server: str, path: str, odd: str
) -> None:
    """Found by schemathesis: pydantic read "1_0" or " 1" as a number."""
    answer = httpx.get(f"{local_server}{path}{odd}")
    assert answer.status_code == 422 and "written in digits" in answer.text
    assert httpx.get(f"{local_server}{path}10").status_code == 200


def test_turns_are_recorded_searched_and_deleted(token_server: str, service: Memoro) -> None:
    with client(token_server, "ann") as http:
        created = http.post(
            "/v1/turns",
            json={"conversation": "trip", "question": "Flights to Lisbon?", "answer": "TAP 9:40"},
        )
        assert created.status_code == 201
        service.index_pending()
        (hit,) = http.get("/v1/search", params={"q": "lisbon flights"}).json()["hits"]
        assert (hit["conversation"], hit["turn_id"]) == ("trip", created.json()["turn_id"])
        assert http.delete("/v1/conversations/trip").status_code == 204
        assert http.get("/v1/search", params={"q": "lisbon flights"}).json() == {
            "hits": [],
            "warnings": [],
        }


def test_a_turn_sent_again_with_its_key_is_200_not_201(token_server: str, service: Memoro) -> None:
    """201 Created only when the turn is created; the same key again finds
    the stored turn (200, created: false) and stores nothing more."""
    turn = {"conversation": "trip", "question": "Flights?", "answer": "TAP 9:40", "key": "m-1"}
    with client(token_server, "ann") as http:
        first = http.post("/v1/turns", json=turn)
        assert (first.status_code, first.json()["created"]) == (201, True)
        again = http.post("/v1/turns", json=turn)
        assert (again.status_code, again.json()["created"]) == (200, False)
        assert again.json()["turn_id"] == first.json()["turn_id"]
        other = http.post("/v1/turns", json={**turn, "key": "m-2"})
        assert (other.status_code, other.json()["created"]) == (201, True)
    assert len(service.conversation_turns("ann", "trip")) == 2
    operation = httpx.get(f"{token_server}/openapi.json").json()["paths"]["/v1/turns"]["post"]
    assert {"200", "201"} <= set(operation["responses"])


def test_the_prompt_and_tool_calls_over_http(token_server: str) -> None:
    with client(token_server, "ann") as http:
        call = http.post("/v1/tools/memory_write", json={"arguments": '{"block": "Name: Ann"}'})
        assert call.json()["text"].startswith("Saved.") and not call.json()["is_error"]
        for refused in ("x" * 4001, " "):  # over the limit, empty: 200, and an error result
            call = http.post("/v1/tools/memory_write", json={"arguments": {"block": refused}})
            assert call.status_code == 200 and call.json()["is_error"] is True
            assert call.json()["text"].startswith("Not saved:")
        prompt = http.get("/v1/prompt").json()
        assert prompt["today"].startswith("Today is ")
        assert prompt["text"].endswith(
            "Personal memory (9/4,000 characters)\nName: Ann\n\n" + prompt["today"]
        )
        assert prompt["anthropic"][0]["cache_control"] == {"type": "ephemeral"}
        names = [t["function"]["name"] for t in http.get("/v1/tools").json()]
        assert "conversation_search" in names
        # the definitions as typed in the document are the tools' own, unchanged
        assert http.get("/v1/tools").json() == openai_tools()
        assert http.get("/v1/tools", params={"format": "anthropic"}).json() == anthropic_tools()


def sign_in(browser: httpx.Client, token: str) -> httpx.Response:
    """Follow a /login link as a browser does: the page posts the token back."""
    landing = browser.get("/login", params={"token": token})
    assert landing.status_code == 200 and "data-auto-submit" in landing.text
    return browser.post(
        "/login", data={"token": token}, headers={"Origin": str(browser.base_url).rstrip("/")}
    )


def test_a_session_cookie_needs_the_csrf_header_for_writes(token_server: str) -> None:
    with httpx.Client(base_url=token_server, timeout=60) as browser:
        login = sign_in(browser, SIGNER.issue("ann"))
        assert login.status_code == 303 and "memoro_session" in browser.cookies
        page = browser.get("/memory")
        csrf = page.text.split('name="csrf-token" content="')[1].split('"')[0]
        assert browser.get("/v1/memory").status_code == 200
        assert browser.put("/v1/memory", json={"block": "x"}).status_code == 403
        ok = browser.put("/v1/memory", json={"block": "x"}, headers={"X-CSRF-Token": csrf})
        assert ok.status_code == 200


def test_signing_in_as_another_user_over_a_session_needs_the_sessions_confirmation(
    token_server: str, service: Memoro
) -> None:
    service.write_block("ann", "Ann's block", writer="user")
    service.write_block("mallory", "Mallory's block", writer="user")
    mallory = SIGNER.issue("mallory")
    with httpx.Client(base_url=token_server, timeout=60) as browser:
        sign_in(browser, SIGNER.issue("ann"))
        ann_session = browser.cookies["memoro_session"]
        origin = {"Origin": token_server}
        asked = browser.post("/login", data={"token": mallory}, headers=origin)
        assert asked.status_code == 200 and "Switch account?" in asked.text
        forged = {"token": mallory, "switch": "yes", "csrf": "guessed"}
        assert "Switch account?" in browser.post("/login", data=forged, headers=origin).text
        cross_site = browser.post("/login", data=forged, headers={"Origin": "https://evil.example"})
        assert cross_site.status_code == 403
        assert browser.cookies["memoro_session"] == ann_session
        assert browser.get("/v1/memory").json()["block"] == "Ann's block"
        csrf = asked.text.split('name="csrf" value="')[1].split('"')[0]
        confirmed = {"token": mallory, "switch": "yes", "csrf": csrf}
        assert browser.post("/login", data=confirmed, headers=origin).status_code == 303
        assert browser.get("/v1/memory").json()["block"] == "Mallory's block"


def test_a_bad_login_link_is_a_readable_page_not_json(token_server: str) -> None:
    for token in ("garbage", SIGNER.issue("ann", ttl=-3600), ""):
        page = httpx.get(f"{token_server}/login", params={"token": token}, timeout=60)
        assert page.status_code == 401
        assert page.headers["content-type"].startswith("text/html")
        assert "This sign-in link does not work" in page.text and '"error"' not in page.text


def test_a_write_from_another_site_is_refused(local_server: str) -> None:
    with client(local_server) as http:
        evil = http.put(
            "/v1/memory", json={"block": "pwned"}, headers={"Origin": "https://evil.example"}
        )
        assert evil.status_code == 403
        assert http.get("/v1/memory").json()["block"] == ""


def test_local_mode_answers_only_to_localhost_names(local_server: str) -> None:
    with client(local_server) as http:
        assert http.get("/v1/memory").status_code == 200
        rebound = http.get("/v1/memory", headers={"Host": "attacker.example:8700"})
        assert rebound.status_code == 403


def test_chat_without_a_model_is_503(local_server: str) -> None:
    with client(local_server) as http:
        response = http.post("/v1/chat", json={"message": "hi"})
    assert response.status_code == 503 and response.json()["error"]["code"] == "no_model"


def test_pages_carry_a_content_security_policy(local_server: str) -> None:
    with client(local_server) as http:
        page = http.get("/memory")
        assert "script-src 'self'" in page.headers["Content-Security-Policy"]
        assert "<script>" not in page.text  # no inline script
        assert http.get("/docs").status_code == 200
        assert http.get("/openapi.json").json()["info"]["title"] == "memoro"


def test_conversations_come_in_pages_with_the_total(local_server: str, service: Memoro) -> None:
    for i in range(3):
        service.record_turn(
            "me", f"c{i}", f"question {i}", "answer", at=f"2025-01-0{i + 1}T10:00:00Z"
        )
    with httpx.Client(base_url=local_server, timeout=60) as http:
        page = http.get("/v1/conversations", params={"limit": 2, "offset": 1})
        assert page.headers["X-Total-Count"] == "3"
        assert [(c["id"], c["preview"]) for c in page.json()] == [
            ("c1", "question 1"),
            ("c0", "question 0"),
        ]
        for params in ({"limit": 0}, {"limit": 1001}, {"limit": "two"}, {"offset": -1}):
            refused = http.get("/v1/conversations", params=params)
            assert refused.status_code == 422, params
            assert refused.json()["error"]["code"] == "invalid_input"


def test_an_unreachable_chat_model_is_a_502_in_json_streamed_or_not(
    web_service: Memoro,
) -> None:
    """The model's API cannot be reached: the chat answers a JSON 502 (a
    stream ends with an error event), never a bare 500, and the turn can be
    sent again once the model is back."""
    from memoro.agent import OpenAIProvider
    from tests.web_server import free_port

    down = OpenAIProvider("m", base_url=f"http://127.0.0.1:{free_port()}/v1", api_key="x")
    down.client = down.client.with_options(max_retries=0)
    local = AuthConfig.build("local", "", "me")
    with running(web_service, local, down) as url, client(url) as http:
        answered = http.post("/v1/chat", json={"message": "hi", "stream": False})
        assert answered.status_code == 502
        assert answered.json()["error"]["code"] == "model_error"
        streamed = http.post("/v1/chat", json={"message": "hi", "stream": True})
        assert streamed.status_code == 200
        assert "event: error" in streamed.text and '"model_error"' in streamed.text
    assert web_service.list_conversations("me") == []  # no turn was recorded


def test_a_full_disk_is_a_503_that_says_so_and_loses_nothing(
    web_service: Memoro, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite refusing to grow (its max_page_count, as a full disk refuses a
    write) answered a bare text/plain 500 (issue 26)."""
    from memoro.store.sqlite import _db

    web_service.write_block("ann", "Name: Ann", writer="user")
    pages = web_service.store.db.connect().execute("PRAGMA page_count").fetchone()[0]
    monkeypatch.setattr(_db, "_PRAGMAS", (*_db._PRAGMAS, f"PRAGMA max_page_count = {pages}"))
    token = AuthConfig.build("token", SECRET, "local")
    with running(web_service, token) as url, client(url, "ann") as ann:
        answers = []
        for i in range(200):
            turn = {"conversation": "c", "question": f"q{i} " + "words " * 400, "answer": "a"}
            answers.append(ann.post("/v1/turns", json=turn))
            if answers[-1].status_code != 201:
                break
        full = answers[-1]
        assert full.status_code == 503, full.text
        assert full.json()["error"]["code"] == "disk_full"
        assert "is full: nothing was stored" in full.json()["error"]["message"]
        assert ann.get("/v1/memory").json()["block"] == "Name: Ann"
    stored = web_service.conversation_turns("ann", "c")
    assert len(stored) == len(answers) - 1  # every acknowledged turn, none of the refused
