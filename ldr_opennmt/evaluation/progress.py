"""What ``ldr-eval`` says while it translates: a progress bar per system and label mode, and
the translations that stopped at ``maximum_decoding_length`` counted per system, mode and
domain.

A system's label modes are translated in one inference run (one model load): its input is
the test set (every domain's sentences, in domain order) repeated once per mode.
:class:`TranslationProgress` is the listener that run calls after each translation, in input
order (``Runner.infer``'s ``listener``), so it knows the mode and the domain of each.
Where standard error is not a terminal (a log file, a pipeline, CI), the bars are off and one
line is written when a system's mode starts and one when it ends, with its time.
"""

import collections
import sys
import time

import tensorflow as tf
from tqdm import tqdm


class TranslationProgress:
    """Progress bars (tqdm, on stderr when it is a terminal) and stopped-translation counts
    of one system's inference run over :obj:`modes` x the test set.

    Args:
      system: The system's name.
      modes: The label modes, in the order the run translates them.
      counts: ``{domain: test sentences}``, in the order of the test set.
      disable: tqdm's ``disable`` (``None``: only on a terminal).
      log: Where the lines written instead of a disabled bar go (default: standard error).
    """

    def __init__(self, system, modes, counts, disable=None, log=None):
        self.system = system
        self.modes = list(modes)
        self.counts = collections.OrderedDict(counts)
        self.total = sum(self.counts.values())
        self.disable = disable
        self.index = 0
        self.limit = None
        #: ``{(mode, domain): translations that stopped at the limit}``.
        self.stopped = collections.Counter()
        self._bar = None
        self._log = log
        self._started = None
        self._mode = None
        self._done = 0
        self._domain_ends = []
        end = 0
        for domain, count in self.counts.items():
            end += count
            self._domain_ends.append((end, domain))

    def where(self, index):
        """The ``(mode, domain)`` of the run's :obj:`index`-th translation."""
        mode = self.modes[index // self.total]
        position = index % self.total
        domain = next(d for end, d in self._domain_ends if position < end)
        return mode, domain

    def __call__(self, stopped, limit):
        if self.index >= self.total * len(self.modes):
            return  # More translations than inputs: the caller refuses the run.
        mode, domain = self.where(self.index)
        if self.index % self.total == 0:
            self._close()
            self._bar = tqdm(
                total=self.total,
                desc="%s (%s)" % (self.system, mode),
                unit="sentence",
                disable=self.disable,
            )
            self._mode = mode
            self._started = time.monotonic()
            self._done = 0
            if self._lines():
                self._say("%s (%s): translating %d sentences" % (self.system, mode, self.total))
        self._bar.update(1)
        self._done += 1
        self.limit = limit
        if stopped:
            self.stopped[(mode, domain)] += 1
        self.index += 1

    def _lines(self):
        """Whether lines replace the bar: tqdm left it off (``disable=None``: not a
        terminal); an explicit ``disable=True`` is quiet."""
        return self.disable is None and self._bar.disable

    def _say(self, line):
        line = "[eval] " + line
        if self._log is not None:
            self._log(line)
        else:
            print(line, file=sys.stderr, flush=True)

    def _close(self):
        if self._bar is not None:
            if self._lines():
                self._say(
                    "%s (%s): %d sentences translated in %.1f s"
                    % (self.system, self._mode, self._done, time.monotonic() - self._started)
                )
            self._bar.close()
            self._bar = None

    def report(self):
        """Closes the last bar; one warning line per system, mode and domain whose
        translations stopped at ``maximum_decoding_length``. Returns those lines."""
        self._close()
        lines = []
        for mode in self.modes:
            for domain, count in self.counts.items():
                stopped = self.stopped[(mode, domain)]
                if not stopped:
                    continue
                lines.append(
                    "system %s, mode %s, domain %s: %d of %d translations stopped at"
                    " maximum_decoding_length (%d): they may be cut short (raise params:"
                    " maximum_decoding_length)"
                    % (self.system, mode, domain, stopped, count, self.limit)
                )
        for line in lines:
            tf.get_logger().warning(line)
        return lines
