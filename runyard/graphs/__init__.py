"""Running a graph: the registry, factories, context, the stream, state and tool-call records."""
