"""Encryption at rest: AES-GCM key rings, checkpoint blobs and configured JSON keys."""
