"""The real browser for WebNN tests: one Chromium 153 (npm, see package.json) per pytest session, or per
pytest-xdist worker under `-n`. Installed by `npm ci` (`.ci/run` and the README's test command run it).

Missing node or npm packages fail the tests, unless CONVERTER_WEBNN_BROWSER_OPTIONAL=1 says the browser
is optional on this machine: then they are skipped with the reason."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from .browser_client import WebnnBrowser, missing_requirements

OPTIONAL_ENV = "CONVERTER_WEBNN_BROWSER_OPTIONAL"


def require_browser_packages() -> None:
    """Fails (or, where the browser is declared optional, skips) the calling test or fixture when the
    browser cannot start here."""
    missing = missing_requirements()
    if missing is None:
        return
    message = f"real-browser WebNN tests need Chromium 153 from npm: {missing}"
    if os.environ.get(OPTIONAL_ENV) == "1":
        pytest.skip(f"{message} ({OPTIONAL_ENV}=1)")
    pytest.fail(f"{message}; set {OPTIONAL_ENV}=1 to skip these tests instead", pytrace=False)


@pytest.fixture(scope="session")
def webnn_browser() -> Iterator[WebnnBrowser]:
    require_browser_packages()
    with WebnnBrowser() as browser:
        yield browser
