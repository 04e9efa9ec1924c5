"""The run state machine: every transition of a thread's runs, and the one lock order they keep."""
