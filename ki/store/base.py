"""The declarative base every ki table registers on, and the timestamp column type.

Its own module so that the model modules (``models``, ``models_*``) import it downwards and never
each other (DESIGN.md "Layout": ``ki/store/base.py``).
"""

from __future__ import annotations

from sqlalchemy import DateTime
from sqlalchemy.orm import DeclarativeBase

#: Timezone-aware UTC timestamps (DESIGN.md "Conventions").
TZ = DateTime(timezone=True)


class Base(DeclarativeBase):
    """Declarative base of every ki table (one metadata: Alembic and the schema test read it)."""
