"""Test helpers (not tests): paths, the test PostgreSQL, process control of the real outside components
(:mod:`~tests.helpers.process`, :mod:`~tests.helpers.hatchet_engine`, :mod:`~tests.helpers.opensearch_node`),
loopback HTTP servers (:mod:`~tests.helpers.loopback`, :mod:`~tests.helpers.gateway_stub`,
:mod:`~tests.helpers.docling_stub`) and worker scripts run as subprocesses.

Importable as ``tests.helpers.*``: pytest puts the repository root on ``sys.path``
(``pythonpath`` in pyproject.toml); a script outside pytest (``bench/``) does the same with
``PYTHONPATH`` or by running from the repository root.
"""
