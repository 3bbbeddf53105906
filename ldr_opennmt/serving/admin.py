"""Domains added, replaced and removed while ``ldr-serve`` runs (issue 74, item 4): admin
routes, off unless a token is configured (``--admin_token_file FILE``, or the environment
variable :data:`TOKEN_ENV`; never in a URL).

* ``GET /admin/domains``: each domain and where its model comes from.
* ``PUT /admin/domains/NAME`` with ``{"export": DIR, "domain": NAME_THERE}``: the model of
  domain ``NAME_THERE`` (default ``NAME``) of the ``ldr-export ctranslate2`` directory ``DIR``
  (a path on the server) is opened, checked against its manifest and hashes and loaded, then
  serves ``NAME`` (added, or replacing its model). Requests that started before finish on the
  model they started with (:meth:`ldr_opennmt.serving.backends.CTranslate2Backend.put`).
* ``DELETE /admin/domains/NAME``: the domain is no longer served (not ``generic``, which text
  without a domain needs, nor a domain the classifier can choose).

Every admin request carries ``Authorization: Bearer TOKEN``; without it, or with another
token, 401 and nothing changes (the comparison takes the same time whatever the token). The
routes are not in the OpenAPI schema, and answer in the server's one error shape.
"""

import asyncio
import hmac
import os

import fastapi

from ldr_opennmt import domains as domains_lib
from ldr_opennmt.errors import UserError
from ldr_opennmt.serving import api_models, ct2_models, http_io
from ldr_opennmt.serving.backend_kinds import CTRANSLATE2, RequestError

#: The environment variable that may hold the admin token.
TOKEN_ENV = "LDR_SERVE_ADMIN_TOKEN"
#: The shortest token accepted.
MIN_TOKEN_CHARS = 16
#: The fields of a ``PUT /admin/domains/NAME`` body.
FIELDS = ("export", "domain")


def read_token(path=None, environ=None):
    """The admin token: the first line of :obj:`path`, or :data:`TOKEN_ENV`; ``None`` when
    neither is set.

    Raises:
      UserError: on a file that cannot be read, or a token shorter than
        :data:`MIN_TOKEN_CHARS` characters.
    """
    environ = os.environ if environ is None else environ
    if path is not None:
        try:
            with open(path, encoding="utf-8") as f:
                token = f.readline().strip()
        except (OSError, UnicodeDecodeError) as e:
            raise UserError(
                "--admin_token_file %s: cannot be read (%s)" % (path, getattr(e, "strerror", e))
            ) from None
        where = "--admin_token_file %s" % path
    elif environ.get(TOKEN_ENV):
        token, where = environ[TOKEN_ENV].strip(), TOKEN_ENV
    else:
        return None
    if len(token) < MIN_TOKEN_CHARS:
        raise UserError(
            "%s: an admin token of %d characters, at least %d are needed"
            % (where, len(token), MIN_TOKEN_CHARS)
        )
    return token


def _authorized(request, token):
    given = request.headers.get("authorization", "")
    scheme, _, value = given.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        value.strip().encode("utf-8", "surrogateescape"), token.encode("utf-8")
    )


def _refused():
    return http_io.error(
        401,
        "admin: a valid token is required (Authorization: Bearer TOKEN)",
        headers={"WWW-Authenticate": "Bearer"},
        scrub=False,
    )


def _checked_name(name):
    """:obj:`name` if it can name a served domain: a name a model may declare
    (:func:`ldr_opennmt.domains.validate_domain_names`), or ``generic``."""
    if name != domains_lib.GENERIC:
        try:
            domains_lib.validate_domain_names([name], "domain")
        except UserError as e:
            raise RequestError(422, str(e)) from None
    return name


def _domains(server):
    backend = server.backend
    return {"domains": [{"domain": d, "source": backend.sources.get(d)} for d in backend.labels]}


