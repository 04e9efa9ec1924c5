"""Loading graphs from langgraph.json, the graph registry, checkpointers per dialect."""
