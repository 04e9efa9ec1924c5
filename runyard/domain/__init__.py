"""Pure domain code: statuses, transitions, errors. No I/O."""
