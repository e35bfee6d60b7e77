"""A pool's typical pods: the configured prior of fragmentation packing (SPEC 5),
pools.typical_pods (JSON; null = a whole node of each node size).

Revision ID: 0006
Revises: 0005

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Upgrade schema."""
    with op.batch_alter_table("pools", schema=None) as batch_op:
        batch_op.add_column(sa.Column("typical_pods", sa.JSON(), nullable=True))


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table("pools", schema=None) as batch_op:
        batch_op.drop_column("typical_pods")
