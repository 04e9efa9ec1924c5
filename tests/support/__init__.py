"""Helpers for tests: real server processes and throwaway databases."""
