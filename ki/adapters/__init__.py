"""What talks to the world outside (DESIGN.md "Layout"): sources (folders, the watcher), conversion (Docling,
LibreOffice, the built-in readers), the model gateway, search backends (PostgreSQL, tantivy, OpenSearch),
monitoring exporters, and the circuit breakers and cooldowns that guard them.
"""
