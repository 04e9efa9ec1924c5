"""A project laid out as a package, declared by module paths (`platform_agent.graphs:who`)."""
