"""Shrink before kill (SPEC 6.5): exiting.part, agent_decisions.pods,
workloads.preemptions.

Several exiting rows of one attempt are told apart by ``part`` (0 = the whole
attempt); a ``shrink`` decision names its pods; a workload keeps its
preemption history (whole and shrink).

Revision ID: 0004
Revises: 0003

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Upgrade schema."""
    with op.batch_alter_table("exiting", schema=None) as batch_op:
        batch_op.add_column(sa.Column("part", sa.Integer(), server_default="0", nullable=False))
    with op.batch_alter_table("agent_decisions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("pods", sa.JSON(), server_default="[]", nullable=False))
    with op.batch_alter_table("workloads", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("preemptions", sa.JSON(), server_default="[]", nullable=False)
        )


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table("workloads", schema=None) as batch_op:
        batch_op.drop_column("preemptions")
    with op.batch_alter_table("agent_decisions", schema=None) as batch_op:
        batch_op.drop_column("pods")
    with op.batch_alter_table("exiting", schema=None) as batch_op:
        batch_op.drop_column("part")
