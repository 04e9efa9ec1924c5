"""The `webhooks` section of `langgraph.json`, read as the official server reads it: the
`url` policy, static `headers` templated from the environment under `env_prefix`, and
`allowed_fields`."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runyard.domain.config_keys import refuse_unknown_keys
from runyard.domain.errors import ConfigError
from runyard.domain.webhook_policy import WebhookPolicy

KNOWN_KEYS = frozenset({"env_prefix", "url", "headers", "allowed_fields"})
URL_KEYS = frozenset(
    {
        "require_https",
        "allowed_domains",
        "allowed_ports",
        "max_url_length",
        "disable_loopback",
        "disable_private_ips",
    }
)
PAYLOAD_FIELDS = frozenset(
    {
        "run_id",
        "thread_id",
        "assistant_id",
        "created_at",
        "updated_at",
        "metadata",
        "kwargs",
        "multitask_strategy",
        "status",
        "run_started_at",
        "run_ended_at",
        "webhook_sent_at",
        "values",
        "error",
    }
)
DEFAULT_ENV_PREFIX = "LG_WEBHOOK_"
# "${{ env.LG_WEBHOOK_TOKEN }}", as the official server templates header values.
_TEMPLATE = re.compile(r"\$\{\{\s*([^}]+?)\s*\}\}")


@dataclass(frozen=True)
class WebhooksConfig:
    """What `webhooks` in `langgraph.json` asks; `url` holds only the keys written."""

    url: Mapping[str, Any] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    allowed_fields: frozenset[str] | None = None

    def policy(self, *, dev: bool) -> WebhookPolicy:
        """The URL policy. Defaults as the official server's: with a `url` section,
        https is required and URLs stop at 2048 characters (else http is allowed, up to
        4096). Runyard's own defaults: private addresses are refused, and `runyard dev`
        (`dev`) allows loopback unless `disable_loopback` is written."""
        url = self.url
        has_url = bool(url)
        return WebhookPolicy(
            allowed_domains=tuple(url.get("allowed_domains") or ()),
            allowed_ports=tuple(url.get("allowed_ports") or ()),
            require_https=bool(url.get("require_https", has_url)),
            disable_loopback=bool(url.get("disable_loopback", not dev)),
            disable_private_ips=bool(url.get("disable_private_ips", True)),
            max_url_length=int(url.get("max_url_length", 2048 if has_url else 4096)),
        )

    @property
    def loopback_written(self) -> bool:
        """Whether `webhooks.url.disable_loopback` is set explicitly."""
        return "disable_loopback" in self.url


def parse_webhooks(
    source: str, raw: Any, environ: Mapping[str, str] | None = None
) -> WebhooksConfig:
    """Validate `webhooks`; errors name the file and the key. Header templates are
    rendered once, here, from `environ` (the process environment by default)."""
    if raw is None:
        return WebhooksConfig()
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: 'webhooks' must be an object")
    refuse_unknown_keys(source, "webhooks", raw, KNOWN_KEYS)
    url = _parse_url(source, raw.get("url"))
    headers = _render_headers(source, raw, os.environ if environ is None else environ)
    if headers and not url.get("allowed_domains"):
        # Stricter than LangGraph's server, which sends them to any URL.
        raise ConfigError(
            f"{source}: 'webhooks.headers' is set but 'webhooks.url.allowed_domains' is not: "
            "every user who creates a run picks its webhook URL, so the headers (a token, "
            "say) would be sent to any URL they name. List the receivers' hosts in "
            "webhooks.url.allowed_domains, or remove webhooks.headers and sign deliveries "
            "with RUNYARD_WEBHOOK_SECRET instead"
        )
    return WebhooksConfig(
        url=url,
        headers=headers,
        allowed_fields=_parse_fields(source, raw.get("allowed_fields")),
    )


def _parse_url(source: str, url: Any) -> dict[str, Any]:
    if url is None:
        return {}
    if not isinstance(url, dict):
        raise ConfigError(f"{source}: 'webhooks.url' must be an object")
    refuse_unknown_keys(source, "webhooks.url", url, URL_KEYS)
    domains = url.get("allowed_domains", [])
    if not isinstance(domains, list) or not all(isinstance(d, str) and d for d in domains):
        raise ConfigError(
            f"{source}: 'webhooks.url.allowed_domains' must be a list of non-empty strings"
        )
    for domain in domains:
        if "*" in domain and not (domain.startswith("*.") and "*" not in domain[2:]):
            raise ConfigError(
                f"{source}: 'webhooks.url.allowed_domains' wildcard can only be used as a "
                f"prefix, in the form '*.domain'; got {domain!r}"
            )
    ports = url.get("allowed_ports", [])
    if not isinstance(ports, list) or not all(
        isinstance(p, int) and not isinstance(p, bool) and 0 < p < 65536 for p in ports
    ):
        raise ConfigError(f"{source}: 'webhooks.url.allowed_ports' must be a list of ports")
    for flag in ("require_https", "disable_loopback", "disable_private_ips"):
        if flag in url and not isinstance(url[flag], bool):
            raise ConfigError(f"{source}: 'webhooks.url.{flag}' must be true or false")
    length = url.get("max_url_length", 2048)
    if not isinstance(length, int) or isinstance(length, bool) or length < 1:
        raise ConfigError(f"{source}: 'webhooks.url.max_url_length' must be a positive integer")
    return dict(url)


def _render_headers(source: str, raw: dict[str, Any], environ: Mapping[str, str]) -> dict[str, str]:
    headers = raw.get("headers") or {}
    if not isinstance(headers, dict):
        raise ConfigError(f"{source}: 'webhooks.headers' must map header names to strings")
    prefix = raw.get("env_prefix", DEFAULT_ENV_PREFIX)
    if not isinstance(prefix, str):
        raise ConfigError(f"{source}: 'webhooks.env_prefix' must be a string")

    def replace(match: re.Match[str]) -> str:
        expr = match.group(1).strip()
        var = expr.removeprefix("env.")
        if not expr.startswith("env.") or not var or "." in var:
            raise ConfigError(
                f"{source}: 'webhooks.headers' may only reference env.VAR, as in "
                f"${{{{ env.{prefix}TOKEN }}}}; got {expr!r}"
            )
        if prefix and not var.startswith(prefix):
            raise ConfigError(
                f"{source}: 'webhooks.headers' references {var}, which does not start with "
                f"webhooks.env_prefix {prefix!r}"
            )
        if var not in environ:
            raise ConfigError(
                f"{source}: 'webhooks.headers' references {var}, which is not set in the "
                "environment"
            )
        return environ[var]

    rendered: dict[str, str] = {}
    for name, value in headers.items():
        if not isinstance(value, str):
            raise ConfigError(f"{source}: 'webhooks.headers.{name}' must be a string")
        text = _TEMPLATE.sub(replace, value)
        if any(c in text for c in "\r\n\x00") or any(c in name for c in "\r\n\x00: "):
            raise ConfigError(f"{source}: 'webhooks.headers.{name}' is not a valid header")
        rendered[name] = text
    return rendered


def _parse_fields(source: str, fields: Any) -> frozenset[str] | None:
    if fields is None:
        return None
    if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
        raise ConfigError(f"{source}: 'webhooks.allowed_fields' must be a list of strings")
    unknown = sorted(set(fields) - PAYLOAD_FIELDS)
    if unknown:
        raise ConfigError(
            f"{source}: 'webhooks.allowed_fields' has unknown field(s) {', '.join(unknown)} "
            f"(valid: {', '.join(sorted(PAYLOAD_FIELDS))})"
        )
    return frozenset(fields) or None
