"""The ``ki serve`` app: console API and page, tokens and scopes (DESIGN.md ``ki/api/``).

Import :func:`ki.api.app.create_app` for the ASGI app; :mod:`ki.api.tokens` and
:mod:`ki.api.scopes` carry no web framework and are used by the CLI too.
"""
