"""Hypothesis settings for mutation runs (scripts/mutation exports
``HYPOTHESIS_PROFILE=mutation``): a killed mutant only needs its first failing
example, so failures are not shrunk (shrinking is most of the time a failing
property takes) and nothing is written to the example database. The tests'
own ``@settings`` (example counts, derandomize) still apply."""

from __future__ import annotations

import os

from hypothesis import Phase, settings

settings.register_profile(
    "mutation", phases=(Phase.explicit, Phase.reuse, Phase.generate), database=None,
    print_blob=False,
)
if os.environ.get("HYPOTHESIS_PROFILE") == "mutation":
    settings.load_profile("mutation")
