"""Loops above services that every instance runs: crons, thread TTL sweeps, the reaper."""
