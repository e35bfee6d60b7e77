"""Job control (issue 16): holds and arrays on workloads (workloads.held,
array_id, array_index, array_limit), time limits on pools
(pools.default_time_limit, max_time_limit). A workload's own time limit,
requeue_on_timeout and dependencies live in its spec (JSON).

Revision ID: 0008
Revises: 0007

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Upgrade schema."""
    with op.batch_alter_table("workloads", schema=None) as batch_op:
        batch_op.add_column(sa.Column("held", sa.Boolean(), nullable=False,
                                      server_default=sa.false()))
        batch_op.add_column(sa.Column("array_id", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("array_index", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("array_limit", sa.Integer(), nullable=True))
        batch_op.create_index("ix_workloads_array_id", ["array_id"], unique=False)
    with op.batch_alter_table("pools", schema=None) as batch_op:
        batch_op.add_column(sa.Column("default_time_limit", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("max_time_limit", sa.Integer(), nullable=True))


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table("pools", schema=None) as batch_op:
        batch_op.drop_column("max_time_limit")
        batch_op.drop_column("default_time_limit")
    with op.batch_alter_table("workloads", schema=None) as batch_op:
        batch_op.drop_index("ix_workloads_array_id")
        batch_op.drop_column("array_limit")
        batch_op.drop_column("array_index")
        batch_op.drop_column("array_id")
        batch_op.drop_column("held")
