"""``python -m narad.cli``: the ``narad`` command."""

from __future__ import annotations

import sys

from narad.cli import main

sys.exit(main())
