"""The environment names LangGraph's server reads, and which of them Runyard honours.

The list is what langgraph-api 0.16.7 reads: every name of its config module, the names
`langgraph build` writes into an image (`LANGSERVE_GRAPHS` and the JSON forms of
langgraph.json's keys) and the few its other modules read. An image or a deployment made
for LangGraph's server carries them; Runyard reads those it supports and names the others
once at start-up, so nothing set is dropped in silence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

# The JSON forms of langgraph.json's keys in an image built for LangGraph's server, by key.
CONFIG_ENV_NAMES = {
    "graphs": "LANGSERVE_GRAPHS",
    "store": "LANGGRAPH_STORE",
    "auth": "LANGGRAPH_AUTH",
    "encryption": "LANGGRAPH_ENCRYPTION",
    "priority": "LANGGRAPH_PRIORITY",
    "http": "LANGGRAPH_HTTP",
    "webhooks": "LANGGRAPH_WEBHOOKS",
    "checkpointer": "LANGGRAPH_CHECKPOINTER",
    "ui": "LANGGRAPH_UI",
    "ui_config": "LANGGRAPH_UI_CONFIG",
}

# Read by the libraries a graph runs with (LangSmith tracing through `langsmith`), in the
# server's process as in any other: Runyard passes them on untouched.
PASSED_ON = frozenset(
    {
        "LANGCHAIN_API_KEY",
        "LANGCHAIN_ENDPOINT",
        "LANGCHAIN_TRACING",
        "LANGCHAIN_TRACING_V2",
        "LANGSMITH_API_KEY",
        "LANGSMITH_ENDPOINT",
        "LANGSMITH_TRACING",
        "LANGSMITH_TRACING_V2",
    }
)

LANGGRAPH_NAMES = frozenset(
    {
        *CONFIG_ENV_NAMES.values(),
        *PASSED_ON,
        "A2A_A2UI_ENABLED",
        "A2A_A2UI_TOOL_CALL_RESULTS",
        "A2A_ALLOWED_TOOL_CALL_RESULTS",
        "AGENT_POSTGRES_IAM_AUTH_PROVIDER",
        "AGENT_REDIS_IAM_AUTH_PROVIDER",
        "ALLOW_PRIVATE_NETWORK",
        "BG_JOB_ISOLATED_LOOPS",
        "BG_JOB_MAX_RETRIES",
        "BG_JOB_SHUTDOWN_GRACE_PERIOD_SECS",
        "BG_JOB_TIMEOUT_SECS",
        "BYOC_ENV",
        "BYOC_HOST",
        "CHECKPOINT_BATCH_DELAY",
        "CHECKPOINT_MAX_BATCH_SIZE",
        "CORS_ALLOW_ORIGINS",
        "CORS_CONFIG",
        "CRON_SCHEDULER_BATCH_SIZE",
        "CRON_SCHEDULER_SLEEP_TIME",
        "CUSTOM_LSD_DD_API_KEY",
        "CUSTOM_LSD_DD_ENDPOINT",
        "DATABASE_URI",
        "DATA_PLANE_ID",
        "DATA_PLANE_JWT_SECRET",
        "DATA_PLANE_NAME",
        "DATA_PLANE_ORG_ID",
        "DATA_PLANE_ORG_NAME",
        "DB_MIGRATION_BY_CORE_API",
        "DEFAULT_A2A_ASSISTANT_ID",
        "DISPATCH_MODE",
        "EXPOSE_INTERNAL_METRICS_PROMETHEUS",
        "FF_ASYNC_PUBLISH_QUEUE",
        "FF_CRONS_ENABLED",
        "FF_LOG_DROPPED_EVENTS",
        "FF_LOG_QUERY_AND_PARAMS",
        "FF_PROFILE_IMPORTS",
        "FF_PYSPY_PROFILING_ENABLED",
        "FF_PYSPY_PROFILING_MAX_DURATION_SECS",
        "FF_USE_REDIS_QUEUE",
        "FF_V2_EVENT_STREAMING",
        "GRPC_CLIENT_HTTP2_INITIAL_WINDOW_SIZE",
        "GRPC_CLIENT_MAX_RECV_MSG_BYTES",
        "GRPC_CLIENT_MAX_SEND_MSG_BYTES",
        "GRPC_CLIENT_POOL_SIZE",
        "HTTP_MAX_REQUEST_BODY_BYTES",
        "LANGCHAIN_REVISION_ID",
        "LANGGRAPH_AES_JSON_KEYS",
        "LANGGRAPH_AES_KEY",
        "LANGGRAPH_ALLOW_BLOCKING",
        "LANGGRAPH_API_URL",
        "LANGGRAPH_AUTH_TYPE",
        "LANGGRAPH_CHECKPOINTER_POSTGRES_POOL_MIN_SIZE",
        "LANGGRAPH_CHECKPOINTER_POSTGRES_POOL_TIMEOUT_SECONDS",
        "LANGGRAPH_CLOUD_LICENSE_KEY",
        "LANGGRAPH_CONFIG",
        "LANGGRAPH_DEFAULT_RECURSION_LIMIT",
        "LANGGRAPH_DISABLE_FILE_PERSISTENCE",
        "LANGGRAPH_JS_READY_TIMEOUT_SECS",
        "LANGGRAPH_LOGS_ENABLED",
        "LANGGRAPH_LOGS_ENDPOINT",
        "LANGGRAPH_METRICS_ENABLED",
        "LANGGRAPH_METRICS_ENDPOINT",
        "LANGGRAPH_METRICS_EXPORT_INTERVAL_MS",
        "LANGGRAPH_MOUNT_PREFIX",
        "LANGGRAPH_NO_VERSION_CHECK",
        "LANGGRAPH_POSTGRES_EXTENSIONS",
        "LANGGRAPH_POSTGRES_POOL_MAX_SIZE",
        "LANGGRAPH_RUNTIME_EDITION",
        "LANGGRAPH_SERVER_HOST",
        "LANGGRAPH_STORE_BACKEND",
        "LANGGRAPH_THREAD_TTL",
        "LANGGRAPH_UI_BUNDLER",
        "LANGSMITH_AUTH_ENDPOINT",
        "LANGSMITH_AUTH_VERIFY_TENANT_ID",
        "LANGSMITH_CONTROL_PLANE_API_KEY",
        "LANGSMITH_LANGGRAPH_API_VARIANT",
        "LANGSMITH_LANGGRAPH_GIT_REF_SHA",
        "LANGSMITH_LICENSE_REQUIRED_CLAIMS",
        "LANGSMITH_TENANT_ID",
        "LSD_CACHE_PACKAGES_DISTRIBUTIONS",
        "LSD_DD_API_KEY",
        "LSD_DD_ENDPOINT",
        "LSD_DEPLOYMENT_TYPE",
        "LSD_GRPC_SERVER_ADDRESS",
        "LSD_GRPC_SERVER_MAX_RECV_MSG_BYTES",
        "LSD_GRPC_SERVER_MAX_SEND_MSG_BYTES",
        "LSD_PROTOCOL_V2_BUFFER_SIZE",
        "LSD_PUBLISH_QUEUE_SIZE",
        "LSD_STREAM_PUBLISH_RETRY_BACKOFF_FACTOR",
        "LSD_STREAM_PUBLISH_RETRY_INITIAL_INTERVAL_SECS",
        "LSD_STREAM_PUBLISH_RETRY_JITTER",
        "LSD_STREAM_PUBLISH_RETRY_MAX_DURATION_SECS",
        "LSD_STREAM_PUBLISH_RETRY_MAX_INTERVAL_SECS",
        "MAX_STREAM_CHUNK_SIZE_BYTES",
        "METRIC_MAX_EMITTING_TIER",
        "METRIC_PREFIX",
        "MIGRATIONS_PATH",
        "MOUNT_PREFIX",
        "N_JOBS_PER_WORKER",
        "OTEL_ENABLED",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "POSTGRES_URI",
        "PYTHON_GRPC_BIND_HOST",
        "REDIS_CLUSTER",
        "REDIS_CONNECT_TIMEOUT",
        "REDIS_GCP_SERVICE_ACCOUNT_JSON",
        "REDIS_HEALTH_CHECK_INTERVAL",
        "REDIS_KEY_PREFIX",
        "REDIS_MAX_CONNECTIONS",
        "REDIS_TLS_CA_CERT",
        "REDIS_URI",
        "REDIS_URI_CUSTOM",
        "RESUMABLE_STREAM_TTL_SECONDS",
        "RUN_STATS_CACHE_SECONDS",
        "SELF_HOSTED_OBSERVABILITY_SERVICE_NAME",
        "STATS_INTERVAL_SECS",
    }
)


def unsupported_names(environ: Mapping[str, str], read: Iterable[str]) -> list[str]:
    """The names of LANGGRAPH_NAMES set in `environ` that are neither in `read` (what Runyard
    reads) nor passed on to the graphs' libraries, sorted."""
    honoured = set(read) | PASSED_ON
    return sorted(name for name in LANGGRAPH_NAMES if name in environ and name not in honoured)
