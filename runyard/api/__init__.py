"""HTTP routes: parse, call a service, return a schema."""
