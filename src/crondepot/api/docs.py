"""/docs (Swagger UI) and /redoc (ReDoc) with no network: their scripts, styles and icon are
served by the app itself from a pinned package (fastapi-offline ships them), never a CDN;
the ReDoc bundle's one CDN address (its logo) is replaced as it is served.

Swagger UI keeps the bearer token the Authorize button took across reloads of the page.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs/assets"
ASSET_FILES = ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png")
# The ReDoc bundle draws its "API docs by Redocly" logo from this CDN address: /redoc serves
# the bundle with it replaced by an empty image, so the page makes no outside request.
REDOC_CDN_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"
EMPTY_IMAGE = "data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7"
REDOC_JS = "/docs/redoc.js"


def install(app: FastAPI) -> None:
    """Serve /docs, /redoc and their assets (the app is made with docs_url=None)."""
    folder = files("fastapi_offline") / "static"
    app.mount(ASSETS, StaticFiles(directory=str(folder)), name="docs-assets")
    title = app.title
    openapi_url = app.openapi_url or "/openapi.json"

    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url, title=f"{title} - Swagger UI", oauth2_redirect_url=None,
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon.png",
            swagger_ui_parameters={"persistAuthorization": True})

    async def redoc() -> HTMLResponse:
        return get_redoc_html(openapi_url=openapi_url, title=f"{title} - ReDoc",
                              redoc_js_url=REDOC_JS,
                              redoc_favicon_url=f"{ASSETS}/favicon.png",
                              with_google_fonts=False)

    bundle = (folder / "redoc.standalone.js").read_text(encoding="utf-8")
    offline_bundle = bundle.replace(REDOC_CDN_LOGO, EMPTY_IMAGE).encode()

    async def redoc_js() -> Response:
        return Response(offline_bundle, media_type="text/javascript; charset=utf-8",
                        headers={"Cache-Control": "max-age=3600"})

    app.add_api_route(REDOC_JS, redoc_js, methods=["GET"], include_in_schema=False)
    app.add_api_route("/docs", swagger_ui, methods=["GET"], include_in_schema=False)
    app.add_api_route("/redoc", redoc, methods=["GET"], include_in_schema=False)
