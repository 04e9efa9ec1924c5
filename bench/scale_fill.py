"""Fill a migrated Runyard PostgreSQL database with realistic volumes by plain SQL.

The API is far too slow to create a million threads, so rows are generated inside the
database (INSERT ... SELECT generate_series). The shapes follow what a chat front end under
the documented auth pattern leaves behind: every thread's metadata holds the `owner` an auth
handler stamped, among `owners` users with a skewed share (a few heavy users, a long tail),
plus one user (`LONE_OWNER`) whose only thread is a year old.
"""

from __future__ import annotations

from dataclasses import dataclass

LONE_OWNER = "user-lonely"
# The skew: owner = floor(owners * random()^SKEW). With 5,000 owners, user-0 holds about 6%
# of the threads and user-1000 about 0.02% (a hundred threads of 500,000).
SKEW = 3
TYPICAL_OWNER = "user-1000"
HEAVY_OWNER = "user-0"


@dataclass(frozen=True)
class Volumes:
    """How many rows of each kind to generate."""

    threads: int
    owners: int = 5_000
    runs_per_thread: float = 1.0  # finished runs; a fraction spreads them over fewer threads
    pending_runs: int = 1_000
    assistants: int = 2_000
    crons: int = 2_000


_THREADS = """
INSERT INTO threads (thread_id, metadata, config, status, interrupts,
                     created_at, updated_at, state_updated_at)
SELECT md5('thread-' || g)::uuid::text,
       jsonb_build_object(
           'owner', 'user-' || floor(%(owners)s * power(random(), %(skew)s))::int,
           'graph_id', 'agent',
           'source', (ARRAY['web', 'mobile', 'api'])[1 + g %% 3]),
       '{}'::jsonb,
       CASE WHEN g %% 100 = 0 THEN 'busy' ELSE 'idle' END,
       '{}'::jsonb,
       t.created, least(now(), t.created + random() * interval '30 days'),
       least(now(), t.created + random() * interval '30 days')
FROM generate_series(1, %(threads)s) AS g,
     LATERAL (SELECT now() - interval '360 days' + g * (interval '359 days' / %(threads)s))
         AS t(created)
"""

_LONE_THREAD = """
INSERT INTO threads (thread_id, metadata, config, status, interrupts,
                     created_at, updated_at, state_updated_at)
VALUES (md5('lonely')::uuid::text, jsonb_build_object('owner', %(owner)s, 'graph_id', 'agent'),
        '{}'::jsonb, 'idle', '{}'::jsonb, now() - interval '364 days',
        now() - interval '364 days', now() - interval '364 days')
"""

# Finished runs, newest threads first; then a backlog of pending ones on other threads.
_RUNS = """
INSERT INTO runs (run_id, thread_id, assistant_id, status, metadata, kwargs, multitask_strategy,
                  created_at, updated_at, started_at, ended_at, attempt, temporary)
SELECT md5('run-' || g)::uuid::text,
       md5('thread-' || (%(threads)s - (g %% %(spread)s)))::uuid::text,
       'agent', (ARRAY['success', 'success', 'success', 'error', 'interrupted'])[1 + g %% 5],
       '{}'::jsonb, '{"input": {}}'::jsonb, 'reject',
       now() - g * interval '1 second', now() - g * interval '1 second',
       now() - g * interval '1 second', now() - g * interval '1 second', 1, false
FROM generate_series(1, %(runs)s) AS g
"""

_PENDING = """
INSERT INTO runs (run_id, thread_id, assistant_id, status, metadata, kwargs,
                  multitask_strategy, created_at, updated_at, attempt, temporary)
SELECT md5('pending-' || g)::uuid::text, md5('thread-' || g)::uuid::text,
       'agent', 'pending', '{}'::jsonb, '{"input": {}}'::jsonb, 'enqueue',
       now() - g * interval '1 millisecond', now() - g * interval '1 millisecond', 0, false
FROM generate_series(1, %(pending)s) AS g
"""

_ASSISTANTS = """
INSERT INTO assistants (assistant_id, graph_id, name, config, context, metadata, version)
SELECT md5('assistant-' || g)::uuid::text, 'agent', 'assistant ' || g, '{}'::jsonb,
       '{}'::jsonb,
       jsonb_build_object('owner', 'user-' || floor(%(owners)s * power(random(), %(skew)s))::int),
       1
FROM generate_series(1, %(assistants)s) AS g
"""

_CRONS = """
INSERT INTO crons (cron_id, assistant_id, user_id, schedule, payload, metadata, enabled,
                   next_run_date)
SELECT md5('cron-' || g)::uuid::text,
       md5('assistant-' || (1 + g %% %(assistants)s))::uuid::text,
       'user-' || g %% %(owners)s, '0 * * * *', '{}'::jsonb,
       jsonb_build_object('owner', 'user-' || floor(%(owners)s * power(random(), %(skew)s))::int),
       true, now() + (g %% 3600) * interval '1 second'
FROM generate_series(1, %(crons)s) AS g
"""


def fill_statements(volumes: Volumes) -> list[tuple[str, dict[str, object]]]:
    """The statements (psycopg `%(name)s` style) and parameters that fill the database."""
    finished = int(volumes.threads * volumes.runs_per_thread)
    spread = max(1, min(volumes.threads, finished))
    params: dict[str, object] = {
        "threads": volumes.threads,
        "owners": volumes.owners,
        "skew": SKEW,
        "owner": LONE_OWNER,
        "runs": finished,
        "spread": spread,
        "pending": min(volumes.pending_runs, volumes.threads),
        "assistants": volumes.assistants,
        "crons": volumes.crons,
    }
    statements = [_THREADS, _LONE_THREAD, _ASSISTANTS, _CRONS]
    if finished:
        statements.append(_RUNS)
    if params["pending"]:
        statements.append(_PENDING)
    return [(statement, params) for statement in statements]
