"""A deterministic embedding for the semantic store tests: hashed letter trigrams, signed."""

from __future__ import annotations

import hashlib

DIMS = 16


def embed(texts: list[str]) -> list[list[float]]:
    """One vector per text; shared trigrams make texts close, no model needed."""
    vectors = []
    for text in texts:
        vector = [0.0] * DIMS
        padded = f"  {text.lower()} "
        for start in range(len(padded) - 2):
            digest = hashlib.sha256(padded[start : start + 3].encode()).digest()
            sign = 1.0 if digest[1] % 2 else -1.0
            vector[digest[0] % DIMS] += sign * (1 + digest[2] / 255)
        vectors.append(vector)
    return vectors


def unreachable(texts: list[str]) -> list[list[float]]:
    """An embedding whose service cannot be reached, as a provider with a bad key fails."""
    raise ConnectionRefusedError("the embedding service refused the connection")
