"""The application layer the faces share: what ``ki`` (CLI), ``ki serve`` (HTTP API and console) and the MCP
server all do, without knowing how it is asked.

- :mod:`ki.app.views`: the view models of configuration, the re-run preview and the model catalog;
- :mod:`ki.app.config_view`: configuration as fields (values, sources, env pins, secrets) and the save/re-run rule;
- :mod:`ki.app.preview`: what re-running a stage would cost;
- :mod:`ki.app.catalog`: the gateway's model catalog per stage;
- :mod:`ki.app.tokens` / :mod:`ki.app.scopes`: API tokens (stored hashed) and their scopes;
- :mod:`ki.app.work_items` / :mod:`ki.app.work_item_views`: work items, their pages and failure groups as the
  caller's principal may see them;
- :mod:`ki.app.launcher`: runs started in the background of a long-lived process (``ki serve``, ``ki watch``).

The faces (:mod:`ki.cli`, :mod:`ki.api`) import this package; it imports neither (DESIGN.md "Layout": imports
point down the layers).
"""
