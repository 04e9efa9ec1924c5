"""The operator console: its page (static files shipped in the package) and its JSON API."""
