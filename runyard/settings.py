"""Configuration read from the environment (and an `.env` file), validated at start-up."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, PrivateAttr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from runyard.domain.console_settings import ConsoleSettings
from runyard.domain.group_caps import parse_group_limits
from runyard.domain.postgres_url import is_postgres_url, parse_postgres_url
from runyard.domain.shutdown_bounds import ShutdownBounds

# Runyard's name of a setting -> LangGraph's server's name for it.
OFFICIAL_NAMES = {
    "DATABASE_URL": "DATABASE_URI",
    "REDIS_URL": "REDIS_URI",
    "RUNYARD_REDIS_PREFIX": "REDIS_KEY_PREFIX",
    "RUNYARD_DB_POOL_SIZE": "LANGGRAPH_POSTGRES_POOL_MAX_SIZE",
    "WORKER_DRAIN_TIMEOUT": "BG_JOB_SHUTDOWN_GRACE_PERIOD_SECS",
    "RUNYARD_EVENT_RETENTION_SECONDS": "RESUMABLE_STREAM_TTL_SECONDS",
    "RUNYARD_MAX_BODY_BYTES": "HTTP_MAX_REQUEST_BODY_BYTES",
}
# LangGraph's server's older names, read after its own (DATABASE_URI defaults to POSTGRES_URI).
OLDER_NAMES = {"DATABASE_URL": "POSTGRES_URI"}


def official(name: str) -> AliasChoices:
    """Runyard's name first (it wins when both are set), then LangGraph's server's."""
    older = [OLDER_NAMES[name]] if name in OLDER_NAMES else []
    return AliasChoices(name, OFFICIAL_NAMES[name], *older)


def setting_names() -> list[str]:
    """Every environment name Settings reads: Runyard's and LangGraph's server's."""
    names = [str(f.alias) for f in Settings.model_fields.values() if f.alias is not None]
    official_names = [OFFICIAL_NAMES[name] for name in names if name in OFFICIAL_NAMES]
    return names + official_names + [OLDER_NAMES[name] for name in names if name in OLDER_NAMES]


