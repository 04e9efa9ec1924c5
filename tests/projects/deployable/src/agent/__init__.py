"""A project shaped like LangGraph's `new-langgraph-project` template."""
