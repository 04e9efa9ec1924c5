"""`python -m runyard.cli`: the `runyard` command."""

from runyard.cli import main

main()
