"""The legal domain (DESIGN.md "Layout"): matters, relations, entities, metadata, decisions, the ontology, access,
and the context a rule or stage handler receives. Imports the store, config, core and the adapters' data models.
"""
