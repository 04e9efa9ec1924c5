"""The webhook policy and sender, from the settings and the project's `webhooks` section."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from runyard.db.engine import Sessions
from runyard.observability.metrics import Metrics
from runyard.outbound.guard import WebhookGuard
from runyard.outbound.signing import signing_key
from runyard.project.config import ProjectConfig
from runyard.project.http_config import HttpConfig
from runyard.settings import Settings
from runyard.worker.webhooks import DeliveryOptions, WebhookSender

if TYPE_CHECKING:
    from runyard.encryption.custom import CustomEncryption

log = logging.getLogger("runyard.runtime")


def webhook_guard(project: ProjectConfig, settings: Settings) -> WebhookGuard:
    """The webhook URL policy; `runyard dev` (and no other mode, whatever the store)
    allows loopback unless the config says."""
    config = project.webhooks
    dev = settings.dev_mode
    if dev and not config.loopback_written:
        log.info(
            "webhook_loopback_allowed reason=dev_mode "
            "hint=set webhooks.url.disable_loopback to true in langgraph.json to refuse it"
        )
    return WebhookGuard(config.policy(dev=dev))


def webhook_sender(
    settings: Settings,
    project: ProjectConfig,
    http: HttpConfig,
    guard: WebhookGuard,
    metrics: Metrics,
    autocommit: Sessions,
    instance_id: str,
    encryption: CustomEncryption | None,
) -> WebhookSender:
    """The sender of run webhooks, with its outbox owned by `instance_id`."""
    return WebhookSender(
        guard,
        DeliveryOptions(
            max_attempts=settings.webhook_max_attempts,
            headers=project.webhooks.headers,
            signing_key=signing_key(settings.webhook_secret) if settings.webhook_secret else None,
            allowed_fields=project.webhooks.allowed_fields,
            enabled=http.enabled("webhooks"),
            poll_interval=settings.postgres_poll_interval_seconds,
            max_concurrent=settings.webhook_max_concurrent,
            max_per_receiver=settings.webhook_max_per_receiver,
        ),
        metrics,
        sessions=autocommit,
        owner=instance_id,
        opener=encryption.open_webhook_payload if encryption else None,
    )
