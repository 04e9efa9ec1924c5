"""How many connections one server holds at once, fitted to its open-files limit."""

from __future__ import annotations

import logging
import time

logger = logging.getLogger("runyard.server")

# Open files kept beside the connections at most (pools, files, answering past the bound).
OPEN_FILES_RESERVE = 1024
# How often the refusals past the bound are logged (a count each time), at most.
REFUSALS_LOGGED_EVERY = 10.0


class ConnectionBound:
    """The most connections one server holds at once, fitted to the open-files limit.

    Each connection is a file descriptor. At start the server raises its soft RLIMIT_NOFILE
    toward the hard limit, as far as the bound and a reserve (database and Redis pools,
    files, answering connections past the bound) need; where the hard limit is lower, the
    bound is lowered to fit, and the log says so.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._refused = 0
        self._logged_at: float | None = None

    def fit_open_files(self) -> None:
        """Raise the soft open-files limit as far as the bound needs (never past the hard
        one), and lower the bound to what the limit allows; log both."""
        try:
            import resource
        except ImportError:  # not a POSIX system: nothing to fit
            return
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        raised, limit = open_files_plan(self.limit, soft, hard)
        if raised != soft:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            except (OSError, ValueError):
                raised, limit = open_files_plan(self.limit, soft, soft)
            else:
                logger.info("open_files_limit_raised soft=%d to=%d hard=%d", soft, raised, hard)
        if limit < self.limit:
            logger.warning(
                "connection_bound_lowered max_connections=%d configured=%d open_files=%d "
                "hint=raise the hard open-files limit (ulimit -Hn, LimitNOFILE, docker "
                "--ulimit nofile) or lower RUNYARD_MAX_CONNECTIONS",
                limit,
                self.limit,
                raised,
            )
            self.limit = limit

    def note_refusal(self, connections: int) -> None:
        """Count a connection refused past the bound; log the count now and then."""
        self._refused += 1
        now = time.monotonic()
        if self._logged_at is None or now - self._logged_at >= REFUSALS_LOGGED_EVERY:
            logger.warning(
                "connections_over_bound connections=%d max_connections=%d refused=%d",
                connections,
                self.limit,
                self._refused,
            )
            self._logged_at = now
            self._refused = 0


def open_files_plan(max_connections: int, soft: int, hard: int) -> tuple[int, int]:
    """(soft open-files limit to set, connection bound it allows) for a wanted bound and
    the current limits (`hard` may be RLIM_INFINITY, a negative number)."""
    wanted = max_connections + open_files_reserve(max_connections)
    ceiling = wanted if hard < 0 else min(wanted, hard)
    raised = max(soft, ceiling)
    return raised, max(1, min(max_connections, raised - open_files_reserve(raised)))


def open_files_reserve(files: int) -> int:
    """Descriptors kept beside the connections: a quarter of a small limit, at most 1024."""
    return max(16, min(OPEN_FILES_RESERVE, files // 4))
