"""The connection bound and the open-files limit: the server raises its soft limit toward the
hard one as far as the bound needs, and lowers the bound where the hard limit is lower, with
a reserve of descriptors for everything else a server opens."""

from __future__ import annotations

import logging
import resource

import pytest

from runyard.app.connection_bound import ConnectionBound, open_files_plan
from runyard.app.server import DEFAULT_MAX_CONNECTIONS

INFINITY = resource.RLIM_INFINITY


@pytest.mark.parametrize(
    ("soft", "hard", "raised", "bound"),
    [
        # A usual Linux service: soft 1024, hard 524288 or more: raised, bound kept.
        (1024, 524_288, DEFAULT_MAX_CONNECTIONS + 1024, DEFAULT_MAX_CONNECTIONS),
        (1024, INFINITY, DEFAULT_MAX_CONNECTIONS + 1024, DEFAULT_MAX_CONNECTIONS),
        # Already enough: left as it is.
        (1_048_576, 1_048_576, 1_048_576, DEFAULT_MAX_CONNECTIONS),
        # A hard limit below the bound: raised to it, the bound lowered beneath it.
        (1024, 20_000, 20_000, 20_000 - 1024),
        # A small fixed limit still serves, with a quarter kept back.
        (1024, 1024, 1024, 768),
    ],
)
def test_the_soft_limit_is_raised_as_far_as_the_bound_needs(
    soft: int, hard: int, raised: int, bound: int
) -> None:
    assert open_files_plan(DEFAULT_MAX_CONNECTIONS, soft, hard) == (raised, bound)


def test_a_small_bound_asks_for_nothing(caplog: pytest.LogCaptureFixture) -> None:
    assert open_files_plan(6, 1024, 1024) == (1024, 6)
    caplog.set_level(logging.INFO, logger="runyard.app.server")
    bound = ConnectionBound(6)
    bound.fit_open_files()
    assert bound.limit == 6
    assert "connection_bound_lowered" not in caplog.text


def test_this_process_fits_its_bound_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    """On the machine the test runs on: the bound that results fits the limit now set."""
    caplog.set_level(logging.INFO, logger="runyard.app.server")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    bound = ConnectionBound(DEFAULT_MAX_CONNECTIONS)
    try:
        bound.fit_open_files()
        now, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        assert bound.limit < now
        if bound.limit < DEFAULT_MAX_CONNECTIONS:
            assert "connection_bound_lowered" in caplog.text
        if now != soft:
            assert f"open_files_limit_raised soft={soft} to={now}" in caplog.text
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
