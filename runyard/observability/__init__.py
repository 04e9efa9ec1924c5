"""Logging (and later metrics and tracing)."""
