"""`python -m hostir ...`: the `hostir` command."""
import sys

from .cli import main

sys.exit(main())
