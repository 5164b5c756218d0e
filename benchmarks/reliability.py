"""Reliability, measured by one command: every check on SQLite and on
PostgreSQL (a local pgserver), one table of what was tried and what failed.

    python benchmarks/reliability.py            # 1,000 kills, 32 clients × 60 s…
    python benchmarks/reliability.py --quick    # CI: 50 kills, 8 clients × 3 s…
    python benchmarks/reliability.py --database sqlite --json results.json

The checks, each on a fresh database:

- SIGKILL during block writes: a writer process is killed at a random moment,
  again and again; the block is always one whole written version, no older
  than the last acknowledged write, and the audit matches it.
- SIGKILL of workers: 4 worker processes index the turns while the one that
  holds a job is killed and replaced; each turn is indexed exactly once.
- SIGKILL of `memoro serve` under load, restarted each time: every write it
  acknowledged is there.
- Deletion truth: after delete-everything, purged conversations (one of
  them imported from an uploaded export) and a failed upload through a
  running `memoro serve`, marker texts are searched in every file of the
  database — SQLite's file, WAL and shared memory while the server runs and
  after SIGTERM; PostgreSQL's heap, index and WAL files after the steps
  docs/deploy.md gives an operator.
- Mixed load: N clients × S seconds against `memoro serve` (prompt, turns,
  block writes, searches, deletions); no error, no 5xx, and every posted turn
  not deleted is found by search afterwards.
- The bad-input corpus (benchmarks/_bad_input.py) through every interface.
- Schemathesis against the OpenAPI document over real HTTP, every check on.
- A trickling key endpoint: `memoro serve` checks an identity provider's
  tokens while its JWKS URL answers one byte every 2 s; every request is
  answered in time (known keys at once, others within one fetch's
  deadline), and a rotated key is accepted soon after the endpoint recovers.
- Erase during imports: a user erased while an upload of theirs is imported
  by `memoro serve`'s worker, or while `memoro import` stores their file;
  afterwards no row of theirs in any table and no traceback in any log.
- Retention during appends: a retention sweep runs while turns are recorded
  into the conversations it is deleting; every acknowledged turn is kept.

Processes use the keyword embedder or the hash embedder (memoro.testing):
these checks are about the database, the queue and the processes, and the
machine's two cores are better spent on them than on the model.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from _bad_input import corpus
from _deletion import deletion_truth, user_deletion
from _in_flight import erase_during_imports, retention_during_appends
from _keys import trickling_keys
from _kills import block_writes, serve, workers
from _place import Place, Row, place
from _server import SECRET, client, serving

from memoro.auth import Signer

GUIDE = Path(__file__).parent.parent / "docs" / "deploy.md"
FULL = {
    "kills": 1000,
    "turns": 2000,
    "worker_kills": 20,
    "serve_kills": 20,
    "clients": 32,
    "seconds": 60.0,
    "examples": 100,
    "erase_rounds": 5,
    "import_turns": 20_000,
    "retention_users": 20,
    "retention_conversations": 50,
    "trickle": 60.0,
}
QUICK = {
    "kills": 50,
    "turns": 150,
    "worker_kills": 3,
    "serve_kills": 2,
    "clients": 8,
    "seconds": 3.0,
    "examples": 8,
    "erase_rounds": 1,
    "import_turns": 3_000,
    "retention_users": 4,
    "retention_conversations": 50,
    "trickle": 15.0,  # the cool-down after the first fetch, then two fetches
}


def mixed_load(where: Place, clients: int, seconds: float) -> list[Row]:
    """Clients, each its own user, drive `memoro serve` for ``seconds``."""
    requests = Row(f"mixed load, {clients} clients × {seconds:.0f} s: requests (errors, 5xx)")
    searchable = Row("mixed load: posted turns found by search afterwards")
    where.fresh()
    signer = Signer(SECRET)
    posted: dict[str, list[tuple[str, str]]] = {}
    deleted: dict[str, set[str]] = {}
    statuses: list[int] = []
    lock = threading.Lock()

    def drive(i: int, url: str, until: float) -> None:
        rng, user = random.Random(i), f"load{i}"
        with client(url, signer.issue(user)) as http:
            n = 0
            while time.monotonic() < until:
                n += 1
                conversation = f"c{n // 6}"
                token = f"zq{i}x{n}"
                calls: list[tuple[str, str, Any]] = [
                    ("GET", "/v1/prompt", None),
                    (
                        "POST",
                        "/v1/turns",
                        {
                            "conversation": conversation,
                            "question": f"about {token}",
                            "answer": "fine",
                        },
                    ),
                ]
                if rng.random() < 0.1:
                    calls.append(("PUT", "/v1/memory", {"block": f"Name: {user}\nFocus: {n}"}))
                if rng.random() < 0.2:
                    calls.append(("GET", f"/v1/search?q=zq{i}x{rng.randint(1, n)}", None))
                if rng.random() < 0.02 and n > 12:
                    old = f"c{rng.randint(0, n // 6 - 1)}"
                    if old not in deleted.get(user, set()):
                        calls.append(("DELETE", f"/v1/conversations/{old}", None))
                for method, path, body in calls:
                    try:
                        status = http.request(method, path, json=body).status_code
                    except httpx.HTTPError:
                        status = 0
                    with lock:
                        statuses.append(status)
                    if status == 201:
                        posted.setdefault(user, []).append((conversation, token))
                    elif status == 204:
                        deleted.setdefault(user, set()).add(path.rsplit("/", 1)[1])

    with serving(where.env()) as url:
        until = time.monotonic() + seconds
        threads = [threading.Thread(target=drive, args=(i, url, until)) for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        where.drained()
    requests.tried = len(statuses)
    for status in statuses:
        if not 200 <= status < 300:
            requests.fail(f"status {status or 'no answer'}")
    fives = sum(s >= 500 for s in statuses)
    requests.notes.insert(0, f"{fives} answers were 5xx")
    memoro = where.memoro()
    for user, turns in posted.items():
        for conversation, token in turns:
            if conversation in deleted.get(user, set()):
                continue
            searchable.tried += 1
            hits = memoro.search(user, token, mode="keyword")
            if not any(h.conversation_id == conversation and token in h.text for h in hits):
                searchable.fail(f"{user}: {token} in {conversation} is not found")
    memoro.close()
    return [requests, searchable]


def schemathesis_run(where: Place, examples: int, seed: int) -> Row:
    """Generated requests, valid and invalid, to every operation over real
    HTTP; every schemathesis check on (positive data acceptance knowing the
    rule answers the document describes: a 422 WriteOut, a 412 and a 409).
    The requests follow from ``seed`` (--seed), so a run can be repeated:
    the same seed, the same requests."""
    import schemathesis
    from schemathesis.checks import not_a_server_error
    from schemathesis.generation.modes import GenerationMode

    row = Row("schemathesis against the OpenAPI document (generated requests)")
    where.fresh()
    token = Signer(SECRET).issue("fuzz", ttl=3600)
    memoro = where.indexer()
    memoro.record_turn("fuzz", "c1", "a question", "an answer")
    memoro.index_pending()
    memoro.close()

    def valid_is_accepted(ctx: Any, response: Any, case: Any) -> bool | None:
        if case.path == "/v1/memory/review" and response.status_code >= 500:
            # this server has no chat model: a request that passed every check
            # of its input is answered so, and only so (never another 5xx)
            assert response.status_code == 501, response.text[:200]
            assert response.json()["error"]["code"] == "no_model", response.text
            return None
        if case.meta is None or not case.meta.generation.mode.is_positive:
            return None
        if response.status_code == 412 and "if-match" in {k.lower() for k in case.headers or {}}:
            return None
        if response.status_code == 422 and case.path == "/v1/memory":
            assert response.json().get("outcome") in ("too_long", "empty"), response.text
            return None
        sent_epoch = (isinstance(case.body, dict) and "epoch" in case.body) or (
            "epoch" in (case.query or {})
        )
        if response.status_code == 409 and sent_epoch:
            # an epoch the user does not have (was erased since, or never had)
            assert response.json()["error"]["code"] == "user_erased", response.text
            return None
        assert response.status_code in (200, 201, 202, 204, 401, 403, 404), response.text[:200]
        return None

    with serving(where.env()) as url:
        schema = schemathesis.openapi.from_url(f"{url}/openapi.json")

        @schema.auth()
        class UserToken:
            """The bearer token the document's security scheme asks for."""

            def get(self, case: Any, context: Any) -> str:
                return token

            def set(self, case: Any, data: str, context: Any) -> None:
                case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}

        for result in schema.get_all_operations():
            operation = result.ok()
            if operation.path == "/mcp":
                continue  # JSON-RPC, not REST: the bad-input corpus checks MCP over HTTP
            modes = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
            excluded = []
            if operation.path == "/v1/memory/review":
                # a review needs a chat model, which this server has not: a
                # valid request answers 501 no_model (valid_is_accepted holds
                # it to exactly that; tests/test_review_interfaces.py runs
                # reviews); an invalid one must still be refused first
                modes = (GenerationMode.NEGATIVE,)
                excluded = [not_a_server_error]
            for mode in modes:
                _generate(operation, mode, url, examples, valid_is_accepted, row, excluded, seed)
    return row


