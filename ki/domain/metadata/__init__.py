"""Extract metadata: typing against the ontology, language, date, title, identifiers and parties.

Spec: insertion-pipeline.md "Extract metadata". Modules: :mod:`language`, :mod:`dates`, :mod:`title`
(pure readers of one converted document), :mod:`schema` (the ``submit_result`` schema and its
validators), :mod:`typing_rules` and :mod:`policy` (the offline rules policy), :mod:`matter`
(which matter a document belongs to), :mod:`parties` (resolution and roles in the database),
:mod:`store` (the rows), :mod:`export` (the export fields).
"""
