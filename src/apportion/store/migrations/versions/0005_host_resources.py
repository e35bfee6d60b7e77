"""Host resources and packing (SPEC rev 3, sections 1 and 5): nodes.cpu_milli,
nodes.memory_mib (allocatable; null = not limited), pools.packing.

A workload's ``cpu``/``memory_mib`` live in its stored spec (JSON): no column.

Revision ID: 0005
Revises: 0004

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Upgrade schema."""
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cpu_milli", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("memory_mib", sa.Integer(), nullable=True))
    with op.batch_alter_table("pools", schema=None) as batch_op:
        batch_op.add_column(sa.Column("packing", sa.String(length=16),
                                      server_default="fragmentation", nullable=False))


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table("pools", schema=None) as batch_op:
        batch_op.drop_column("packing")
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.drop_column("memory_mib")
        batch_op.drop_column("cpu_milli")