def _generate(
    operation: Any,
    mode: Any,
    url: str,
    examples: int,
    check: Any,
    row: Row,
    excluded: list[Any],
    seed: int,
) -> None:
    """``examples`` generated cases of one operation, each one counted;
    ``excluded``: schemathesis checks ``check`` stands in for there."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as seeded
    from schemathesis.checks import positive_data_acceptance

    @seeded(seed)
    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Any) -> None:
        row.tried += 1
        try:
            case.call_and_validate(
                base_url=url,
                excluded_checks=[positive_data_acceptance, *excluded],
                additional_checks=[check],
            )
        except (Exception, BaseExceptionGroup) as exc:  # a failure: counted, not shrunk
            row.fail(f"{operation.label} ({mode.value}): {str(exc)[:300]}")

    run()


def measure(spec: str, scale: dict[str, Any], seed: int) -> tuple[str, list[Row]]:
    rng = random.Random(seed)
    with place(spec) as where:
        checks = [
            lambda: [block_writes(where, scale["kills"], rng)],
            lambda: [workers(where, scale["turns"], scale["worker_kills"], rng)],
            lambda: [serve(where, scale["serve_kills"], 4, rng)],
            lambda: [deletion_truth(where)],
            lambda: [user_deletion(where)],
            lambda: mixed_load(where, scale["clients"], scale["seconds"]),
            lambda: [corpus(where)],
            lambda: [schemathesis_run(where, scale["examples"], seed)],
            lambda: trickling_keys(where, scale["trickle"]),
            lambda: [erase_during_imports(where, scale["erase_rounds"], scale["import_turns"])],
            lambda: [
                retention_during_appends(
                    where, scale["retention_users"], scale["retention_conversations"]
                )
            ],
        ]
        rows = []
        for check in checks:
            started = time.monotonic()
            done = check()
            for row in done:
                row.notes.append(f"{time.monotonic() - started:.0f} s")
            rows += done
            print(f"{where.label}: {done[0].check} done", file=sys.stderr)
        return where.label, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the small run CI makes")
    parser.add_argument("--database", action="append", choices=("sqlite", "pgserver"))
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args()
    scale = QUICK if args.quick else FULL
    results = dict(
        measure(spec, scale, args.seed) for spec in args.database or ["sqlite", "pgserver"]
    )

    labels = list(results)
    print("memoro reliability — " + ("quick run (CI)" if args.quick else "full run"))
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, CPython"
        f" {platform.python_version()}; seed {args.seed}"
    )
    print()
    print("| check | " + " | ".join(f"{b} tried | {b} failed" for b in labels) + " |")
    print("|---|" + "---:|" * (2 * len(labels)))
    for i, row in enumerate(results[labels[0]]):
        cells = [f"{results[b][i].tried:,} | {results[b][i].failed:,}" for b in labels]
        print(f"| {row.check} | " + " | ".join(cells) + " |")
    print()
    for label in labels:
        for row in results[label]:
            if row.notes:
                print(f"- {label}, {row.check}: " + "; ".join(row.notes))
    if args.json:
        out = {b: [row.__dict__ for row in rows] for b, rows in results.items()}
        Path(args.json).write_text(json.dumps(out, indent=1, ensure_ascii=False))
    sys.exit(1 if any(row.failed for rows in results.values() for row in rows) else 0)


if __name__ == "__main__":
    main()
