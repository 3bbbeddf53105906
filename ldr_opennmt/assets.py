"""The extra assets of a SavedModel export: tokenizers and the domain list.

OpenNMT-tf's exporters write the files returned by ``Model.export_assets`` to
``<export_dir>/assets.extra/``. For a multi-domain model (see
:meth:`ldr_opennmt.models.MultiDomainModel.export_assets`) they are::

    assets.extra/
      inference.json                {"maximum_source_length": L, "ignored_domain_labels":
                                    why labels are ignored or null, "ensemble_refusal": why
                                    ensemble labels are refused or null}
      domains.txt                   the declared domains, one per line, in id order
                                    (empty for a model that declares none: labels ignored)
      source_tokenizer_config.yml   with source_tokenization: the pyonmttok options,
      target_tokenizer_config.yml   with target_tokenization, file paths as basenames
      bpe.en, bpe.fr, ...           the files those configurations name (BPE models, ...)

Two tokenizer files with the same basename but different contents (e.g.
``en/bpe.model`` and ``fr/bpe.model``) would overwrite each other in OpenNMT-tf's
flat layout; the target one is then renamed ``target_<basename>`` and its
configuration updated.

An export is built under a temporary name next to its destination and renamed when
complete (:func:`export_directory`): ``domains.txt``, written last, is then the mark of a
complete export, and :mod:`ldr_opennmt.serving.savedmodel_translate` refuses an export without it.

This module has both sides: writing the assets (at export) and reading them
(:mod:`ldr_opennmt.serving.savedmodel_translate`).
"""

import contextlib
import filecmp
import json
import os
import sys

import pyonmttok
import yaml

from ldr_opennmt.errors import UserError
from ldr_opennmt.utils import atomic_directory

ASSETS_EXTRA = "assets.extra"
DOMAINS = "domains.txt"
#: Inference settings a client needs: ``{"maximum_source_length": L}``.
INFERENCE = "inference.json"
TOKENIZER_CONFIGS = {
    "source": "source_tokenizer_config.yml",
    "target": "target_tokenizer_config.yml",
}
#: The file every export of the package holds (``ldr-main export``, ``onmt-main export``
#: of the package's models, exports on best evaluation): a later export to the same
#: directory replaces only a directory that holds it.
EXPORT_MARK = ".ldr-opennmt-export"


def is_project_export(path):
    """Whether :obj:`path` is a directory exported by the package (it holds
    :data:`EXPORT_MARK`; a link is never one)."""
    mark = os.path.join(path, EXPORT_MARK)
    return (
        os.path.isdir(path)
        and not os.path.islink(path)
        and os.path.isfile(mark)
        and not os.path.islink(mark)
    )


@contextlib.contextmanager
def export_directory(export_dir):
    """Yields a fresh directory to export into; it becomes :obj:`export_dir` when the
    block completes (:func:`ldr_opennmt.utils.atomic_directory`), marked as an export
    of the package (:data:`EXPORT_MARK`).

    An export killed midway (``kill -9``, out of memory) leaves no directory that looks
    like an export: OpenNMT-tf writes the SavedModel first and ``assets.extra/`` last, so
    such a leftover used to be a SavedModel without its tokenizers and domain list. An
    earlier export of the package at :obj:`export_dir` is replaced only once the new one
    is complete; anything else (a model directory, a SavedModel made by other tools, a
    link) is refused rather than replaced: ``--output_dir .`` or ``--output_dir
    MODEL_DIR`` must not remove what the user made. Remote paths (``gs://...``), which
    cannot be renamed atomically, are written in place as OpenNMT-tf does.

    Raises:
      UserError: if :obj:`export_dir` is a link, a file, or a non-empty directory that
        is not an earlier export of the package.
    """
    if "://" in export_dir:
        yield export_dir
        return
    if os.path.islink(export_dir):
        raise UserError(
            "%s: a symbolic link: export to a real directory (it is not followed)" % export_dir
        )
    if os.path.exists(export_dir):
        if not os.path.isdir(export_dir):
            raise UserError("%s: exists and is not a directory: cannot export there" % export_dir)
        if os.listdir(export_dir) and not is_project_export(export_dir):
            raise UserError(
                "%s: not empty and not an export made by ldr-opennmt (no %s): export to a new "
                "directory" % (export_dir, EXPORT_MARK)
            )
    with atomic_directory(export_dir) as partial:
        yield partial
        with open(os.path.join(partial, EXPORT_MARK), "x", encoding="utf-8") as f:
            f.write("an export of ldr-opennmt: a later export to this directory replaces it\n")


