"""User tokens are standard JWTs: HS256 with MEMORO_SECRET, RS256/ES256
verified against a JWKS served over real HTTP on loopback; expiry with
clock skew, issuer, audience, the user claim, ``alg: none``, key rotation."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import jwt
import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from memoro.auth import MAX_TTL, Signer, TokenVerifier, check_ttl
from memoro.cli import cli
from memoro.errors import ConfigError, InvalidInput, KeysUnavailable, Unauthorized
from memoro.jwks import FIRST_BACKOFF, GRACE
from memoro.service import Memoro
from memoro.web.security import AuthConfig
from tests.web_server import SECRET, running

ISSUER = "https://id.example.com/"
AUDIENCE = "memoro-api"
LOADED = 10.0
"""Seconds a busy test machine may add to an answer (threads waiting for a
core). A bound that tells "answered at once" from "waited for a fetch" is
set against a fetch deadline well above it, and a bound on a back-off
stays below the longest back-off, so each still fails when the rule breaks."""
HANGING = 30.0
"""The fetch deadline of tests where a fetch hangs: a request that waited
for it would take this long."""


class Jwks:
    """A JSON Web Key Set served over HTTP; ``keys`` can change (rotation)."""

    def __init__(self) -> None:
        self.keys: list[dict[str, Any]] = []
        self.fetches = 0
        self.down = False
        self.hang = False  # accept the connection, never answer
        self.html = False  # answer a web page instead of a key set
        self.trickle = False  # answer a byte at a time, for ever (a slow proxy)
        self.huge = False  # answer 2 MiB, quickly
        self.pace = 0.2  # seconds between two trickled bytes
        self.released = threading.Event()
        jwks = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                jwks.fetches += 1
                if jwks.hang:
                    jwks.released.wait(60)
                    return
                if jwks.trickle:
                    self.trickle()
                    return
                if jwks.down:
                    self.send_error(503)
                    return
                body = json.dumps({"keys": jwks.keys}).encode()
                kind = "application/json"
                if jwks.html:
                    body, kind = b"<html><body>Sign in</body></html>", "text/html"
                self.send_response(200)
                self.send_header("Content-Type", kind)
                if jwks.huge:  # no length said: read until the cap
                    body = b" " * 2**21 + body
                else:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(OSError):  # memoro stops reading at its cap
                    self.wfile.write(body)

            def trickle(self) -> None:
                """A valid start of an answer, then white space, a byte at
                a time, never an end, until memoro hangs up."""
                head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{"
                data = itertools.chain(head, itertools.repeat(ord(" ")))
                for byte in data:
                    try:
                        self.wfile.write(bytes([byte]))
                    except OSError:
                        return  # memoro hung up
                    if jwks.released.wait(jwks.pace):  # the pace of the trickle
                        return

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/.well-known/jwks.json"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.released.set()
        self._server.shutdown()
        self._server.server_close()


class Key:
    """A signing key of the identity provider, with its public JWK."""

    def __init__(self, kid: str, alg: str = "RS256") -> None:
        self.kid, self.alg = kid, alg
        if alg == "RS256":
            self.private: Any = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            public = jwt.algorithms.RSAAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        else:
            self.private = ec.generate_private_key(ec.SECP256R1())
            public = jwt.algorithms.ECAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        self.jwk = {**public, "kid": kid, "alg": alg, "use": "sig"}

    def sign(self, claims: dict[str, Any], **header: Any) -> str:
        return jwt.encode(
            claims, self.private, algorithm=self.alg, headers={"kid": self.kid, **header}
        )

    def public_pem(self) -> bytes:
        return bytes(
            self.private.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )


def claims(user: str = "ann", ttl: int = 600, **extra: Any) -> dict[str, Any]:
    """A token's claims; an extra of None leaves that claim out."""
    now = int(time.time())
    every = {"sub": user, "iat": now, "exp": now + ttl, "iss": ISSUER, "aud": AUDIENCE, **extra}
    return {name: value for name, value in every.items() if value is not None}


