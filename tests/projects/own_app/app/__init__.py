"""A user's own package named `app`, as most Python web projects name theirs."""