def export_assets(model, asset_dir):
    """Writes the extra assets of a multi-domain model.

    Args:
      model: A :class:`ldr_opennmt.models.MultiDomainModel`.
      asset_dir: The directory where assets can be written.

    Returns:
      A dictionary mapping asset file names to their paths.
    """
    assets = {}
    sides = (("source", model.features_inputter), ("target", model.labels_inputter))
    for side, inputter in sides:
        side_assets = inputter.export_assets(asset_dir)
        if TOKENIZER_CONFIGS[side] not in side_assets:
            # Trained on tokenized text: the tokenizer of the corpus that made it, if known.
            side_assets = corpus_tokenizer_assets(
                getattr(inputter, "vocabulary_file", None), side, asset_dir
            )
        for name, path in list(side_assets.items()):
            if name in assets and not _same_file(assets[name], path):
                renamed = "%s_%s" % (side, name)
                _rename_in_config(side_assets.get(TOKENIZER_CONFIGS[side]), name, renamed)
                side_assets[renamed] = side_assets.pop(name)
        assets.update(side_assets)
    if hasattr(model, "maximum_source_length"):
        # What a client needs to know: the serving function truncates longer sources
        # (clients count them), and whether labels are ignored or ensembles refused.
        inference = {
            "maximum_source_length": int(model.maximum_source_length),
            "ignored_domain_labels": model.ignored_labels_reason(),
            "ensemble_refusal": model.ensemble_refusal_reason(),
        }
        inference_path = os.path.join(asset_dir, INFERENCE)
        with open(inference_path, "w", encoding="utf-8") as inference_file:
            json.dump(inference, inference_file, indent=2)
            inference_file.write("\n")
        assets[INFERENCE] = inference_path
    note = tokenizer_note(
        [side for side, _ in sides if TOKENIZER_CONFIGS[side] not in assets],
        {side: getattr(inputter, "vocabulary_file", None) for side, inputter in sides},
    )
    if note:
        print("ldr-opennmt: note: %s" % note, file=sys.stderr)
    domains_path = os.path.join(asset_dir, DOMAINS)
    with open(domains_path, "w", encoding="utf-8") as domains_file:
        domains_file.write("".join(name + "\n" for name in model.domains or []))
    assets[DOMAINS] = domains_path
    return assets


#: The tokenizer ``ldr-data`` writes beside each vocabulary ``vocab.LANG`` of a corpus.
CORPUS_TOKENIZER = "tokenizer.%s.yml"


def corpus_tokenizer(vocabulary_file):
    """The tokenizer of the corpus a vocabulary comes from (``ldr-data`` writes
    ``vocab.LANG``, ``tokenizer.LANG.yml`` and ``bpe.LANG`` side by side).

    Args:
      vocabulary_file: The vocabulary (``data/default/vocab.en``), or ``None``.

    Returns:
      ``(options, files, config_path)``: the pyonmttok options with file paths as basenames,
      ``{basename: path}`` of those files, and the configuration read; or ``None`` when the
      vocabulary has no such tokenizer beside it.

    Raises:
      UserError: if the configuration is invalid or names a file that is not there.
    """
    if not vocabulary_file or "://" in vocabulary_file:
        return None
    directory, name = os.path.split(os.path.abspath(vocabulary_file))
    if not name.startswith("vocab.") or name == "vocab.":
        return None
    config_path = os.path.join(directory, CORPUS_TOKENIZER % name[len("vocab.") :])
    if not os.path.isfile(config_path):
        return None
    with open(config_path, encoding="utf-8") as config_file:
        try:
            config = yaml.safe_load(config_file) or {}
        except yaml.YAMLError as e:
            raise UserError("%s: not valid YAML (%s)" % (config_path, e)) from None
    options = config.get("params", config) if isinstance(config, dict) else None
    if not isinstance(options, dict):
        raise UserError("%s: expected a mapping of tokenization options" % config_path)
    options, files = dict(options), {}
    for key, value in list(options.items()):
        if isinstance(value, str) and key.endswith("_path"):
            # The recorded path, or the file of that name beside the configuration (a corpus
            # that was moved or copied).
            candidates = [value if os.path.isabs(value) else os.path.join(directory, value)]
            candidates.append(os.path.join(directory, os.path.basename(value)))
            path = next((c for c in candidates if os.path.isfile(c)), None)
            if path is None:
                raise UserError(
                    "%s: %s: %s not found (nor beside the configuration)"
                    % (config_path, key, value)
                )
            options[key] = os.path.basename(path)
            files[os.path.basename(path)] = path
    return options, files, config_path


