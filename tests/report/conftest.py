"""The report's tests open pages in headless Chromium (``tests.browser``)."""

from tests.browser import browser

__all__ = ["browser"]
