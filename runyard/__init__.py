"""Runyard: a self-hosted agent server for LangGraph graphs over the Agent Protocol."""

__version__ = "0.1.0"
