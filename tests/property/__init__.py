"""Property-based tests of the readers of user input (hypothesis).

Each reader of something a user hands the project (label files, per-domain corpora,
domain lists, ensemble labels, vocabulary and tokenization entries, configuration
files, the SavedModel's domain input) either accepts its input or raises
:class:`~ldr_opennmt.errors.UserError` with a one-line message: never another
exception type, never a hang.

The hypothesis profile is loaded here, before any test module of this folder: no
example database (nothing written under the repository, nothing replayed from an
earlier run) and a derandomized search, so that CI sees the same examples at every
run. ``LDR_HYPOTHESIS_PROFILE=ldr-deep`` searches further (random, more examples)
when hunting for bugs by hand; a failure it finds belongs in an ``@example``.
"""

import datetime
import os

from hypothesis import HealthCheck, Phase, settings

settings.register_profile(
    "ldr-ci",
    database=None,
    derandomize=True,
    max_examples=60,
    # Generous: the machine is shared, and TensorFlow's first calls are slow. A reader
    # that hangs on an input still fails the test once the example ends.
    deadline=datetime.timedelta(seconds=5),
    print_blob=False,
    suppress_health_check=[HealthCheck.too_slow],
    # No explain phase: its line tracing slows deep recursion (a configuration nested
    # too deeply) a hundredfold, past the deadline, and a failure would be reported as
    # flaky timings instead of itself.
    phases=[phase for phase in Phase if phase is not Phase.explain],
)
settings.register_profile(
    "ldr-deep",
    parent=settings.get_profile("ldr-ci"),
    derandomize=False,
    max_examples=1000,
)
settings.load_profile(os.environ.get("LDR_HYPOTHESIS_PROFILE", "ldr-ci"))
