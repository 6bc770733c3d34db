"""The pure core (DESIGN.md "Layout"): errors, taxonomies, the retry table, text helpers and process facts.

Imports nothing of ki outside ``ki.core``; every other package may import it.
"""
