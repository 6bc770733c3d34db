"""Who may see what: the permission projection, the grant levels it is compiled from, and their loading.

Spec: insertion-pipeline.md "Index" (every chunk carries a denormalised permission projection,
``allowed_principals`` / ``denied_principals``, compiled from source, project and document grants;
a sync that sees only an ACL change marks the index row ``access_only_reindex``); DESIGN.md
"Duplicates and permissions" (every source object keeps its own permissions).

- :mod:`ki.domain.access.projection` — pure: :class:`GrantLevel`, :class:`AccessProjection`,
  :func:`compile_projection`, :func:`principal_set` (deny beats allow; an empty allow-list is
  visible to nobody);
- :mod:`ki.domain.access.folder_grants` — the local-folder connector's ACL: ``.ki-grants.json`` files;
- :mod:`ki.domain.access.load` — the levels of objects loaded from the database (project, source,
  document grants) and the connector: :func:`load_source_access`, :func:`object_projection`;
- :mod:`ki.domain.access.refresh` — the ``access_only_reindex`` marker and the scan's access comparison.

The search index only consumes projections (``ki.adapters.search`` never compiles grants).
"""

from ki.domain.access.projection import (
    EVERYONE,
    AccessProjection,
    GrantLevel,
    clean_principals,
    compile_projection,
    principal_set,
)

__all__ = ["EVERYONE", "AccessProjection", "GrantLevel", "clean_principals", "compile_projection", "principal_set"]
