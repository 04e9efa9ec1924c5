"""The sample deployed project's own package, named `app` as many projects name theirs."""
