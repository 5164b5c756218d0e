"""The OpenAPI document states every rule the server enforces and every
route the server has, with schemas and examples. That
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


def test_the_document_lists_every_route_and_only_them() -> None:
    """Every API route of the app (chat included when a model is configured,
    and /mcp, which is not a FastAPI route) is documented, method by method."""
    from fastapi.routing import APIRoute

    from memoro.agent import OpenAIProvider
    from memoro.web import api, chat, imports, review

    provider = OpenAIProvider("fake", base_url="http://127.0.0.1:9/v1", api_key="x")
    app = create_app(_memoro, AuthConfig.build("token", SECRET, "local"), provider)
    routers = (api.router, review.router, imports.router, chat.router)
    served = [r for router in routers for r in router.routes]
    routes = {
        (method.lower(), route.path.replace(":path}", "}"))
        for route in served
        if isinstance(route, APIRoute) and route.include_in_schema
        for method in route.methods
    } | {("get", "/mcp"), ("post", "/mcp"), ("delete", "/mcp")}
    mcp = next(r for r in app.routes if getattr(r, "path", "") == "/mcp")
    assert {m.lower() for m in mcp.methods or ()} - {"head"} == {"get", "post", "delete"}
    documented = {(method, path) for path, ops in app.openapi()["paths"].items() for method in ops}
    assert documented == routes
    assert ("post", "/v1/chat") in documented and ("post", "/mcp") in documented
    without_model = create_app(_memoro, AuthConfig.build("token", SECRET, "local")).openapi()
    assert "/v1/chat" not in without_model["paths"]  # it answers 503 there


def test_every_operation_is_described_with_schemas_and_examples() -> None:
    for path, operations in SPEC["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            assert operation.get("summary"), where
            assert operation.get("tags"), where
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body is not None and path != "/mcp":
                schema = body["schema"]
                name = schema["$ref"].rsplit("/", 1)[-1]
                assert _schema(name).get("examples"), f"{where}: no example"
            ok = next(code for code in operation["responses"] if code.startswith("2"))
            if path.startswith("/v1/") and operation["responses"][ok].get("content"):
                content = operation["responses"][ok]["content"]
                assert any(c.get("schema") for c in content.values()) or path == "/v1/export", where
    assert SPEC["components"]["securitySchemes"]["token"]["bearerFormat"] == "JWT"


def _open_objects(schema: Any, where: str, seen: set[str]) -> list[str]:
    """Places in ``schema`` where an answer is an object of unstated shape."""
    if isinstance(schema, list):
        return [f for i, s in enumerate(schema) for f in _open_objects(s, f"{where}[{i}]", seen)]
    if not isinstance(schema, dict):
        return []
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        if name in seen:
            return []
        seen.add(name)
        return _open_objects(_schema(name), name, seen)
    found = []
    free = schema.get("type") == "object" and "properties" not in schema
    if free and not isinstance(schema.get("additionalProperties"), dict):
        found.append(where)
    for key, value in schema.items():
        if key == "properties":
            found += [f for n, s in value.items() for f in _open_objects(s, f"{where}.{n}", seen)]
        elif key in ("items", "anyOf", "oneOf", "allOf", "additionalProperties"):
            found += _open_objects(value, f"{where}.{key}", seen)
    return found


def test_every_json_answer_has_a_stated_shape() -> None:
    """A typed client (the TypeScript one's types are generated from this
    document) gets a type for every field it reads; only the tools' argument
    schemas, which are JSON Schemas themselves, are free-form objects."""
    open_objects = []
    for path, operations in SPEC["paths"].items():
        if not path.startswith("/v1/") or path == "/v1/export":
            continue
        for method, operation in operations.items():
            for answer in operation["responses"].values():
                for content in answer.get("content", {}).values():
                    seen: set[str] = set()
                    found = _open_objects(content.get("schema"), f"{method} {path}", seen)
                    open_objects += found
    assert sorted(set(open_objects)) == ["AnthropicToolOut.input_schema", "FunctionOut.parameters"]


def test_every_interface_returns_the_same_number_of_hits_by_default() -> None:
    """One default for a search's hits (chosen in docs/search.md): the
    model's tool, HTTP, the CLI, both Python clients, the TypeScript client
    and the library say the same number."""
    import inspect

    from memoro import tools
    from memoro.cli.history import search as search_command
    from memoro.client import AsyncMemoroClient, MemoroClient
    from memoro.models import SEARCH_DEFAULT

    (limit,) = (p for p in SPEC["paths"]["/v1/search"]["get"]["parameters"] if p["name"] == "limit")
    defaults = {
        "tool": tools.CONVERSATION_SEARCH.parameters["properties"]["limit"]["default"],
        "HTTP": limit["schema"]["default"],
        "CLI": next(p.default for p in search_command.params if p.name == "limit"),
        **{
            name: inspect.signature(f).parameters["limit"].default
            for name, f in (
                ("Memoro.search", Memoro.search),
                ("MemoroClient.search", MemoroClient.search),
                ("AsyncMemoroClient.search", AsyncMemoroClient.search),
            )
        },
    }
    assert defaults == dict.fromkeys(defaults, SEARCH_DEFAULT)
    told = tools.CONVERSATION_SEARCH.parameters["properties"]["limit"]["description"]
    assert f"default {SEARCH_DEFAULT})" in told
    client_ts = Path(__file__).parent.parent / "clients/typescript/src/client.ts"
    assert f"limit: options.limit ?? {SEARCH_DEFAULT}," in client_ts.read_text()