@pytest.fixture
def jwks() -> Iterator[Jwks]:
    served = Jwks()
    yield served
    served.close()


def provider_verifier(jwks: Jwks, **options: Any) -> TokenVerifier:
    return TokenVerifier(
        jwks_url=jwks.url, issuer=ISSUER, audience=AUDIENCE, jwks_cooldown=0, **options
    )


def refused(verifier: TokenVerifier, token: str) -> str:
    with pytest.raises(Unauthorized) as caught:
        verifier.verify(token)
    return str(caught.value)


@pytest.mark.parametrize("alg", ["RS256", "ES256"])
def test_a_token_of_the_identity_provider_is_verified_with_its_jwks(jwks: Jwks, alg: str) -> None:
    key = Key("k1", alg)
    jwks.keys = [key.jwk]
    verifier = provider_verifier(jwks)
    assert verifier.verify(key.sign(claims("ann"))).user_id == "ann"
    assert verifier.verify(key.sign(claims("bob"))).user_id == "bob"
    assert jwks.fetches == 1  # the key set is cached


def test_an_expired_token_is_refused_beyond_the_clock_skew(jwks: Jwks) -> None:
    key = Key("k1")
    jwks.keys = [key.jwk]
    verifier = provider_verifier(jwks, clock_skew=30)
    assert verifier.verify(key.sign(claims(ttl=-20))).user_id == "ann"  # within the skew
    assert refused(verifier, key.sign(claims(ttl=-40))) == "the token has expired"
    future = claims(nbf=int(time.time()) + 120)
    assert "not valid yet" in refused(verifier, key.sign(future))


def test_a_token_for_another_audience_or_issuer_is_refused(jwks: Jwks) -> None:
    key = Key("k1")
    jwks.keys = [key.jwk]
    verifier = provider_verifier(jwks)
    assert "audience" in refused(verifier, key.sign(claims(aud="another-api")))
    assert "issuer" in refused(verifier, key.sign(claims(iss="https://evil.example/")))
    assert refused(verifier, key.sign(claims(aud=None))) == "the token has no 'aud' claim"


def test_alg_none_and_algorithm_confusion_are_refused(jwks: Jwks) -> None:
    key = Key("k1")
    jwks.keys = [key.jwk]
    verifier = provider_verifier(jwks)
    unsigned = jwt.encode(claims(), None, algorithm="none")
    assert "'none' is not accepted" in refused(verifier, unsigned)
    # HS256 "signed" with the provider's public key: memoro has no HS256 secret here
    confused = _hs256_with(key.public_pem(), claims())
    assert "'HS256' is not accepted" in refused(verifier, confused)
    both = TokenVerifier(secret=SECRET, jwks_url=jwks.url, issuer=ISSUER, audience=AUDIENCE)
    assert refused(both, confused) == "the token's signature is not valid"


def _hs256_with(secret: bytes, payload: dict[str, Any]) -> str:
    """An HS256 token keyed by arbitrary bytes (PyJWT itself refuses PEM keys
    for HMAC, so the signature is made by hand)."""
    import base64
    import hashlib
    import hmac

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    signing_input = b64(b'{"alg":"HS256","typ":"JWT"}') + "." + b64(json.dumps(payload).encode())
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64(mac)}"


def test_a_rotated_key_is_fetched_and_a_removed_one_stops_working(jwks: Jwks) -> None:
    old, new = Key("2025-01"), Key("2025-07")
    jwks.keys = [old.jwk]
    verifier = provider_verifier(jwks, jwks_lifespan=0.2)
    assert verifier.verify(old.sign(claims())).user_id == "ann"
    jwks.keys = [old.jwk, new.jwk]  # the provider publishes its next key, then signs with it
    assert verifier.verify(new.sign(claims("bob"))).user_id == "bob"  # unknown kid: fetched again
    jwks.keys = [new.jwk]  # … and retires the old one
    deadline = time.monotonic() + 60
    while True:  # once the cached set expires, the old key is gone
        try:
            verifier.verify(old.sign(claims()))
        except Unauthorized as exc:
            assert "no signing key" in str(exc)
            break
        assert time.monotonic() < deadline, "the retired key was still accepted"
    assert "no signing key" in refused(verifier, Key("stranger").sign(claims()))