def register(app, server, token, read_json):
    """Adds the admin routes to :obj:`app` (of :func:`ldr_opennmt.serving.app.create_app`).

    Args:
      app: The application.
      server: Its :class:`~ldr_opennmt.serving.server.Server`.
      token: The admin token.
      read_json: ``await read_json(request)``: the request's JSON body (the application's
        checks: size, time, content type).
    """
    options = server.options

    @app.get("/admin/domains", include_in_schema=False)
    async def list_domains(request: fastapi.Request):
        if not _authorized(request, token):
            return _refused()
        return _domains(server)

    @app.put("/admin/domains/{name}", include_in_schema=False)
    async def put_domain(name: str, request: fastapi.Request):
        if not _authorized(request, token):
            return _refused()
        try:
            name = _checked_name(name)
            if server.backend.kind != CTRANSLATE2:
                raise RequestError(
                    501,
                    "admin: domains change only in a server of an ldr-export ctranslate2 "
                    "directory (this one serves a SavedModel)",
                )
            body = await read_json(request)
            if not isinstance(body, dict) or not isinstance(body.get("export"), str):
                raise RequestError(
                    422, 'export: expected {"export": "DIR", "domain": "NAME IN DIR"}'
                )
            unknown = sorted(set(body) - set(FIELDS))
            if unknown:
                raise RequestError(
                    422, "%s: unknown field (expected: %s)" % (unknown[0], ", ".join(FIELDS))
                )
            there = body.get("domain", name)
            if not isinstance(there, str):
                raise RequestError(422, "domain: expected a domain name of the export")
            try:
                export = ct2_models.Export(body["export"], where="export")
            except UserError as e:
                raise RequestError(422, str(e)) from None
            for side in ("source_language", "target_language"):
                theirs, ours = export.manifest.get(side), getattr(server, side, None)
                if theirs and ours and theirs != ours:
                    raise RequestError(
                        422,
                        "export: %s of %s is %s, this server's is %s"
                        % (side.replace("_", " "), body["export"], theirs, ours),
                    )
            if there not in export.paths:
                raise RequestError(
                    422,
                    "domain: %s is not in %s (it has: %s)"
                    % (api_models.short(there), body["export"], ", ".join(export.paths)),
                )
            model = export.models(
                domains=[there],
                tokenizer_required=False,
                device=options.device,
                inter_threads=options.inter_threads,
                intra_threads=options.intra_threads,
                load=False,
                compute_type=getattr(options, "compute_type", None) or "default",
            )[there]
            source = "%s (%s)" % (body["export"], there)
            try:
                action = await asyncio.to_thread(
                    server.backend.put, name, model, source, export.calibration(there)
                )
            except UserError as e:
                raise RequestError(422, str(e)) from None
            return {"domain": name, "action": action, "source": source}
        except RequestError as e:
            return http_io.request_error(e, scrub=False)  # The admin's own paths.

    @app.delete("/admin/domains/{name}", include_in_schema=False)
    async def delete_domain(name: str, request: fastapi.Request):
        if not _authorized(request, token):
            return _refused()
        try:
            if server.backend.kind != CTRANSLATE2:
                raise RequestError(501, "admin: domains change only in a CTranslate2 server")
            if name not in server.backend.labels:
                raise RequestError(404, "domain: %s is not served here" % api_models.short(name))
            if name == domains_lib.GENERIC:
                raise RequestError(
                    409, "domain: generic cannot be removed: text without a domain needs it"
                )
            classifier = getattr(server, "classifier", None)
            if classifier is not None and name in classifier.domains:
                raise RequestError(
                    409,
                    "domain: %s cannot be removed: the domain classifier (--classifier) may"
                    " choose it" % name,
                )
            await asyncio.to_thread(server.backend.remove, name)
            return {"domain": name, "action": "removed"}
        except RequestError as e:
            return http_io.request_error(e, scrub=False)  # The admin's own paths.
