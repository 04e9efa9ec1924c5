"""LangGraph checkpoint savers: PostgreSQL in the library's tables, SQLite in dev mode."""