def test_an_unreachable_jwks_is_a_503_not_a_401(jwks: Jwks, web_service: Memoro) -> None:
    key = Key("k1")
    jwks.down = True
    verifier = provider_verifier(jwks)
    with pytest.raises(KeysUnavailable):
        verifier.verify(key.sign(claims()))
    auth = AuthConfig.build("token", "", "local", jwks_url=jwks.url, jwks_cooldown=0)
    with running(web_service, auth) as base:
        headers = {"Authorization": f"Bearer {key.sign(claims(iss=None, aud=None))}"}
        response = httpx.get(f"{base}/v1/memory", headers=headers, timeout=60)
        assert response.status_code == 503
        assert response.json()["error"]["code"] == "keys_unavailable"
        jwks.down = False
        jwks.keys = [key.jwk]
        deadline = time.monotonic() + 60  # the failure is remembered for a back-off
        while (answer := httpx.get(f"{base}/v1/memory", headers=headers, timeout=60)).status_code:
            if answer.status_code == 200:
                break
            assert answer.status_code == 503
            assert time.monotonic() < deadline, "the keys were never fetched again"
            time.sleep(0.1)


def test_a_jwks_answering_a_web_page_is_a_503_that_says_so(jwks: Jwks, web_service: Memoro) -> None:
    jwks.html = True
    auth = AuthConfig.build("token", "", "local", jwks_url=jwks.url)
    with running(web_service, auth) as base:
        headers = {"Authorization": f"Bearer {Key('k1').sign(claims(iss=None, aud=None))}"}
        response = httpx.get(f"{base}/v1/memory", headers=headers, timeout=60)
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "keys_unavailable"
    assert "did not answer a JSON Web Key Set (it sent text/html)" in error["message"]


def test_a_failing_jwks_is_not_fetched_again_until_its_back_off_has_passed(jwks: Jwks) -> None:
    key = Key("k1")
    jwks.down = True
    verifier = provider_verifier(jwks)
    for _ in range(20):
        with pytest.raises(KeysUnavailable, match="answered HTTP 503"):
            verifier.verify(key.sign(claims()))
    assert jwks.fetches == 1


def test_made_up_key_ids_fetch_the_key_set_at_most_once_per_cool_down(jwks: Jwks) -> None:
    key = Key("k1")
    jwks.keys = [key.jwk]
    verifier = TokenVerifier(jwks_url=jwks.url, issuer=ISSUER, audience=AUDIENCE, jwks_cooldown=60)
    assert verifier.verify(key.sign(claims())).user_id == "ann"
    for i in range(30):
        assert "no signing key" in refused(verifier, Key(f"forged-{i}").sign(claims()))
    assert jwks.fetches == 1
    assert verifier.verify(key.sign(claims("bob"))).user_id == "bob"  # known keys still work


def test_a_token_without_a_key_id_uses_the_only_key(jwks: Jwks) -> None:
    key = Key("k1")
    jwks.keys = [{k: v for k, v in key.jwk.items() if k != "kid"}]
    verifier = provider_verifier(jwks)
    token = jwt.encode(claims(), key.private, algorithm="RS256")
    assert verifier.verify(token).user_id == "ann"


@pytest.mark.parametrize("claim", ["exp", "nbf", "iat"])
def test_a_time_claim_written_as_a_string_is_refused(claim: str) -> None:
    verifier = TokenVerifier(secret=SECRET)
    now = int(time.time())
    values = {"exp": now + 600, "nbf": now - 10, "iat": now - 10}
    token = jwt.encode({"sub": "ann", **values, claim: str(values[claim])}, SECRET, "HS256")
    assert refused(verifier, token) == f"the token's {claim!r} claim is not a number"


