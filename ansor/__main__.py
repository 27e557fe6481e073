"""``python -m ansor``: the ``ansor`` command (``ansor.cli.main``), for an environment whose
scripts directory is not on PATH."""
import sys

from ansor.cli import main

sys.exit(main())
