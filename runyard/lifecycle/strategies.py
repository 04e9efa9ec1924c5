"""The multitask strategies' rules: what a new run does to its thread's active runs.

The one place that knows them. A new strategy is a member of MultitaskStrategy
(runyard/domain/status.py) and its rule here; creation (runyard/lifecycle/creation.py) and
stops (runyard/lifecycle/stops.py) read the rule, the API accepts every member.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from runyard.domain.status import CancelAction, MultitaskStrategy


@dataclass(frozen=True, slots=True)
class StrategyRule:
    """What a multitask strategy does to a new run's thread when runs are active on it:
    the stop it puts to them (None: it leaves them, and the new run waits its turn), or
    `refuses` the new run (409)."""

    stop: CancelAction | None = None
    refuses: bool = False


# The rule of each multitask strategy, the one place that knows them: a new strategy is a
# member of MultitaskStrategy and its rule here (tests/unit/test_lifecycle_strategies.py).
STRATEGY_RULES: Mapping[MultitaskStrategy, StrategyRule] = {
    MultitaskStrategy.REJECT: StrategyRule(refuses=True),
    MultitaskStrategy.ENQUEUE: StrategyRule(),
    MultitaskStrategy.INTERRUPT: StrategyRule(stop=CancelAction.INTERRUPT),
    MultitaskStrategy.ROLLBACK: StrategyRule(stop=CancelAction.ROLLBACK),
}


def strategy_stop(strategy: MultitaskStrategy) -> CancelAction | None:
    """The stop `strategy` puts to its thread's active runs (None: it stops none)."""
    return STRATEGY_RULES[strategy].stop


def accepting_strategies() -> str:
    """The strategies that accept a new run on a busy thread, for a 409's message:
    "'enqueue', 'interrupt' or 'rollback'"."""
    names = [f"'{name.value}'" for name, rule in STRATEGY_RULES.items() if not rule.refuses]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