def test_a_jwks_that_never_answers_stalls_no_other_request(jwks: Jwks, web_service: Memoro) -> None:
    """50 tokens with made-up key ids while the identity provider hangs:
    the health check and tokens with known keys still answer at once."""
    key = Key("k1")
    jwks.keys = [key.jwk]
    auth = AuthConfig.build(
        "token", "", "local", jwks_url=jwks.url, jwks_cooldown=0, jwks_deadline=HANGING
    )
    with running(web_service, auth) as base:
        known = {"Authorization": f"Bearer {key.sign(claims(iss=None, aud=None))}"}
        assert httpx.get(f"{base}/v1/memory", headers=known, timeout=60).status_code == 200
        jwks.hang = True
        forged = [Key(f"forged-{i}", "ES256").sign(claims(iss=None, aud=None)) for i in range(50)]
        answers: list[int] = []

        async def attack() -> None:
            async with httpx.AsyncClient(base_url=base, timeout=30) as client:
                sent = [
                    client.get("/v1/memory", headers={"Authorization": f"Bearer {token}"})
                    for token in forged
                ]
                answers.extend(answer.status_code for answer in await asyncio.gather(*sent))

        attacker = threading.Thread(target=asyncio.run, args=(attack(),))
        attacker.start()
        while jwks.fetches < 2:  # the attack has made memoro fetch again: the fetch hangs
            time.sleep(0.01)
        hanging_since = time.monotonic()
        with httpx.Client(base_url=base, timeout=60) as client:
            for i in range(5):
                start = time.monotonic()
                assert client.get("/healthz").status_code == 200
                token = key.sign(claims(f"u{i}", iss=None, aud=None))
                fresh = {"Authorization": f"Bearer {token}"}
                assert client.get("/v1/memory", headers=fresh).status_code == 200
                assert time.monotonic() - start < LOADED
        # every answer came while the fetch still hung: none waited for it
        assert time.monotonic() - hanging_since < HANGING
        jwks.released.set()  # the hung fetch ends (no answer), and the attack with it
        attacker.join(60)
        assert not attacker.is_alive()
        assert len(answers) == 50 and set(answers) <= {401, 503}, answers
        assert jwks.fetches <= 3  # one fetch at a time, then a back-off


def test_a_trickling_jwks_is_cut_off_at_its_deadline_and_a_rotated_key_works_once_it_recovers(
    jwks: Jwks,
) -> None:
    """A byte every 0.2 s never trips a per-read timeout; the fetch's own
    deadline (1 s here) ends it, and the next fetch after the back-off
    reads the recovered endpoint."""
    old, new = Key("2025-01"), Key("2025-07")
    jwks.keys = [old.jwk]
    verifier = provider_verifier(jwks, jwks_deadline=1.0)
    assert verifier.verify(old.sign(claims())).user_id == "ann"
    jwks.trickle = True
    jwks.keys = [old.jwk, new.jwk]
    started = time.monotonic()
    with pytest.raises(KeysUnavailable, match="within 1 s"):
        verifier.verify(new.sign(claims("bob")))
    assert time.monotonic() - started < 1.0 + GRACE + LOADED  # the deadline, not for ever
    with pytest.raises(KeysUnavailable, match="within 1 s"):  # the back-off: at once
        verifier.verify(new.sign(claims("bob")))
    assert verifier.verify(old.sign(claims("carl"))).user_id == "carl"  # known keys never wait
    jwks.trickle = False  # the endpoint answers again
    recovered = time.monotonic()
    while True:
        try:
            assert verifier.verify(new.sign(claims("bob"))).user_id == "bob"
            break
        except KeysUnavailable:
            waited = time.monotonic() - recovered
            assert waited < FIRST_BACKOFF + 1.0 + GRACE + LOADED, "the rotated key is still refused"
            time.sleep(0.05)


def test_a_jwks_answer_over_the_size_cap_is_refused(jwks: Jwks) -> None:
    key = Key("k1")
    jwks.keys = [key.jwk]
    jwks.huge = True
    with pytest.raises(KeysUnavailable, match="more than 1 MiB"):
        provider_verifier(jwks).verify(key.sign(claims()))


