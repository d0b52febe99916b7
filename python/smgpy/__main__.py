"""``python -m smgpy serve ...``: the same as the ``smgpy`` script."""

import sys

from smgpy.cli import main

sys.exit(main())
