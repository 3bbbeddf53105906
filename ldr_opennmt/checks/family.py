"""``ldr-main check-family NAME``: does a family keep the extension contract?

A family written from outside the package (``docs/adding-a-method.md``) gets the domain
scope, Procedure 1 and the other training modes, ensembles of domain views, the exports and
the checkpoint checks only if its layers follow the protocol. This check builds the family
tiny, on data it generates (:mod:`ldr_opennmt.checks.data`), trains it a few steps in each
training mode it declares, and says, one line per check, ``pass``, ``fail`` or ``skip`` and
why:

* ``build``: it builds, initializes (every domain layer has its region count) and creates
  its variables;
* ``outputs``: what OpenNMT-tf reads from the model has the shapes it needs: the training
  logits are floats of ``[batch, target length, target vocabulary size]`` (the size
  OpenNMT-tf gives the target vocabulary, its special tokens and ``<unk>`` included), the
  logits of each step of a beam search are as wide, the predictions have ``tokens``,
  ``length`` and ``log_probs``, and each word embedding has a row per vocabulary entry;
* ``dropout``: the builder passes its ``dropout`` argument on: built with ``dropout=0`` (as
  every check builds it) two training passes give the same loss, built with ``dropout=0.5``
  they do not;
* ``label``: the domain id reaches the layers: the label changes the translation's scores
  when the family says labels are needed, and changes nothing when it says they are not;
* ``generic``: the ``generic`` label and a domain absent from the batch give no gradient to
  any domain weight, and no variable is moved by the label without being filed as a domain
  weight (which Procedure 1 would never train);
* ``mode M``, for each mode the family declares: the gradients go where the mode says
  (shared and domain weights each from the true-label pass, the generic pass or both), and a
  few optimizer steps (a batch of one domain, then a ``generic`` batch) leave the absent
  domain's and, at the ``generic`` step, every domain's weights bit-identical;
* ``ensembles``: an ensemble of domain views translates differently from each single view,
  when the family claims ensembles;
* ``savedmodel``: the SavedModel has a ``domain`` input and translates as the model does;
* ``ctranslate2``: the CTranslate2 fold translates as the SavedModel, greedily, when the
  family folds; otherwise the export is refused in one line that names the remedy;
* ``checkpoint``: the checkpoint check accepts the family's own checkpoint and refuses
  another family's.

The modes come from the family's declaration (``domain_training_modes``), so a mode the
package adds later is checked too; the routing of a mode this check has no expectation for,
or of every mode when two training passes differ (the ``dropout`` check says why), is
skipped, its training invariants still checked.
"""

import contextlib
import dataclasses
import os
import time

import ctranslate2
import numpy as np
import opennmt
import tensorflow as tf

from ldr_opennmt import domains as domains_lib
from ldr_opennmt import ensembles, probe, registry
from ldr_opennmt.checkpoints import check_model_checkpoint, model_checkpoint_keys
from ldr_opennmt.checks import data
from ldr_opennmt.checks import outputs as outputs_lib
from ldr_opennmt.errors import UserError
from ldr_opennmt.export import ct2_export
from ldr_opennmt.models import procedure, ttm

PASS, FAIL, SKIP = "pass", "fail", "skip"
#: The checks, in the order they run (``modes``: one line per declared mode).
CHECKS = (
    "build",
    "outputs",
    "dropout",
    "label",
    "ensembles",
    "generic",
    "modes",
    "savedmodel",
    "ctranslate2",
    "checkpoint",
)
#: The greedy translations' length limit (tiny models translate the sentences in full).
MAX_LENGTH = 6
#: Training steps per mode on a batch of one domain (then one ``generic`` step).
STEPS = 2
#: Gradients computed two ways agree to this tolerance (float32 sums in another order).
ATOL, RTOL = 1e-6, 1e-4
#: The beam of the ``outputs`` check's beam search (the other checks decode greedily).
BEAM_WIDTH = 2
#: The dropout of the second model of the ``dropout`` check (the checks' model has none).
DROPOUT = 0.5


@dataclasses.dataclass(frozen=True)
class Result:
    """One check: its name, ``pass``/``fail``/``skip`` and why, in one line."""

    name: str
    status: str
    why: str
    seconds: float = 0.0

    def line(self):
        return "%-4s  %s: %s (%.1f s)" % (
            self.status,
            self.name,
            " ".join(str(self.why).split()),
            self.seconds,
        )


