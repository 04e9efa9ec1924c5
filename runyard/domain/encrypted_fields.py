"""Which JSON of each resource a custom encryption's JSON handlers encrypt, and how.

The names are those of LangGraph's server (langgraph-api 0.16.7): a handler sees the
same `EncryptionContext(model=..., field=...)` on Runyard as there.
"""

from __future__ import annotations

# The JSON fields of each row encrypted as a whole (bar the keys the server reads).
THREAD_FIELDS = ("metadata", "config", "values", "interrupts", "error", "context")
ASSISTANT_FIELDS = ("metadata", "config", "context")
RUN_FIELDS = ("metadata", "output", "error")
CRON_FIELDS = ("metadata",)
# The entries of a run's kwargs and of a cron's payload that hold the caller's data, each
# encrypted on its own under its own name; the rest (stream modes, checkpoint, webhook,
# graph id, the stored context) are settings the server reads.
RUN_KWARGS_FIELDS = ("input", "config", "context", "command")
CRON_PAYLOAD_FIELDS = ("metadata", "context", "input", "config")
# Inside these fields each entry named is encrypted on its own too, under its own name (a
# config's `configurable`).
NESTED_FIELDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("run", "config"): ("configurable", "metadata"),
    ("cron", "config"): ("configurable", "metadata"),
    ("assistant", "config"): ("configurable",),
    ("thread", "config"): ("configurable",),
}
