"""The browser tests' fixtures, defined in pages.py."""

from tests.browser.pages import dev_server, page_url

__all__ = ["dev_server", "page_url"]
