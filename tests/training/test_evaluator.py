"""The per-domain evaluator (``--with_eval``) says what each evaluation does and how long it
takes (issue 47 item 5: it decoded every dev sentence in silence). The evaluation itself,
end to end: tests/training/test_runner.py."""

import os
import types

import tensorflow as tf

from ldr_opennmt.training import evaluator
from tests import corpus
from tests.evaluation.common import logged


class EvaluatorLogTest(tf.test.TestCase):
    def test_each_domain_says_what_is_done_and_how_long_it_took(self):
        directory = self.get_temp_dir()
        sets = []
        for domain, count in (("medical", 3), ("law", 2)):
            path = corpus.write_lines(os.path.join(directory, "dev.%s.fr" % domain), ["x"] * count)
            sets.append((domain, path, None))
        recorded = []
        fake = types.SimpleNamespace(
            per_domain=True,
            _domain_sets=sets,
            saves_predictions=False,
            scorers=[],
            evaluate_dataset=lambda dataset, output_path: (2.0, 1.0, {}),
            record=lambda step, results: recorded.append(results),
        )
        with logged() as messages:
            evaluator.MultiDomainEvaluator.__call__(fake, 7)
        said = [m for m in messages if m.startswith(("Evaluating domain", "Evaluation of domain"))]
        self.assertEqual(
            said[::2],
            [
                "Evaluating domain medical at step 7: 3 dev sentences, the loss only (no"
                " scorers: nothing translated)",
                "Evaluating domain law at step 7: 2 dev sentences, the loss only (no scorers:"
                " nothing translated)",
            ],
        )
        for line, domain in zip(said[1::2], ("medical", "law")):
            self.assertRegex(line, r"^Evaluation of domain %s at step 7 took \d+\.\d s$" % domain)
        self.assertAlmostEqual(recorded[0]["medical/loss"], 2.0)

    def test_with_scorers_it_says_that_it_translates(self):
        path = corpus.write_lines(os.path.join(self.get_temp_dir(), "dev.fr"), ["a", "b"])
        self.assertEqual(
            evaluator._what_is_done(path, ["bleu", "chrf"]),
            "2 dev sentences, translated with beam search for bleu, chrf",
        )


if __name__ == "__main__":
    tf.test.main()
