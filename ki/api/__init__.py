"""The ``ki serve`` app: console API and page, tokens and scopes (DESIGN.md ``ki/api/``).

Import :func:`ki.api.app.create_app` for the ASGI app; :mod:`ki.app.tokens` and
:mod:`ki.app.scopes` carry no web framework and are used by the CLI too.
"""
