"""The page of ``ldr-serve`` for a person: ``GET /`` (``--no-ui`` turns it off).

A text box, a domain choice (each domain of the export, ``generic`` included, and ``auto``,
the classifier's pick, on a server with ``--classifier``) and a view comparing every
domain's translation side by side, the words that differ between domains marked and the
classifier's choice and confidence shown. The page is three files of the package
(``ui_assets/``: ``index.html``, ``page.js``, ``page.css``) served by the server itself: no
script, font or style comes from another host, and its ``Content-Security-Policy`` allows
none. Its script calls only the public routes every client uses (``GET /domains``, ``GET
/languages``, ``POST /translate``, ``POST /detect_domain``). The routes of the page are left
out of the OpenAPI schema: they are not part of the API.
"""

from importlib import resources

from fastapi import responses

from ldr_opennmt.errors import UserError

#: The folder of the page's files, in this package.
ASSETS = "ui_assets"

#: The page's files: ``{route: (file, media type)}`` (UTF-8: Starlette adds the charset).
FILES = {
    "/": ("index.html", "text/html"),
    "/ui/page.js": ("page.js", "text/javascript"),
    "/ui/page.css": ("page.css", "text/css"),
}

#: Everything from this server only: its own script and style, calls to its own routes.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "img-src 'self' data:",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)

HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def read_asset(name):
    """The bytes of the page's file :obj:`name` (package data).

    Raises:
      UserError: if the installation lacks it.
    """
    try:
        return resources.files(__package__).joinpath(ASSETS, name).read_bytes()
    except OSError:
        raise UserError(
            "the page's file %s/%s is missing from this installation of ldr-opennmt: "
            "reinstall it, or serve without the page (--no-ui)" % (ASSETS, name)
        ) from None


def register(app):
    """Adds the page's routes to :obj:`app` (of :func:`~ldr_opennmt.serving.app.create_app`),
    outside its OpenAPI schema.

    Raises:
      UserError: if the page's files are missing from the installation.
    """
    for path, (name, media_type) in FILES.items():
        app.add_api_route(
            path,
            _endpoint(read_asset(name), media_type),
            methods=["GET"],
            include_in_schema=False,
            name="ui:" + name,
        )


def _endpoint(content, media_type):
    async def page():
        return responses.Response(content, media_type=media_type, headers=HEADERS)

    return page
