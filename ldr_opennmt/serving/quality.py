"""The export's ``quality.json``, read and checked for the server: the wrong-domain guard
(:mod:`ldr_opennmt.serving.domain_guard`) and the calibrated confidence
(:mod:`ldr_opennmt.serving.confidence`) that ``ldr-export ctranslate2 --domain_guard
--confidence`` fitted (:mod:`ldr_opennmt.export.quality`).

The manifest records the file and its sha256 (``"quality": {"file": "quality.json", "sha256":
...}``): a file changed after the export is refused in one line, like a changed model.
"""

import json
import os
import re

from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import confidence as confidence_lib
from ldr_opennmt.serving import domain_guard
from ldr_opennmt.serving import manifest as manifest_lib

#: The manifest's key.
KEY = "quality"
_HEX_SHA256 = re.compile(r"^[0-9a-f]{64}\Z")


def read_quality(export_dir, manifest):
    """The guard and the confidence of an export.

    Args:
      export_dir: The export directory.
      manifest: Its manifest (:func:`ldr_opennmt.serving.manifest.read_manifest`).

    Returns:
      ``(DomainGuard or None, Confidence or None, summary)``: ``None`` where the export has
      none (exported without ``--domain_guard`` or ``--confidence``); the summary is the dev
      figures the export recorded (``{}`` without a file).

    Raises:
      UserError: one line naming the file and what is wrong (missing, changed since the
        export, not JSON, a parameter missing).
    """
    entry = manifest.get(KEY)
    if entry is None:
        return None, None, {}
    where = os.path.join(export_dir, manifest_lib.MANIFEST)
    if (
        not isinstance(entry, dict)
        or entry.get("file") != os.path.basename(str(entry.get("file")))
        or not isinstance(entry.get("sha256"), str)
        or not _HEX_SHA256.match(entry["sha256"])
    ):
        raise UserError(
            '%s: key \'%s\' must be {"file": NAME, "sha256": HEX}, got %r' % (where, KEY, entry)
        )
    path = os.path.join(export_dir, entry["file"])
    try:
        digest = manifest_lib.file_sha256(path)
    except OSError as e:
        raise UserError(
            "%s: cannot read it (%s): the export is incomplete; export the model again"
            % (path, e.strerror or e)
        ) from None
    if digest != entry["sha256"]:
        raise UserError(
            "%s: content differs from %s (sha256 %s..., recorded %s...): changed after the"
            " export; export the model again"
            % (path, manifest_lib.MANIFEST, digest[:12], entry["sha256"][:12])
        )
    try:
        with open(path, encoding="utf-8") as f:
            quality = json.load(f)
    except (OSError, ValueError) as e:
        raise UserError("%s: cannot read it (%s)" % (path, e)) from None
    if not isinstance(quality, dict):
        raise UserError("%s: expected a JSON object" % path)
    guard = confidence = None
    if "domain_guard" in quality:
        guard = domain_guard.DomainGuard(quality["domain_guard"], where=path)
        declared = list(manifest.get("declared_domains") or [])
        if guard.domains != declared:
            raise UserError(
                "%s: domain_guard: domains %s, but the model declares %s: export again"
                % (path, ", ".join(guard.domains), ", ".join(declared) or "none")
            )
    if "confidence" in quality:
        confidence = confidence_lib.Confidence(quality["confidence"], where=path)
    summary = quality.get("summary") if isinstance(quality.get("summary"), dict) else {}
    return guard, confidence, summary
