"""The composition root: the runtime (runtime.py), the transport it opens (transport.py) and the
builders of its phases, each taking the few parts it needs, never the runtime, and pushing what
it opens on the runtime's exit stack, so the runtime still unwinds it all."""
