"""The OpenAPI document states every rule the server enforces (D11), and
schemathesis holds the server to it: generated requests to every operation
never cause a 5xx, valid ones are accepted, invalid ones refused, and every
response matches its own schema."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import positive_data_acceptance

from memoro.auth import Signer
from memoro.inputs import ID_PATTERN, TIME_PATTERN
from memoro.service import Memoro
from memoro.settings import Settings
from memoro.store.sqlite import SqliteStore
from memoro.testing import HashEmbedder
from memoro.web.app import create_app
from memoro.web.security import AuthConfig
from tests.web_server import SECRET

_home = Path(tempfile.mkdtemp(prefix="memoro-openapi-"))
_memoro = Memoro(
    SqliteStore(_home / "memoro.db"), Settings(home=_home), embedder=HashEmbedder(), worker=False
)
_memoro.record_turn("fuzz", "c1", "a question", "an answer")
_memoro.index_pending()
APP = create_app(_memoro, AuthConfig.build("token", SECRET, "local"))
TOKEN = Signer(SECRET).issue("fuzz", ttl=24 * 3600)
SPEC: dict[str, Any] = APP.openapi()

schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@schema.auth()
class UserToken:
    """The bearer token the document's security scheme asks for."""

    def get(self, case: schemathesis.Case, context: Any) -> str:
        return TOKEN

    def set(self, case: schemathesis.Case, data: str, context: Any) -> None:
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}


def valid_data_is_accepted(ctx: Any, response: Any, case: schemathesis.Case) -> bool | None:
    """schemathesis' positive_data_acceptance, knowing two answers the schema
    describes for valid data: a block over the limit or empty once normalized
    (a 422 WriteOut that says why) and a stale If-Match (412)."""
    if case.meta is None or not case.meta.generation.mode.is_positive:
        return None
    if response.status_code == 412 and "if-match" in {k.lower() for k in case.headers or {}}:
        return None
    if response.status_code == 422 and case.path == "/v1/memory":
        assert response.json().get("outcome") in ("too_long", "empty"), response.text
        return None
    assert response.status_code in (200, 201, 204, 401, 403, 404), (
        f"valid data was refused: {response.status_code} {response.text}"
    )
    return None


@schema.parametrize()
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_the_server_keeps_to_its_openapi_document(case: schemathesis.Case) -> None:
    case.call_and_validate(
        excluded_checks=[positive_data_acceptance],
        additional_checks=[valid_data_is_accepted],
    )


def _schema(name: str) -> dict[str, Any]:
    found: dict[str, Any] = SPEC["components"]["schemas"][name]
    return found


def test_the_document_states_the_rules_for_ids_texts_and_times() -> None:
    turn = _schema("TurnIn")
    assert (
        turn["properties"]["conversation"] | {"pattern": ID_PATTERN}
        == turn["properties"]["conversation"]
    )
    assert (
        turn["properties"]["conversation"]["minLength"],
        turn["properties"]["conversation"]["maxLength"],
    ) == (1, 255)
    assert [list(branch["properties"]) for branch in turn["anyOf"]] == [["question"], ["answer"]]
    at = turn["properties"]["at"]
    assert (at["format"], at["pattern"]) == ("date-time", TIME_PATTERN)
    assert "0001-01-03 to 9999-12-29" in at["description"]
    block = _schema("BlockIn")["properties"]["block"]
    assert block["minLength"] == 1 and "4,000" in block["description"]
    path = SPEC["paths"]["/v1/conversations/{conversation_id}"]
    for operation in path.values():
        (param,) = [p for p in operation["parameters"] if p["in"] == "path"]
        assert param["schema"]["pattern"] == ID_PATTERN
    search = {p["name"]: p["schema"] for p in SPEC["paths"]["/v1/search"]["get"]["parameters"]}
    assert search["q"]["maxLength"] == 4000
    assert (search["limit"]["minimum"], search["limit"]["maximum"]) == (1, 50)


def test_the_document_states_preconditions_and_authentication() -> None:
    memory = SPEC["paths"]["/v1/memory"]
    for method in ("put", "delete"):
        headers = [p["name"] for p in memory[method]["parameters"] if p["in"] == "header"]
        assert headers == ["if-match"] and "412" in memory[method]["responses"]
    assert SPEC["components"]["securitySchemes"]["token"]["scheme"] == "bearer"
    assert SPEC["security"] == [{"token": []}]
    assert SPEC["paths"]["/v1/tools"]["get"]["security"] == []
