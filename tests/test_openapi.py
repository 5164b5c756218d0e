"""Schemathesis against the OpenAPI document: generated requests to every
operation never cause a 5xx, and every response matches its own schema."""

from __future__ import annotations

import tempfile
from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from memoro.auth import Signer
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

schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@schema.parametrize()
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_no_5xx_and_responses_match_the_schema(case: schemathesis.Case) -> None:
    case.call_and_validate(
        headers={"Authorization": f"Bearer {TOKEN}"},
        checks=[not_a_server_error, response_schema_conformance, status_code_conformance],
    )