class _Stop(Exception):
    """A check whose failure makes the following ones meaningless."""


def _one_line(error):
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def _expected_coefficients(mode, model):
    """``{"shared": (a, b), "domain": (a, b)}``: each gradient is ``a`` times the
    true-label pass's plus ``b`` times the generic pass's, or ``None`` when this check
    knows no expectation for :obj:`mode`."""
    if mode == procedure.SUMMED:
        domain_weight, generic_weights = procedure.summed_weights(
            model.params, list(model.domains or [])
        )
        if len(set(generic_weights)) != 1:
            return None  # Per-sentence weights: not this check's fixed coefficients.
        both = (domain_weight, generic_weights[0])
        return {"shared": both, "domain": both}
    return {
        procedure.JOINT: {"shared": (1, 0), "domain": (1, 0)},
        procedure.GENERAL: {"shared": (0, 1), "domain": (0, 1)},
        procedure.DOMAINS: {"shared": (0, 0), "domain": (1, 0)},
        procedure.PROCEDURE1: {"shared": (0, 1), "domain": (1, 0)},
    }.get(mode)


class FamilyCheck:
    """Checks one registered family (see the module docstring).

    Args:
      family: A :class:`ldr_opennmt.registry.Family`.
      work_dir: An empty directory for the generated data, exports and checkpoints.
      seed: The seed of the random weights.
      skip: Names of checks not to run (:data:`CHECKS`; e.g. ``savedmodel``, the slowest).
    """

    def __init__(self, family, work_dir, seed=1, skip=()):
        unknown = sorted(set(skip) - set(CHECKS) - {"build"})
        if unknown:
            raise UserError(
                "unknown check %s (the checks: %s)" % (unknown[0], ", ".join(CHECKS[1:]))
            )
        self.family = family
        self.work_dir = work_dir
        self.seed = seed
        self.skip = set(skip)
        self.exported = None
        self.translations = {}
        self.references = None
        self.model = None
        self.caps = None
        self.random_training = None
        self.stopped = None

    def run(self, report=None):
        """Runs every check in order.

        Args:
          report: Called with each :class:`Result` as soon as it is known.

        Returns:
          The list of :class:`Result`.
        """
        results = []
        clock = [time.time()]

        def _add(result):
            now = time.time()
            result = dataclasses.replace(result, seconds=now - clock[0])
            clock[0] = now
            results.append(result)
            if report is not None:
                report(result)

        self.stopped = None
        for name in CHECKS:
            if name in self.skip:
                _add(Result(name, SKIP, "not asked for"))
                continue
            if self.stopped is not None:
                _add(Result(name, SKIP, "not checked: %s failed" % self.stopped))
                continue
            for result in self._step(name):
                _add(result)
        return results

    def rerun(self, name):
        """Runs the check :obj:`name` again, on the model that :meth:`run` built (a test
        changes that model between runs rather than building one per defect).

        Returns:
          The list of :class:`Result`.
        """
        return list(self._step(name))

    def _step(self, name):
        """The results of the check :obj:`name`: its own, or one ``fail`` naming what it
        raised (a failure of ``build`` sets :attr:`stopped`)."""
        try:
            yield from getattr(self, "_" + name)()
        except _Stop as e:
            yield Result(name, FAIL, str(e))
            self.stopped = name
        except UserError as e:
            yield Result(name, FAIL, _one_line(e))
        except Exception as e:  # noqa: BLE001 - a family's failure is a check's result.
            yield Result(name, FAIL, "%s: %s" % (type(e).__name__, _one_line(e)))

    # -- building and data ------------------------------------------------------------

    def _new_model(self, family=None, paths=None, sizes=None, create_variables=True):
        family = family or self.family
        model = family.builder(**sizes) if sizes else family.build_tiny()
        params = {
            "beam_width": 1,
            "maximum_decoding_length": MAX_LENGTH,
            "optimizer": "Adam",
            "learning_rate": 0.01,
        }
        model.initialize(data.data_config(paths or self.paths), params=params)
        if create_variables:
            model.create_variables()
        return model

    def _build(self):
        tiny = self.family.build_tiny()
        tokens = []
        if isinstance(getattr(type(tiny), "domain_tokens", None), property):
            tokens = ttm.domain_tokens(data.DOMAINS)  # Its targets start with them.
        self.paths = data.write_corpus(os.path.join(self.work_dir, "data"), 8, tokens)
        try:
            self.model = self._new_model()
        except Exception as e:  # noqa: BLE001
            raise _Stop("%s: %s" % (type(e).__name__, _one_line(e))) from e
        model = self.model
        self.caps = probe.model_capabilities(model)
        self.domain_refs = {v.ref() for v in model.domain_variables()}
        rng = np.random.RandomState(self.seed)
        for variable in model.weights:
            scale = 1.0 if variable.ref() in self.domain_refs else 0.3
            variable.assign(rng.normal(scale=scale, size=variable.shape).astype(np.float32))
        self.initial = [v.numpy() for v in model.weights]
        self.sources = [line.split() for line in _read(self.paths["src"])[:4]]
        dataset = model.examples_inputter.make_training_dataset(
            [self.paths["src"], self.paths["domain"]],
            self.paths["tgt"],
            batch_size=6,
            shuffle_buffer_size=1,
            single_pass=True,
        )
        self.features, self.labels = next(iter(dataset))  # Sentences of d0 only.
        yield Result(
            "build",
            PASS,
            "%s: %d weights, %d of them domain weights in %d regions"
            % (
                type(model).__name__,
                len(model.weights),
                len(self.domain_refs),
                model.domain_regions(),
            ),
        )

    def _restore_initial(self):
        for variable, value in zip(self.model.weights, self.initial):
            variable.assign(value)

    def _with_domain(self, domain_id, features=None):
        features = dict(self.features if features is None else features)
        features["domain"] = tf.fill(tf.shape(features["domain"]), tf.constant(domain_id))
        return features

    def _source_features(self, label, sources=None):
        sources = sources or self.sources
        length = max(len(s) for s in sources)
        features = {
            "tokens": tf.constant([s + [""] * (length - len(s)) for s in sources]),
            "length": tf.constant([len(s) for s in sources], tf.int32),
            "domain": tf.constant([label] * len(sources)),
        }
        return self.model.features_inputter.make_features(features=features)

    def _infer(self, label):
        """(tokens, log-probabilities) of the greedy translations of the sources with
        :obj:`label`, by the model at its initial weights (cached)."""
        if label not in self.translations:
            outputs = self.model.infer(self._source_features(label))
            self.translations[label] = (
                _hypotheses(outputs["tokens"], outputs["length"]),
                outputs["log_probs"].numpy(),
            )
        return self.translations[label]

    # -- outputs ----------------------------------------------------------------------

    def _outputs(self):
        model = self.model
        size = model.labels_inputter.vocabulary_size
        problems = []
        # Training (teacher forcing): OpenNMT-tf's compute_loss reads outputs["logits"] (or
        # the outputs themselves when they are not a dict), one row per target position.
        outputs, _ = model(self.features, self.labels, training=True)
        logits = outputs.get("logits") if isinstance(outputs, dict) else outputs
        batch, length = self.labels["ids_out"].shape.as_list()
        if logits is None:
            problems.append("its training outputs have no logits (compute_loss reads them)")
        else:
            problems += outputs_lib.logits_problems(
                "the training logits", logits, size, batch, length
            )
        # A beam search (no other check runs one): the logits of each step (the decoder
        # called on one position), then the predictions.
        widths = []
        with _params(model, beam_width=BEAM_WIDTH), outputs_lib.step_logits(model, widths):
            predictions = model.infer(self._source_features("d0"))
        step = [w for w in widths if w != size]
        if step:
            problems.append(
                "the logits of a beam search step have %s entries where the target vocabulary "
                "has %d" % (step[0], size)
            )
        problems += outputs_lib.predictions_problems(predictions, len(self.sources))
        problems += outputs_lib.embedding_problems(model)
        if problems:
            yield Result("outputs", FAIL, "; ".join(problems))
            return
        yield Result(
            "outputs",
            PASS,
            "training logits %s (target vocabulary %d), %s; predictions %s; embeddings of "
            "the vocabulary sizes"
            % (
                logits.shape.as_list(),
                size,
                (
                    "as wide at each step of a beam search of %d" % BEAM_WIDTH
                    if widths
                    else "the beam search's steps not seen (no decoder.call)"
                ),
                ", ".join(key for key, _, _ in outputs_lib.PREDICTIONS),
            ),
        )

    # -- dropout ----------------------------------------------------------------------

    # Why a check of its own. The routing of each mode (_routing) compares the mode's
    # gradients with those of the true-label and generic passes, recomputed, to 1e-6: it
    # holds only if two training passes at the same weights give the same output. Every
    # check builds the family with dropout=0 (registry.TINY_SIZES), the only way this check
    # has to turn dropout off: the rates live in the family's layers, under names it
    # chooses, so zeroing them here would rely on guesses and hide the defect. A training
    # pass that is random all the same means the builder ignores its dropout argument (or
    # a layer trains with another random op). That is reported here, by name, and the
    # modes then leave their routing unchecked instead of blaming the gradients for noise.
    def _training_is_random(self):
        """Whether two training passes at the same weights give different losses
        (cached)."""
        if self.random_training is None:
            first, second = (
                float(self.model.compute_training_loss(self.features, self.labels)[0])
                for _ in range(2)
            )
            self.random_training = not np.isclose(first, second, atol=ATOL, rtol=RTOL)
        return self.random_training

    def _dropout(self):
        asked = _tiny_sizes(self.family).get("dropout")
        if asked:
            yield Result("dropout", SKIP, "its tiny model has dropout %s (tiny=)" % asked)
            return
        if self._training_is_random():
            rates = outputs_lib.dropout_rates(self.model)
            yield Result(
                "dropout",
                FAIL,
                "built with dropout=0, two training passes at the same weights give different "
                "losses: %s"
                % (
                    "its layers keep dropout (%s): the builder does not pass its dropout "
                    "argument on" % rates
                    if rates
                    else "a random op in training? (the gradient checks need dropout=0 to "
                    "make training deterministic)"
                ),
            )
            return
        sizes = dict(_tiny_sizes(self.family), dropout=DROPOUT)
        noisy = self._new_model(sizes=sizes, create_variables=False)
        first, second = (
            float(noisy.compute_training_loss(self.features, self.labels)[0]) for _ in range(2)
        )
        if np.isclose(first, second, atol=ATOL, rtol=RTOL):
            yield Result(
                "dropout",
                FAIL,
                "built with dropout=%s, two training passes give the same loss: the builder "
                "ignores its dropout argument (training would never drop out)" % DROPOUT,
            )
            return
        yield Result(
            "dropout",
            PASS,
            "training is deterministic with dropout=0 and random with dropout=%s" % DROPOUT,
        )

    # -- label ------------------------------------------------------------------------

    def _label(self):
        scores = {label: self._infer(label) for label in ("d0", "d1", "generic")}
        differs = lambda a, b: not np.allclose(scores[a][1], scores[b][1], atol=1e-5)  # noqa
        if self.caps.labels == probe.LABEL_NEEDED:
            same = [pair for pair in (("d0", "d1"), ("d0", "generic")) if not differs(*pair)]
            if same:
                yield Result(
                    "label",
                    FAIL,
                    "the family needs labels, but %s and %s give the same scores: its layers "
                    "do not read the domain (current_domain() / domain_one_hot() inside call)"
                    % same[0],
                )
            else:
                yield Result("label", PASS, "d0, d1 and generic give different scores")
        elif differs("d0", "d1") or differs("d0", "generic"):
            yield Result(
                "label",
                FAIL,
                "the family says labels are %s, but the label changes the scores"
                % self.caps.labels,
            )
        else:
            yield Result("label", PASS, "labels %s: every label gives the same scores"
                         % self.caps.labels)  # fmt: skip

    # -- gradients --------------------------------------------------------------------

    def _gradients(self, features, step=None):
        model = self.model
        with tf.GradientTape() as tape:
            loss, size = model.compute_training_loss(features, self.labels, step=step)
            if size is not None:
                loss = loss / tf.cast(size, loss.dtype)
        gradients = tape.gradient(loss, model.trainable_weights)
        return [
            np.zeros(v.shape, np.float32) if g is None else tf.convert_to_tensor(g).numpy()
            for g, v in zip(gradients, model.trainable_weights)
        ]

    def _region_refs(self, region):
        return {v.ref() for v in self.model.domain_weights().get(region, [])}

    def _generic(self):
        if self.caps.labels != probe.LABEL_NEEDED:
            yield Result("generic", SKIP, "its translation reads no label (labels %s)"
                         % self.caps.labels)  # fmt: skip
            return
        model = self.model
        self.true_gradients = self._gradients(self._with_domain(0))
        self.generic_gradients = self._gradients(self._with_domain(domains_lib.GENERIC_ID))
        weights = model.trainable_weights
        problems = []
        for variable, g_true, g_generic in zip(
            weights, self.true_gradients, self.generic_gradients
        ):
            declared = variable.ref() in self.domain_refs
            if declared and np.any(g_generic != 0):
                problems.append("generic gives %s a gradient" % variable.name)
            elif declared and variable.ref() in self._region_refs(1) and np.any(g_true != 0):
                problems.append("a batch of d0 gives %s (region 1) a gradient" % variable.name)
            elif not declared and not np.any(g_generic != 0) and np.any(g_true != 0):
                problems.append(
                    "%s is moved by the label but not filed as a domain weight "
                    "(add_domain_weight, DomainCopies.add_copies): Procedure 1 never trains it"
                    % variable.name
                )
        if problems:
            yield Result("generic", FAIL, problems[0])
        elif not self.domain_refs:
            yield Result("generic", PASS, "no domain weights, and no variable moved by the label")
        else:
            yield Result(
                "generic",
                PASS,
                "generic and an absent domain give no domain weight a gradient; every "
                "label-specific variable is a declared domain weight",
            )

    def _modes(self):
        try:
            for mode in self.model.domain_training_modes:
                yield self._mode(mode)
        finally:
            self._restore_initial()  # The translations of the later checks are cached.
            self.model.params["domain_training"] = self.model.default_domain_training

    def _mode(self, mode):
        name = "mode %s" % mode
        model = self.model
        self._restore_initial()
        model.params["domain_training"] = mode
        optimizer = model.get_optimizer()
        if self.caps.requires_base:
            # Trained on a base (finetune: base): the random weights play the base, and
            # the training continues from its step.
            optimizer.iterations.assign(1)
        try:
            # A batch of d0 and d1 sentences (the first half d0), for the routing.
            half = tf.shape(self.features["domain"])[0] // 2
            mixed = dict(self.features)
            mixed["domain"] = tf.cast(tf.range(tf.shape(mixed["domain"])[0]) >= half, tf.int32)
            _, gradients = model.compute_gradients(mixed, self.labels, optimizer)
        except ValueError as e:
            if not self.domain_refs and "needs domain-specific parameters" in str(e):
                return Result(name, SKIP, "needs domain weights, which the family has none of")
            raise
        why = []
        expected = _expected_coefficients(mode, model)
        if expected is None:
            why.append("routing not checked (no expectation for this mode)")
        elif self._training_is_random():
            # Noise, not routing, would make the gradients differ (see the dropout check).
            why.append(
                "routing not checked: two training passes at the same weights differ "
                "(the dropout check says why)"
            )
        else:
            problem = self._routing(mixed, gradients, expected, optimizer.iterations)
            if problem:
                return Result(name, FAIL, problem)
            why.append("gradients routed as the mode says")
        problem = self._train(optimizer, mode)
        if problem:
            return Result(name, FAIL, problem)
        why.append("%d steps on d0, one on generic: d1's weights untouched" % STEPS)
        return Result(name, PASS, "; ".join(why))

    def _routing(self, mixed, gradients, expected, step):
        if self.references is None:  # At the initial weights and step, for every mode.
            self.references = (
                self._gradients(mixed, step),
                self._gradients(self._with_domain(domains_lib.GENERIC_ID, mixed), step),
            )
        g_true, g_generic = self.references
        for variable, got, t, g in zip(self.model.trainable_weights, gradients, g_true, g_generic):
            kind = "domain" if variable.ref() in self.domain_refs else "shared"
            a, b = expected[kind]
            want = a * t + b * g
            got = tf.convert_to_tensor(got).numpy()
            if not np.allclose(got, want, atol=ATOL, rtol=RTOL):
                return (
                    "%s variable %s: its gradient is not %s x the true-label pass's + %s x the "
                    "generic pass's (largest difference %.3g)"
                    % (kind, variable.name, a, b, np.abs(got - want).max())
                )
        return None

    def _train(self, optimizer, mode):
        model = self.model
        variables = model.trainable_weights
        before = [v.numpy() for v in variables]
        d0_batch = self._with_domain(0)
        for _ in range(STEPS):
            loss, gradients = model.compute_gradients(d0_batch, self.labels, optimizer)
            if not np.isfinite(float(loss)):
                return "the loss is %s" % float(loss)
            optimizer.apply_gradients(zip(gradients, variables))
        at_generic = [v.numpy() for v in variables]
        generic_batch = self._with_domain(domains_lib.GENERIC_ID)
        _, gradients = model.compute_gradients(generic_batch, self.labels, optimizer)
        optimizer.apply_gradients(zip(gradients, variables))
        after = [v.numpy() for v in variables]
        region1 = self._region_refs(1)
        for variable, start, middle, end in zip(variables, before, at_generic, after):
            if variable.ref() in region1 and not np.array_equal(start, end):
                return "%s (domain d1, absent from every step) moved" % variable.name
            if variable.ref() in self.domain_refs and not np.array_equal(middle, end):
                return "%s (a domain weight) moved at the generic step" % variable.name
        expected = _expected_coefficients(mode, model)
        for kind, (a, b) in (expected or {}).items():
            # A domain weight moves with the true-label pass (the generic one gives it
            # nothing); a shared weight with either pass.
            should_move = a != 0 if kind == "domain" else (a != 0 or b != 0)
            pairs = [
                (start, middle)
                for v, start, middle in zip(variables, before, at_generic)
                if (v.ref() in self.domain_refs) == (kind == "domain")
            ]
            moved = any(not np.array_equal(start, middle) for start, middle in pairs)
            if pairs and moved != should_move:
                return "%s weights %s in this mode" % (
                    kind,
                    "moved although the mode freezes them" if moved else "never moved",
                )
        return None

    # -- translation ------------------------------------------------------------------

    def _ensembles(self):
        if self.caps.ensembles is not None:
            yield Result("ensembles", SKIP, "not claimed: %s" % self.caps.ensembles)
            return
        label = ensembles.format_label([0.5, 0.5], list(data.DOMAINS))
        mixture = self._infer(label)[1]
        views = {d: self._infer(d)[1] for d in data.DOMAINS}
        same = [d for d, scores in views.items() if np.allclose(scores, mixture, atol=1e-5)]
        if same:
            yield Result(
                "ensembles", FAIL, "%s translates as the single view %s" % (label, same[0])
            )
        else:
            yield Result("ensembles", PASS, "%s differs from each single view" % label)

    def _savedmodel(self):
        export_dir = os.path.join(self.work_dir, "savedmodel")
        self.model.export(export_dir)
        signature = tf.saved_model.load(export_dir).signatures["serving_default"]
        takes_domain = "domain" in signature.structured_input_signature[1]
        # A family whose translation reads no label (labels for training only) serves
        # without a domain input; every other one needs it.
        if not takes_domain and self.caps.labels != probe.LABEL_NONE:
            yield Result("savedmodel", FAIL, "its serving signature has no domain input")
            return
        length = max(len(s) for s in self.sources)
        self.exported = {}
        for label in ("d0", "d1", "generic"):
            inputs = {
                "tokens": tf.constant([s + [""] * (length - len(s)) for s in self.sources]),
                "length": tf.constant([len(s) for s in self.sources], tf.int32),
            }
            if takes_domain:
                inputs["domain"] = tf.constant([label] * len(self.sources))
            outputs = signature(**inputs)
            tokens = _hypotheses(outputs["tokens"], outputs["length"])
            self.exported[label] = tokens
            if tokens != self._infer(label)[0]:
                yield Result(
                    "savedmodel", FAIL, "with label %s it translates unlike the model" % label
                )
                return
        yield Result(
            "savedmodel",
            PASS,
            (
                "domain input; translates d0, d1, generic as the model"
                if takes_domain
                else "no domain input (its translation reads no label); translates as the model"
            ),
        )

    def _ctranslate2(self):
        output_dir = os.path.join(self.work_dir, "ctranslate2")
        if self.caps.ctranslate2 is not None:
            try:
                ct2_export.export(self.model, output_dir)
            except UserError as e:
                message = str(e)
                if "\n" in message.strip() or not any(
                    remedy in message for remedy in ("SavedModel", "fold(")
                ):
                    yield Result("ctranslate2", FAIL, "refused without a remedy in one line")
                else:
                    yield Result("ctranslate2", PASS, "refused in one line: %s" % message)
                return
            yield Result("ctranslate2", FAIL, "said not to fold, but the export succeeded")
            return
        # Against the SavedModel's translations, else (not asked for) the model's own.
        expected_tokens = self.exported or {
            label: self._infer(label)[0] for label in ("d0", "d1", "generic")
        }
        against = "the SavedModel" if self.exported else "the model"
        ct2_export.export(self.model, output_dir, domains=list(expected_tokens))
        for domain, expected in expected_tokens.items():
            translator = ctranslate2.Translator(
                os.path.join(output_dir, domain), device="cpu", inter_threads=1, intra_threads=1
            )
            results = translator.translate_batch(
                self.sources, beam_size=1, max_decoding_length=MAX_LENGTH
            )
            got = [result.hypotheses[0] for result in results]
            if got != expected:
                yield Result(
                    "ctranslate2",
                    FAIL,
                    "the %s fold translates %r where %s gives %r"
                    % (domain, got[0], against, expected[0]),
                )
                return
        yield Result("ctranslate2", PASS, "the folds of d0, d1, generic translate as %s" % against)

    # -- checkpoints ------------------------------------------------------------------

    def _checkpoint(self):
        own = _save(self.model, os.path.join(self.work_dir, "own"))
        check_model_checkpoint(self.model, own)
        other_name = _reference_family(self.family)
        # On the same corpus, with its own vocabularies (no domain tokens).
        paths = data.write_corpus(os.path.join(self.work_dir, "reference_data"), 8)
        other = self._new_model(registry.get(other_name), paths)
        path = _save(other, os.path.join(self.work_dir, other_name))
        try:
            check_model_checkpoint(self.model, path)
        except UserError as e:
            yield Result("checkpoint", PASS, "its own accepted; %s's refused: %s" % (other_name, e))
            return
        if _layout(other) == _layout(self.model):
            yield Result(
                "checkpoint",
                SKIP,
                "its checkpoint layout is %s's (same variables and shapes): no check can tell "
                "them apart" % other_name,
            )
            return
        yield Result("checkpoint", FAIL, "a checkpoint of %s restores into it" % other_name)


