"""The OpenAPI document states every rule the server enforces (D11). That
the server keeps to it — generated requests never cause a 5xx, valid ones
are accepted, invalid ones refused, every response matches its schema — is
checked by schemathesis over real HTTP on both backends, in
benchmarks/reliability.py (tests/test_reliability.py runs it)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from memoro.inputs import ID_PATTERN, TIME_PATTERN
from memoro.service import Memoro
from memoro.settings import Settings
from memoro.store.sqlite import SqliteStore
from memoro.web.app import create_app
from memoro.web.security import AuthConfig
from tests.web_server import SECRET

_home = Path(tempfile.mkdtemp(prefix="memoro-openapi-"))
_memoro = Memoro(
    SqliteStore(_home / "memoro.db"), Settings(home=_home), embedder=None, worker=False
)
SPEC: dict[str, Any] = create_app(_memoro, AuthConfig.build("token", SECRET, "local")).openapi()


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
