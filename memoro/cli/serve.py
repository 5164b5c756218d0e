"""``memoro serve`` and ``memoro token``: the HTTP server and user tokens."""

from __future__ import annotations

import atexit
import errno
import ipaddress
import os
import secrets
import shutil
import signal
import socket
import tempfile
from types import FrameType
from typing import Any

import click

from memoro.auth import DEFAULT_TTL, MAX_TTL, Signer, check_ttl
from memoro.cli._app import cli, log_to_stderr
from memoro.errors import InvalidInput
from memoro.history.embed import LocalEmbedder, make_embedder
from memoro.service import Memoro
from memoro.settings import SETTINGS, Settings

MAX_HEAD = 1024 * 1024
"""Bytes of request line and headers `memoro serve` reads (h11's default is 16 KB)."""


def _check_free(host: str, port: int) -> int:
    """The port to serve on — ``port``, or for 0 a free one chosen now, so
    the URLs printed are real — else a clear message, before anything is
    said to be served, when it is taken (uvicorn would report that only
    after the banner)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}: {exc.strerror or exc}") from None
    for family, kind, proto, _, address in infos:  # uvicorn binds every one
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            try:
                probe.bind((address[0], port, *address[2:]))
            except OSError as exc:
                hint = (
                    " (is another memoro serve running? choose a port with --port)"
                    if exc.errno == errno.EADDRINUSE
                    else ""
                )
                raise click.ClickException(
                    f"cannot listen on {address[0]} port {port}: {exc.strerror or exc}{hint}"
                ) from None
            port = port or probe.getsockname()[1]
    return port


def _shown_host(host: str) -> str:
    """The host to put in the URLs printed: a browser on this machine cannot
    open the any-address."""
    if host in ("0.0.0.0", "::", ""):
        return "localhost"
    return f"[{host}]" if ":" in host else host


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@cli.command("serve")
@click.option(
    "--host",
    envvar="MEMORO_HOST",
    default="127.0.0.1",
    show_default=True,
    show_envvar=True,
    help="Address to listen on.",
)
@click.option(
    "--port",
    envvar="MEMORO_PORT",
    default=8700,
    show_default=True,
    show_envvar=True,
    type=click.IntRange(0, 65535),
    help="Port to listen on.",
)
@click.option(
    "--workers",
    envvar="MEMORO_SERVE_WORKERS",
    default=1,
    show_default=True,
    show_envvar=True,
    type=click.IntRange(1, 64),
    help="Server processes sharing the port (one per core for the most requests per"
    " second). With more than one, the indexing worker (MEMORO_WORKER=thread) runs in"
    " the parent process only.",
)
@click.pass_context
def serve(ctx: click.Context, host: str, port: int, workers: int) -> None:
    """Serve the HTTP API and the Memory settings page.

    On SQLite under MEMORO_HOME, with the local embedding model and a
    background worker in this process; no configuration or network needed.
    """
    import uvicorn

    settings: Settings = ctx.find_root().obj
    if settings.auth == "local" and not _is_loopback(host):
        raise click.ClickException(
            f"auth local serves one user with no login, so it listens on loopback only;"
            f" set MEMORO_AUTH=token and MEMORO_SECRET to listen on {host}"
        )
    log_to_stderr(settings.log_level)
    port = _check_free(host, port)
    shown = _shown_host(host)
    shared: dict[str, str] = {}
    # a model that cannot be loaded is said once, in the banner, not in the log
    embedder = make_embedder(settings)
    problem = embedder.check() if isinstance(embedder, LocalEmbedder) else None
    if workers == 1:
        memoro = Memoro(settings.open_store(), settings, embedder=embedder)
        app: Any = _app(settings, memoro, shared_key="")
    else:
        # the parent indexes (when MEMORO_WORKER=thread) and supervises; each
        # child serves, with the settings passed on in its environment
        shared = _multiprocess_environment(settings)
        os.environ.update(shared)  # before the worker thread counts anything
        memoro = Memoro(settings.open_store(), settings, embedder=embedder)
        _app(settings, memoro, shared_key="")  # bad settings fail here, not in every child
        app = "memoro.cli.serve:child_app"
    # a request line may be long: the API takes up to 20,000 characters of
    # instructions in a query string, 240 KB once percent-encoded
    # memoro logs each request itself (memoro.http); uvicorn says only what goes wrong
    options: dict[str, Any] = {
        "host": host,
        "port": port,
        "workers": workers,
        "factory": workers > 1,
        "log_level": "error" if settings.log_level == "error" else "warning",
        "access_log": False,
        "h11_max_incomplete_event_size": MAX_HEAD,
        # h11, not httptools even when installed: httptools answers a control
        # character in a header with a bare text/plain 400, h11 lets memoro
        # answer it in its own JSON error shape (a 401 for a bad token)
        "http": "h11",
    }
    server = uvicorn.Server(uvicorn.Config(app, **options)) if workers == 1 else None
    if server is not None:
        # SIGTERM asks the server to stop whenever it comes, even before it
        # serves; uvicorn handles it while serving, then raises it again for
        # this handler. (Raising SystemExit from a handler instead is lost
        # when the signal lands in a garbage collector's callback.)
        # Ctrl-C (SIGINT) the same way: a stop asked for, not a crash
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: setattr(server, "should_exit", True))
    else:
        # uvicorn ends the children on SIGTERM or Ctrl-C, then raises it
        # again, which would end this process before memoro closes: exit instead
        signal.signal(signal.SIGTERM, _exit)
        signal.signal(signal.SIGINT, _exit)
    click.echo(f"memoro is serving {settings.database_words()}", err=True)
    if workers > 1:
        click.echo(f"  in {workers} processes", err=True)
    if shown == "localhost" and host != "localhost":
        click.echo(f"  listening on every address ({host or '*'}), port {port}", err=True)
    click.echo(f"  Memory settings page: http://{shown}:{port}/memory", err=True)
    click.echo(f"  API reference:        http://{shown}:{port}/docs", err=True)
    if settings.llm != "none":
        click.echo(f"  Chat page:            http://{shown}:{port}/chat", err=True)
    if problem:
        click.echo(f"  Search:               by keyword only: {problem}", err=True)
    if settings.auth == "token":
        click.echo(
            "  Pages open through /login?token=…; to try them: memoro token issue --user U",
            err=True,
        )
    try:
        if server is not None:
            server.run()
            if not server.started and not server.should_exit:
                raise SystemExit(3)  # uvicorn has said why
        else:
            uvicorn.run(app, **options)
    finally:
        memoro.close()
        if shared.get(_OWN_METRICS_DIR):
            shutil.rmtree(shared["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)
    click.echo("memoro stopped.", err=True)


SHARED_KEY = "MEMORO_SERVE_SHARED_KEY"
"""Set by ``memoro serve --workers N`` for its children: a random key of this
run, so that every process signs the same page sessions (when there is no
MEMORO_SECRET) and shows the same CSRF value in local mode."""
_OWN_METRICS_DIR = "MEMORO_SERVE_OWN_METRICS_DIR"


def _multiprocess_environment(settings: Settings) -> dict[str, str]:
    """What the children of ``--workers`` N need in their environment: every
    setting as resolved here (options included), no indexing worker of their
    own, a shared key, and a folder for prometheus_client's multiprocess
    mode (a temporary one unless PROMETHEUS_MULTIPROC_DIR is set)."""
    env = {s.env: str(getattr(settings, s.name)) for s in SETTINGS}
    env["MEMORO_WORKER"] = "off"
    env[SHARED_KEY] = secrets.token_urlsafe(32)
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        env["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="memoro-metrics-")
        env[_OWN_METRICS_DIR] = "1"
    return env


def _app(settings: Settings, memoro: Memoro, shared_key: str) -> Any:
    from memoro.web.app import create_app
    from memoro.web.security import AuthConfig

    auth = AuthConfig.from_settings(settings, shared_key=shared_key)
    provider = None
    if settings.llm != "none":
        from memoro.agent import make_provider

        provider = make_provider(
            settings.llm, settings.llm_model, settings.llm_url, settings.llm_key
        )
    return create_app(memoro, auth, provider)


def child_app() -> Any:
    """The app of one process of ``memoro serve --workers N`` (a uvicorn
    factory): settings from the environment the parent set."""
    settings = Settings.from_env()
    log_to_stderr(settings.log_level)
    embedder = make_embedder(settings)
    if isinstance(embedder, LocalEmbedder):
        embedder.check()  # the parent's banner said why it cannot load, if it cannot
    memoro = Memoro(settings.open_store(), settings, embedder=embedder, worker=False)
    atexit.register(memoro.close)
    return _app(settings, memoro, shared_key=os.environ.get(SHARED_KEY, ""))


def _exit(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


@cli.group()
def token() -> None:
    """User tokens for auth token mode."""


@token.command("issue")
@click.option("--user", "-u", required=True, help="The user the token acts for.")
@click.option(
    "--ttl",
    default=DEFAULT_TTL,
    show_default=True,
    type=int,
    callback=lambda ctx, param, ttl: _ttl(ttl),
    metavar="SECONDS",
    help=f"Seconds until it expires (1 to {MAX_TTL:,}: {MAX_TTL // 86_400} days).",
)
@click.pass_context
def token_issue(ctx: click.Context, user: str, ttl: int) -> None:
    """Print a user token signed with MEMORO_SECRET.

    The token is a JWT (HS256) with the user in MEMORO_USER_CLAIM and the
    issuer and audience memoro checks. For tests and scripts; your
    application signs its own the same way with any JWT library."""
    settings: Settings = ctx.find_root().obj
    signer = Signer(
        settings.secret,
        issuer=settings.token_issuer,
        audience=settings.token_audience,
        user_claim=settings.user_claim,
    )
    click.echo(signer.issue(user, ttl))


def _ttl(ttl: int) -> int:
    try:
        return check_ttl(ttl)
    except InvalidInput as exc:
        raise click.BadParameter(str(exc), param_hint="--ttl") from None


@cli.command("migrate")
@click.pass_context
def migrate(ctx: click.Context) -> None:
    """Create or upgrade memoro's tables in PostgreSQL.

    The database is MEMORO_DATABASE_URL; run it as the role that owns the
    tables. SQLite migrates itself on open."""
    settings: Settings = ctx.find_root().obj
    if not settings.migrate():
        click.echo(f"SQLite migrates itself when opened: {settings.database_path}")
        return
    click.echo("The PostgreSQL schema is up to date.")