def _tiny_sizes(family):
    """The size arguments that :meth:`registry.Family.build_tiny` gives the builder."""
    return dict(registry.TINY_SIZES[family.architecture], **family.tiny)


@contextlib.contextmanager
def _params(model, **values):
    """Sets entries of ``model.params`` for the duration of the block."""
    before = {key: model.params.get(key) for key in values}
    model.params.update(values)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                model.params.pop(key, None)
            else:
                model.params[key] = value


def _reference_family(family):
    """Another family of the same architecture, whose checkpoint must be refused."""
    candidates = {
        "transformer": ("mixed_transformer", "ldr_transformer"),
        "rnn": ("mixed_rnn", "ldr_rnn"),
    }[family.architecture]
    return [name for name in candidates if name != family.name][0]


def _layout(model):
    keys = model_checkpoint_keys(model)
    return sorted((key, tuple(v.shape.as_list())) for key, v in keys.items())


def _save(model, directory):
    opennmt.utils.checkpoint.Checkpoint(model, model_dir=directory).save(step=1)
    return tf.train.latest_checkpoint(directory)


def _hypotheses(tokens, lengths):
    return [
        [t.decode("utf-8") for t in hypotheses[0][: length[0]]]
        for hypotheses, length in zip(tokens.numpy(), lengths.numpy())
    ]


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def header(family, caps):
    """The line before the checks: what the family claims."""
    modes = ", ".join(
        "%s (default)" % m if m == caps.default_domain_training else m for m in caps.domain_training
    )
    return "%s (%s): labels %s; training modes %s; ensembles %s; CTranslate2 %s" % (
        family.name,
        family.module,
        caps.labels,
        modes,
        "yes" if caps.ensembles is None else "no",
        "folds" if caps.ctranslate2 is None else "refused",
    )
