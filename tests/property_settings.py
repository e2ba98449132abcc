"""How long the property tests run: a Hypothesis profile, chosen by ``CDC_LAKEHOUSE_HYPOTHESIS``.

- ``ci`` (the default; ``make test`` and CI run it): each property test runs the few examples
  it names with ``examples(n)``, derandomized (the same ones in every run) and without the
  example database, so the suite's time is bounded and a failure is reproduced by the next run.
- ``deep`` (``CDC_LAKEHOUSE_HYPOTHESIS=deep``, on demand): random examples, ``DEEP_FACTOR``
  times as many, kept in the example database; a bug hunt of an hour or more, never for CI.

Every property test uses these settings and names no derandomization or example count of its
own, so one variable steers them all.
"""

from __future__ import annotations

import os

from hypothesis import settings

PROFILE = os.environ.get("CDC_LAKEHOUSE_HYPOTHESIS", "ci")
DEEP_FACTOR = 25

settings.register_profile("ci", deadline=None, derandomize=True, database=None, print_blob=True)
settings.register_profile("deep", deadline=None, derandomize=False, print_blob=True)
if PROFILE not in ("ci", "deep"):
    raise ValueError(f"CDC_LAKEHOUSE_HYPOTHESIS={PROFILE!r}: the profiles are 'ci' and 'deep'")
settings.load_profile(PROFILE)


def examples(ci: int) -> int:
    """The examples a property test runs: ``ci`` in the bounded profile, more in the deep one."""
    return ci if PROFILE == "ci" else ci * DEEP_FACTOR
