"""The run's context, as the template declares it: a dataclass whose fields have defaults."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(kw_only=True)
class Context:
    """What a run may configure; a run that sends no context gets these defaults."""

    system_prompt: str = field(
        default="You are a helpful AI assistant.",
        metadata={"description": "The system prompt of the agent's interactions."},
    )
    model: str = field(
        default="anthropic/claude-sonnet-4-5-20250929",
        metadata={"description": "The name of the language model, as provider/model-name."},
    )
    user_id: str = field(default="default-user", metadata={"description": "Whose memories."})
