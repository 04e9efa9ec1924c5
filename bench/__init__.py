"""Benchmarks that speak only HTTP to an Agent Protocol server and print figures as JSON lines."""
