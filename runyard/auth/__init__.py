"""Authentication and authorization through a LangGraph `Auth` object from langgraph.json."""
