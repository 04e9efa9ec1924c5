"""The entry points: the ASGI application (factory.py) and the uvicorn server (server.py)."""