def test_made_up_key_ids_during_a_trickle_hold_no_request_past_the_deadline(
    jwks: Jwks, web_service: Memoro
) -> None:
    """40 tokens with made-up key ids and one with a rotated key, at once,
    while the endpoint trickles: each is answered within the fetch's
    deadline (not queued behind the others' waits), known keys at once,
    and the rotated key is accepted soon after the endpoint recovers."""
    key, rotated = Key("k1"), Key("k2")
    jwks.keys = [key.jwk]
    auth = AuthConfig.build(
        "token", "", "local", jwks_url=jwks.url, jwks_cooldown=0, jwks_deadline=1.0
    )

    def bearer(signing: Key, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {signing.sign(claims(user, iss=None, aud=None))}"}

    with running(web_service, auth) as base:
        assert httpx.get(f"{base}/v1/memory", headers=bearer(key, "ann")).status_code == 200
        jwks.trickle = True
        jwks.keys = [key.jwk, rotated.jwk]
        tokens = [bearer(Key(f"forged-{i}", "ES256"), "eve") for i in range(40)]
        tokens.append(bearer(rotated, "bob"))

        async def burst() -> list[tuple[int, float]]:
            async with httpx.AsyncClient(base_url=base, timeout=60) as client:

                async def one(headers: dict[str, str]) -> tuple[int, float]:
                    started = time.monotonic()
                    answer = await client.get("/v1/memory", headers=headers)
                    return answer.status_code, time.monotonic() - started

                return await asyncio.gather(*(one(headers) for headers in tokens))

        answers = asyncio.run(burst())
        assert {status for status, _ in answers} <= {401, 503}, answers
        # queued behind each other's waits, 41 answers would take 40 s
        assert max(took for _, took in answers) < 1.0 + GRACE + LOADED, answers
        # no fetch is under way now: a known key that waited would have
        # started one (and it would trickle until its deadline)
        fetched, started = jwks.fetches, time.monotonic()
        assert httpx.get(f"{base}/v1/memory", headers=bearer(key, "cy")).status_code == 200
        assert time.monotonic() - started < LOADED
        assert jwks.fetches == fetched
        jwks.trickle = False
        recovered = time.monotonic()
        while (answer := httpx.get(f"{base}/v1/memory", headers=bearer(rotated, "bob"))).is_error:
            assert answer.status_code == 503, answer.text
            assert time.monotonic() - recovered < 2 * FIRST_BACKOFF + 1.0 + LOADED, answer.text
            time.sleep(0.05)
        assert answer.status_code == 200


def test_a_fetch_coming_due_on_the_event_loop_is_waited_for_on_a_thread(
    jwks: Jwks, web_service: Memoro, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token judged answerable at once (back-off or cool-down running)
    whose fetch comes due a moment later must not wait on the event loop:
    that would stall every other request for the fetch's deadline. Here
    every token is judged answerable at once, the worst case of that race."""
    key = Key("k1")
    jwks.keys = [key.jwk]
    monkeypatch.setattr(TokenVerifier, "answers_now", lambda self, token: True)
    auth = AuthConfig.build(
        "token", "", "local", jwks_url=jwks.url, jwks_cooldown=0, jwks_deadline=HANGING
    )

    def bearer(signing: Key, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {signing.sign(claims(user, iss=None, aud=None))}"}

    with running(web_service, auth) as base:
        assert httpx.get(f"{base}/v1/memory", headers=bearer(key, "ann")).status_code == 200
        jwks.hang = True
        waiting = threading.Thread(
            target=httpx.get,
            args=(f"{base}/v1/memory",),
            kwargs={"headers": bearer(Key("new", "ES256"), "bob"), "timeout": 30},
        )
        waiting.start()
        while jwks.fetches < 2:  # the new key's fetch hangs
            time.sleep(0.01)
        started = time.monotonic()
        assert httpx.get(f"{base}/v1/memory", headers=bearer(key, "cy")).status_code == 200
        assert time.monotonic() - started < LOADED  # not the fetch's HANGING seconds
        jwks.released.set()  # the hung fetch ends, and the waiting request with it
        waiting.join(60)
        assert not waiting.is_alive()


def test_the_user_claim_is_configurable(jwks: Jwks) -> None:
    key = Key("k1")
    jwks.keys = [key.jwk]
    verifier = provider_verifier(jwks, user_claim="email")
    assert verifier.verify(key.sign(claims(email="ann@example.com"))).user_id == "ann@example.com"
    assert "'email' claim" in refused(verifier, key.sign(claims()))


def test_hs256_tokens_of_the_shared_secret_work_end_to_end(web_service: Memoro) -> None:
    auth = AuthConfig.build("token", SECRET, "local", audience=AUDIENCE)
    signer = Signer(SECRET, audience=AUDIENCE)
    with running(web_service, auth) as base:
        good = {"Authorization": f"Bearer {signer.issue('ann')}"}
        assert httpx.put(f"{base}/v1/memory", json={"block": "Hi"}, headers=good).status_code == 200
        other = {"Authorization": f"Bearer {Signer(SECRET, audience='other').issue('ann')}"}
        response = httpx.get(f"{base}/v1/memory", headers=other)
        assert response.status_code == 401
        assert "audience" in response.json()["error"]["message"]
    assert web_service.read_block("ann").text == "Hi"  # type: ignore[union-attr]


def test_memoro_token_issue_prints_a_jwt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORO_SECRET", SECRET)
    monkeypatch.setenv("MEMORO_TOKEN_ISSUER", ISSUER)
    result = CliRunner().invoke(cli, ["token", "issue", "--user", "ann", "--ttl", "120"])
    assert result.exit_code == 0, result.output
    token = result.output.strip()
    assert jwt.get_unverified_header(token)["alg"] == "HS256"
    decoded = jwt.decode(token, SECRET, algorithms=["HS256"], issuer=ISSUER)
    assert decoded["sub"] == "ann" and decoded["exp"] - decoded["iat"] == 120
    assert TokenVerifier(secret=SECRET, issuer=ISSUER).verify(token).user_id == "ann"


@pytest.mark.parametrize("ttl", ["0", "-60", "2592001", "99999999999999999999999999"])
def test_memoro_token_issue_refuses_a_lifetime_out_of_range(
    monkeypatch: pytest.MonkeyPatch, ttl: str
) -> None:
    # a token cannot be revoked short of a new secret: 30 days at most
    monkeypatch.setenv("MEMORO_SECRET", SECRET)
    result = CliRunner().invoke(cli, ["token", "issue", "--user", "ann", "--ttl", ttl])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines()[-1] == (
        f"Error: Invalid value for --ttl: a token lasts 1 to 2,592,000 seconds (30 days), not {ttl}"
    )


def test_the_longest_token_lifetime_is_issued_and_verifies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORO_SECRET", SECRET)
    result = CliRunner().invoke(cli, ["token", "issue", "--user", "ann", "--ttl", str(MAX_TTL)])
    assert result.exit_code == 0, result.output
    decoded = jwt.decode(result.stdout.strip(), SECRET, algorithms=["HS256"])
    assert decoded["exp"] - decoded["iat"] == MAX_TTL == 30 * 86_400
    with pytest.raises(InvalidInput, match="1 to 2,592,000 seconds"):
        check_ttl(MAX_TTL + 1)


def test_token_auth_without_a_secret_or_a_jwks_url_does_not_start() -> None:
    with pytest.raises(ConfigError, match=r"MEMORO_SECRET .* or MEMORO_JWKS_URL"):
        AuthConfig.build("token", "", "local")
    with pytest.raises(ConfigError, match="at least 32"):
        AuthConfig.build("token", "short", "local")


def test_issuing_a_token_without_a_secret_says_it_is_not_set() -> None:
    with pytest.raises(ConfigError, match="MEMORO_SECRET is not set"):
        Signer("")
