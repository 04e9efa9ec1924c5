"""The project: its `langgraph.json` and env, and the user code and UI bundles it names."""
