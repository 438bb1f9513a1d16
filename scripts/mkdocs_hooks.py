"""MkDocs hook: the docstrings' Sphinx roles (``:func:`name```, ``:class:``, ``:mod:``, ...) read
as plain code on the API page, where mkdocstrings renders them as text followed by the code."""

from __future__ import annotations

import re

ROLE = re.compile(r":(?:func|class|mod|data|attr|meth|obj|exc):(?=<code>)")


def on_page_content(html: str, **kwargs) -> str:
    return ROLE.sub("", html)
