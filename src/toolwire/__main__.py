"""`python -m toolwire` = the `toolwire` command."""

from toolwire.cli import main

main()