def corpus_tokenizer_assets(vocabulary_file, side, asset_dir):
    """Writes the corpus tokenizer of :obj:`vocabulary_file` (:func:`corpus_tokenizer`) as
    the export's tokenizer of :obj:`side`, in OpenNMT-tf's layout.

    Returns:
      ``{asset name: path}`` (empty when the corpus has no tokenizer).
    """
    found = corpus_tokenizer(vocabulary_file)
    if found is None:
        return {}
    options, files, _ = found
    config_path = os.path.join(asset_dir, TOKENIZER_CONFIGS[side])
    with open(config_path, "w", encoding="utf-8") as config_file:
        yaml.safe_dump(options, config_file, default_flow_style=False)
    assets = {TOKENIZER_CONFIGS[side]: config_path}
    assets.update(files)
    return assets


def tokenizer_note(sides, vocabularies):
    """The one line said when an export has no tokenizer for some sides, or ``None``.

    Args:
      sides: The sides (``source``, ``target``) without a tokenizer.
      vocabularies: ``{side: vocabulary file}``.
    """
    if not sides:
        return None
    return (
        "no %s tokenizer (no %s_tokenization in the configuration, no %s beside %s): the "
        "export %s"
        % (
            " and ".join(sides),
            sides[0],
            CORPUS_TOKENIZER % "LANG",
            ", ".join(str(vocabularies.get(side)) for side in sides),
            (
                "translates tokenized text only (tokens separated by spaces)"
                if "source" in sides
                else "answers tokens joined by spaces"
            ),
        )
    )


def _same_file(path_a, path_b):
    return os.path.abspath(path_a) == os.path.abspath(path_b) or filecmp.cmp(
        path_a, path_b, shallow=False
    )


def _rename_in_config(config_path, name, renamed):
    if config_path is None:
        return
    with open(config_path, encoding="utf-8") as config_file:
        config = yaml.safe_load(config_file)
    config = {key: renamed if value == name else value for key, value in config.items()}
    with open(config_path, "w", encoding="utf-8") as config_file:
        yaml.safe_dump(config, config_file, default_flow_style=False)


def assets_dir(export_dir):
    """The ``assets.extra`` directory of an export."""
    return os.path.join(export_dir, ASSETS_EXTRA)


def read_domains(export_dir):
    """Reads the domain list recorded in an export.

    Returns:
      ``(recorded, domains)``: whether the export has a domain list (exports made
      before it was recorded have none), and the declared domain names or ``None``
      when the model declares none (any label is then accepted and ignored).
    """
    path = os.path.join(assets_dir(export_dir), DOMAINS)
    if not os.path.isfile(path):
        return False, None
    with open(path, encoding="utf-8") as domains_file:
        names = [line.strip() for line in domains_file if line.strip()]
    return True, names or None


def load_tokenizer(export_dir, side):
    """Builds the pyonmttok tokenizer exported for one side of the model.

    The options are those of OpenNMT-tf's ``OpenNMTTokenizer`` at training time;
    file options (``bpe_model_path``, ``sp_model_path``, ``vocabulary_path``...)
    are resolved in ``assets.extra``.

    Args:
      export_dir: The SavedModel directory.
      side: ``"source"`` or ``"target"``.

    Returns:
      A ``pyonmttok.Tokenizer``, or ``None`` if the export has no tokenizer for
      this side (the model was exported without ``<side>_tokenization``).

    Raises:
      UserError: if a file named by the configuration is missing or the
        configuration is invalid.
    """
    directory = assets_dir(export_dir)
    config_name = TOKENIZER_CONFIGS[side]
    config_path = os.path.join(directory, config_name)
    if not os.path.isfile(config_path):
        return None
    with open(config_path, encoding="utf-8") as config_file:
        config = yaml.safe_load(config_file) or {}
    if not isinstance(config, dict):
        raise UserError("%s: expected a mapping of tokenization options" % config_path)
    for key, value in config.items():
        if isinstance(value, str) and key.endswith("_path"):
            path = value if os.path.isabs(value) else os.path.join(directory, value)
            if not os.path.isfile(path):
                raise UserError(
                    "%s: missing tokenizer asset (%s: %s in %s)" % (path, key, value, config_name)
                )
            config[key] = path
    config.setdefault("mode", "conservative")  # OpenNMT-tf's default.
    try:
        return pyonmttok.Tokenizer(**config)
    except (TypeError, ValueError, RuntimeError) as e:
        raise UserError("%s: invalid tokenization options: %s" % (config_path, e)) from e
