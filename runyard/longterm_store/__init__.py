"""LangGraph's long-term store per backend, with its semantic search and its encryption."""