class Settings(ConsoleSettings, ShutdownBounds, BaseSettings):
    """Every knob of a Runyard instance; see `.env.example` for the documented list."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True)

    # Storage and transport. Where LangGraph's server has its own name for a setting, that
    # name is read too (second in `official(...)`); Runyard's name wins when both are set.
    # Without a database URL, `runyard dev` uses the embedded SQLite store; `runyard serve`
    # refuses to start unless SQLite is asked for (`--sqlite` or RUNYARD_SQLITE=true).
    database_url: str | None = Field(
        default=None, alias="DATABASE_URL", validation_alias=official("DATABASE_URL")
    )
    redis_url: str | None = Field(
        default=None, alias="REDIS_URL", validation_alias=official("REDIS_URL")
    )
    redis_prefix: str = Field(
        default="runyard:",
        alias="RUNYARD_REDIS_PREFIX",
        validation_alias=official("RUNYARD_REDIS_PREFIX"),
    )
    sqlite: bool = Field(default=False, alias="RUNYARD_SQLITE")
    # Redis connections per instance, in budgets that cannot starve one another: the
    # stream reader's fetch loops (they read every subscriber's live events, shared by all
    # subscribers), executing runs' writes (events, run ends, completion signals), and the
    # request path (queue pushes, cancels, replays). Pub/sub listeners and worker loops'
    # BLPOP hold WORKER_COUNT + 3 more. A busy pool makes callers wait; it is never taken
    # for Redis being away.
    redis_stream_readers: int = Field(default=2, ge=1, le=64, alias="RUNYARD_REDIS_STREAM_READERS")
    redis_worker_connections: int = Field(
        default=20, ge=1, alias="RUNYARD_REDIS_WORKER_CONNECTIONS"
    )
    redis_request_connections: int = Field(
        default=20, ge=1, alias="RUNYARD_REDIS_REQUEST_CONNECTIONS"
    )
    data_dir: Path = Field(default=Path(".runyard"), alias="RUNYARD_DATA_DIR")
    config_path: Path | None = Field(default=None, alias="RUNYARD_CONFIG")
    # Generative UI (`ui` in langgraph.json): where the built bundles go (empty:
    # $RUNYARD_DATA_DIR/ui), and whether start-up builds them (false: serve an earlier
    # `runyard build-ui`, as images do, with no npm at run time).
    ui_dir: Path | None = Field(default=None, alias="RUNYARD_UI_DIR")
    ui_build: bool = Field(default=True, alias="RUNYARD_UI_BUILD")
    migrate_on_start: bool = Field(default=True, alias="RUNYARD_MIGRATE_ON_START")
    # Each of the four PostgreSQL pools (Runyard's transactions and other queries, the run
    # path's standalone statements and checkpoints, the checkpointer's pruning and delta-channel
    # history, the store) opens at most this many connections: at most four times this in all.
    db_pool_size: int = Field(
        default=10,
        ge=1,
        alias="RUNYARD_DB_POOL_SIZE",
        validation_alias=official("RUNYARD_DB_POOL_SIZE"),
    )
    log_level: str = Field(default="INFO", alias="LOG_LEVEL")
    # Empty: JSON lines on PostgreSQL (production), readable text on the embedded store (dev).
    log_format: Literal["text", "json"] | None = Field(default=None, alias="RUNYARD_LOG_FORMAT")
    # A line per HTTP request. Empty: on for `runyard dev`, off for `runyard serve`
    # (a proxy in front usually logs requests; /metrics counts them by route).
    access_log: bool | None = Field(default=None, alias="RUNYARD_ACCESS_LOG")

    # Worker engine.
    # LangGraph's name: the recursion limit of a run whose config sets none (LangGraph's own
    # default when unset).
    default_recursion_limit: int | None = Field(
        default=None, ge=1, alias="LANGGRAPH_DEFAULT_RECURSION_LIMIT"
    )
    worker_count: int = Field(default=1, ge=0, alias="WORKER_COUNT")
    # Sleeping runs (waiting on I/O) cost no CPU: slots should not be what limits them.
    n_jobs_per_worker: int = Field(default=500, ge=1, alias="N_JOBS_PER_WORKER")
    bg_job_timeout_secs: float = Field(default=3600.0, gt=0, alias="BG_JOB_TIMEOUT_SECS")
    # Without priority.path, what names a run's fairness group: `langgraph_auth_user_id`, the
    # authenticated user; any other name is a run metadata key, refused at start with auth
    # configured (a client writes its own metadata). Unset: every run "default".
    fairness_key: str | None = Field(default=None, min_length=1, alias="RUNYARD_FAIRNESS_KEY")
    # Pending runs one fairness group may hold (per user when groups are per user).
    max_pending_runs_per_group: int = Field(
        default=10_000, ge=1, alias="RUNYARD_MAX_PENDING_RUNS_PER_GROUP"
    )
    max_batch_runs: int = Field(default=1000, ge=1, alias="RUNYARD_MAX_BATCH_RUNS")
    # Per-group caps on dispatch (0: no cap), the default for every group, and overrides as
    # JSON ({"group": {"max_running": 3, "max_starts_per_minute": 60}}).
    group_max_running: int = Field(default=0, ge=0, alias="RUNYARD_GROUP_MAX_RUNNING")
    group_max_starts_per_minute: int = Field(
        default=0, ge=0, alias="RUNYARD_GROUP_MAX_STARTS_PER_MINUTE"
    )
    group_limits: str | None = Field(default=None, alias="RUNYARD_GROUP_LIMITS")
    _group_limits: dict[str, dict[str, int]] = PrivateAttr(default_factory=dict)
    _dev_mode: bool = PrivateAttr(default=False)
    bg_job_max_retries: int = Field(default=3, ge=1, alias="BG_JOB_MAX_RETRIES")
    # A crashed instance's runs continue elsewhere about one lease (plus up to one reaper
    # interval) after the crash; the lease outlasts three missed heartbeats.
    lease_duration_seconds: float = Field(default=8.0, gt=0, alias="LEASE_DURATION_SECONDS")
    heartbeat_interval_seconds: float = Field(default=2.0, gt=0, alias="HEARTBEAT_INTERVAL_SECONDS")
    reaper_interval_seconds: float = Field(default=1.0, gt=0, alias="REAPER_INTERVAL_SECONDS")
    stuck_pending_threshold_seconds: float = Field(
        default=30.0, gt=0, alias="STUCK_PENDING_THRESHOLD_SECONDS"
    )
    postgres_poll_interval_seconds: float = Field(
        default=2.0, gt=0, alias="POSTGRES_POLL_INTERVAL_SECONDS"
    )
    worker_drain_timeout: float = Field(
        default=30.0,
        ge=0,
        alias="WORKER_DRAIN_TIMEOUT",
        validation_alias=official("WORKER_DRAIN_TIMEOUT"),
    )
    # At-most-once tools (runyard.tools): a recorded result larger than this (as stored) is
    # not kept; a resumed run then tells the model it was too large instead of replaying it.
    max_tool_result_bytes: int = Field(
        default=1024 * 1024, ge=1024, alias="RUNYARD_MAX_TOOL_RESULT_BYTES"
    )

    # Streaming.
    stream_keepalive_seconds: float = Field(default=5.0, gt=0, alias="RUNYARD_KEEPALIVE_SECONDS")
    event_retention_seconds: float = Field(
        default=3600.0,
        gt=0,
        alias="RUNYARD_EVENT_RETENTION_SECONDS",
        validation_alias=official("RUNYARD_EVENT_RETENTION_SECONDS"),
    )
    webhook_max_attempts: int = Field(default=3, ge=1, alias="RUNYARD_WEBHOOK_MAX_ATTEMPTS")
    # Deliveries an instance sends at once, in all and to one receiver (scheme, host, port);
    # the others wait their turn, their outbox leases renewed meanwhile.
    webhook_max_concurrent: int = Field(default=100, ge=1, alias="RUNYARD_WEBHOOK_MAX_CONCURRENT")
    webhook_max_per_receiver: int = Field(
        default=10, ge=1, alias="RUNYARD_WEBHOOK_MAX_PER_RECEIVER"
    )
    # Signs every delivery (Standard Webhooks: webhook-id, webhook-timestamp,
    # webhook-signature). `whsec_` + base64, or any string used as its bytes. Empty: unsigned.
    webhook_secret: str | None = Field(default=None, alias="RUNYARD_WEBHOOK_SECRET", repr=False)
    session_replay_events: int = Field(default=10_000, ge=1, alias="RUNYARD_SESSION_REPLAY_EVENTS")

    # Encryption at rest, LangGraph's settings: the AES key (16, 24 or 32 bytes, used as
    # the bytes of the text) encrypts checkpoint blobs; the JSON keys (comma-separated)
    # are encrypted wherever they appear in stored JSON. Runyard's own: more keys,
    # comma-separated, that only decrypt (the keys a rotation moves away from).
    aes_key: str | None = Field(default=None, alias="LANGGRAPH_AES_KEY", repr=False)
    aes_json_keys: str | None = Field(default=None, alias="LANGGRAPH_AES_JSON_KEYS")
    aes_decrypt_keys: str | None = Field(default=None, alias="RUNYARD_AES_DECRYPT_KEYS", repr=False)

    # Crons. FF_CRONS_ENABLED=false (LangGraph's name): this instance fires no crons.
    crons_enabled: bool = Field(default=True, alias="FF_CRONS_ENABLED")
    cron_interval_seconds: float = Field(
        default=1.0, gt=0, le=60, alias="RUNYARD_CRON_INTERVAL_SECONDS"
    )
    # The shortest gap a cron's schedule may leave between two firings, and how many crons,
    # enabled or not, one user (all anonymous callers together, with no auth) may have.
    cron_min_interval_seconds: int = Field(
        default=60, ge=1, alias="RUNYARD_CRON_MIN_INTERVAL_SECONDS"
    )
    max_crons_per_user: int = Field(default=100, ge=1, alias="RUNYARD_MAX_CRONS_PER_USER")

    # Cross-origin requests (browsers). Empty: every origin, as LangGraph's server allows;
    # else a comma-separated list such as `https://chat.example.com,http://localhost:3000`.
    # `http.cors` in langgraph.json, when it lists allow_origins, takes precedence.
    cors_allow_origins: str | None = Field(default=None, alias="CORS_ALLOW_ORIGINS")
    # Answer Chrome's private-network preflights, so a public page may call a server on this
    # machine. Empty: on for `runyard dev`, off for `runyard serve` (on any store).
    allow_private_network: bool | None = Field(default=None, alias="ALLOW_PRIVATE_NETWORK")

    # `runyard serve` on a non-loopback address with no auth configured: refused unless this
    # is true (or --allow-unauthenticated is passed), e.g. behind a gateway that authenticates.
    allow_unauthenticated: bool = Field(default=False, alias="RUNYARD_ALLOW_UNAUTHENTICATED")
    # With auth configured: /docs, /redoc and /openapi.json run the authenticate handler too
    # (a refusal answers 401). Off by default.
    auth_metrics_and_docs: bool = Field(default=False, alias="RUNYARD_AUTH_METRICS_AND_DOCS")
    # /metrics asks for `Authorization: Bearer <this>` when set; with auth configured and no
    # token, /metrics answers 403 (its fairness groups name the users).
    metrics_token: str | None = Field(
        default=None, min_length=16, alias="RUNYARD_METRICS_TOKEN", repr=False
    )

    # Serve every route under this path (as LangGraph's server, MOUNT_PREFIX wins over
    # http.mount_prefix in langgraph.json).
    mount_prefix: str | None = Field(default=None, alias="MOUNT_PREFIX")

    # HTTP limits.
    max_body_bytes: int = Field(
        default=10 * 1024 * 1024,
        ge=1024,
        alias="RUNYARD_MAX_BODY_BYTES",
        validation_alias=official("RUNYARD_MAX_BODY_BYTES"),
    )
    # A connection whose request head (request line and headers) is not complete this long
    # after its first byte (or after the connection opened) gets 408 and is closed; a larger
    # head than max_head_bytes gets 431.
    head_timeout_seconds: float = Field(default=10.0, gt=0, alias="RUNYARD_HEAD_TIMEOUT_SECONDS")
    max_head_bytes: int = Field(default=64 * 1024, ge=4096, alias="RUNYARD_MAX_HEAD_BYTES")
    # A body not complete this long after its head gets 408 (the connection is just closed
    # if the request was answered already). Connections past max_connections get 503 and
    # Retry-After at once, but for /ok and /livez; see docs/security.md for the open-files limit.
    body_timeout_seconds: float = Field(default=60.0, gt=0, alias="RUNYARD_BODY_TIMEOUT_SECONDS")
    max_connections: int = Field(default=25_000, ge=1, alias="RUNYARD_MAX_CONNECTIONS")
    # A new store item's key and namespace (as the client sends it), in characters.
    store_max_key_chars: int = Field(default=512, ge=1, alias="RUNYARD_STORE_MAX_KEY_CHARS")
    store_max_label_chars: int = Field(default=128, ge=1, alias="RUNYARD_STORE_MAX_LABEL_CHARS")
    store_max_namespace_labels: int = Field(
        default=10, ge=1, alias="RUNYARD_STORE_MAX_NAMESPACE_LABELS"
    )

    # Tracing (OpenTelemetry, needs the `tracing` extra). Empty: OTLP when an OTLP endpoint
    # is set, else off.
    tracing: Literal["off", "otlp", "console"] | None = Field(default=None, alias="RUNYARD_TRACING")
    otlp_endpoint: str | None = Field(default=None, alias="OTEL_EXPORTER_OTLP_ENDPOINT")
    otlp_traces_endpoint: str | None = Field(
        default=None, alias="OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    )
    otlp_protocol: Literal["http/protobuf", "grpc"] = Field(
        default="http/protobuf", alias="OTEL_EXPORTER_OTLP_PROTOCOL"
    )
    otel_service_name: str = Field(default="runyard", alias="OTEL_SERVICE_NAME")

    @field_validator(
        "log_format",
        "tracing",
        "otlp_endpoint",
        "otlp_traces_endpoint",
        "cors_allow_origins",
        "allow_private_network",
        "webhook_secret",
        "mount_prefix",
        "aes_key",
        "aes_json_keys",
        "aes_decrypt_keys",
        "group_limits",
        "metrics_token",
        "default_recursion_limit",
        mode="before",
    )
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        if value.startswith("sqlite+aiosqlite://"):
            return value
        if not is_postgres_url(value):
            raise ValueError(
                "DATABASE_URL must be a PostgreSQL URL (postgresql://user@host:5432/db) "
                "or sqlite+aiosqlite:///path/to/file.sqlite"
            )
        # Its parameters as libpq reads them, each one both drivers honour (or refused).
        parse_postgres_url(value, setting="")  # pydantic names DATABASE_URL itself
        return "postgresql+asyncpg://" + value.split("://", 1)[1]

    @field_validator("mount_prefix")
    @classmethod
    def _check_mount_prefix(cls, value: str | None) -> str | None:
        if value is not None and (not value.startswith("/") or value.endswith("/")):
            raise ValueError(
                "MOUNT_PREFIX must start with '/' and not end with '/' (such as '/my-api')"
            )
        return value

    @field_validator("redis_url")
    @classmethod
    def _check_redis_url(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        if not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("REDIS_URL must start with redis://, rediss:// or unix://")
        return value

    @model_validator(mode="after")
    def _check_group_limits(self) -> Settings:
        self._group_limits = parse_group_limits(self.group_limits) if self.group_limits else {}
        return self

    @property
    def group_limit_overrides(self) -> dict[str, dict[str, int]]:
        """RUNYARD_GROUP_LIMITS: per group, the caps it sets (`max_running`,
        `max_starts_per_minute`); the others keep the defaults."""
        return self._group_limits

    @model_validator(mode="after")
    def _check_timings(self) -> Settings:
        if self.heartbeat_interval_seconds * 2 > self.lease_duration_seconds:
            raise ValueError(
                "HEARTBEAT_INTERVAL_SECONDS "
                f"({self.heartbeat_interval_seconds}) must be at most half of "
                f"LEASE_DURATION_SECONDS ({self.lease_duration_seconds}) so a lease "
                "is renewed at least twice before it expires"
            )
        if self.aes_key is None and (self.aes_json_keys or self.aes_decrypt_keys):
            names = "LANGGRAPH_AES_JSON_KEYS" if self.aes_json_keys else "RUNYARD_AES_DECRYPT_KEYS"
            raise ValueError(f"{names} needs LANGGRAPH_AES_KEY, the key that encrypts")
        keys = [("LANGGRAPH_AES_KEY", (self.aes_key or "").encode())] if self.aes_key else []
        for number, key in enumerate(self.aes_previous_keys, 1):
            keys.append((f"RUNYARD_AES_DECRYPT_KEYS (key {number})", key))
        for name, key in keys:
            if len(key) not in (16, 24, 32):
                raise ValueError(f"{name} must be 16, 24 or 32 bytes long (got {len(key)})")
        return self

    @property
    def aes_previous_keys(self) -> list[bytes]:
        """The keys of RUNYARD_AES_DECRYPT_KEYS, as bytes."""
        raw = self.aes_decrypt_keys or ""
        return [key.strip().encode() for key in raw.split(",") if key.strip()]

    @property
    def aes_json_key_names(self) -> list[str]:
        """The keys of LANGGRAPH_AES_JSON_KEYS."""
        raw = self.aes_json_keys or ""
        return [key.strip() for key in raw.split(",") if key.strip()]

    @property
    def queue_kind(self) -> str:
        """`redis`, or `in-process` without REDIS_URL."""
        return "redis" if self.redis_url else "in-process"

    @property
    def workers_here(self) -> int:
        """Worker loops of an instance.

        An API-only instance (WORKER_COUNT=0) exists only where another one executes, so
        without Redis there is at least one.
        """
        return self.worker_count if self.redis_url else max(self.worker_count, 1)

    def enable_dev_mode(self) -> Settings:
        """Turn these settings into `runyard dev`'s, with developer defaults (webhooks to
        loopback, private-network preflights), and return them. Never read from the
        environment: `serve`, on any store, is production."""
        self._dev_mode = True
        return self

    @property
    def dev_mode(self) -> bool:
        """True under `runyard dev` only (see `enable_dev_mode`)."""
        return self._dev_mode

    @property
    def is_embedded(self) -> bool:
        """True when no external database is configured (dev mode on SQLite)."""
        return self.database_url is None or self.database_url.startswith("sqlite")

    @property
    def resolved_log_format(self) -> str:
        """`json` or `text`: JSON lines in production (PostgreSQL), readable text in dev."""
        if self.log_format is not None:
            return self.log_format
        return "text" if self.is_embedded else "json"

    def resolved_ui_dir(self) -> Path:
        """Where the generative UI's bundles are built and read."""
        return (self.ui_dir or self.data_dir / "ui").resolve()

    def resolved_database_url(self) -> str:
        """The SQLAlchemy URL to connect to, defaulting to the SQLite file under the data dir."""
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{(self.data_dir / 'runyard.sqlite').resolve()}"
