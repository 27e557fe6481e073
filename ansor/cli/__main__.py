"""``python -m ansor.cli``: the ``ansor`` command."""
import sys

from ansor.cli import main

sys.exit(main())
