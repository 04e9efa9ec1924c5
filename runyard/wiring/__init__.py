"""Builders of the runtime's phases: each takes the few parts it needs, never the runtime, and
pushes what it opens on the runtime's exit stack, so the runtime still unwinds it all."""
