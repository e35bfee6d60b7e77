"""Initial schema: every table of the control plane.

Revision ID: 0001
Revises:

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table(
        "audit_log",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("org_id", sa.Integer(), nullable=True),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("actor", sa.String(length=255), nullable=False),
        sa.Column("token_id", sa.String(length=32), nullable=True),
        sa.Column("request_id", sa.String(length=128), nullable=True),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("object", sa.String(length=255), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("before", sa.JSON(), nullable=True),
        sa.Column("after", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.create_index("ix_audit_org_id", ["org_id", "id"], unique=False)

    op.create_table(
        "cycles",
        sa.Column("org_id", sa.Integer(), nullable=False),
        sa.Column("id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("holder", sa.String(length=255), nullable=False),
        sa.Column("fencing_token", sa.BigInteger(), nullable=False),
        sa.Column("snapshot_version", sa.BigInteger(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("duration_ms", sa.Float(), nullable=False),
        sa.Column("decisions", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("org_id", "id", name=op.f("pk_cycles")),
    )
    op.create_table(
        "entitlements",
        sa.Column("org_id", sa.Integer(), nullable=False),
        sa.Column("pool", sa.String(length=255), nullable=False),
        sa.Column("team", sa.String(length=63), nullable=False),
        sa.Column("value", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("org_id", "pool", "team", name=op.f("pk_entitlements")),
    )
    op.create_table(
        "idempotency_keys",
        sa.Column("org_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=False),
        sa.Column("response", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("org_id", "key", name=op.f("pk_idempotency_keys")),
    )
    with op.batch_alter_table("idempotency_keys", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_idempotency_keys_created_at"), ["created_at"], unique=False
        )

    op.create_table(
        "leases",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("holder", sa.String(length=255), nullable=False),
        sa.Column("token", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_leases")),
    )
    op.create_table(
        "organizations",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("slug", sa.String(length=63), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("is_system", sa.Boolean(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("sched_version", sa.BigInteger(), nullable=False),
        sa.Column("last_cycle", sa.BigInteger(), nullable=False),
        sa.Column("last_cycle_at", sa.Float(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_organizations")),
        sa.UniqueConstraint("slug", name=op.f("uq_organizations_slug")),
    )
    op.create_table(
        "agent_decisions",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("org_id", sa.Integer(), nullable=False),
        sa.Column("pool", sa.String(length=255), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("workload_id", sa.BigInteger(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("placement", sa.JSON(), nullable=False),
        sa.Column("exec", sa.JSON(), nullable=False),
        sa.Column("reason", sa.String(length=32), nullable=True),
        sa.Column("grace_seconds", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_agent_decisions_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agent_decisions")),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("agent_decisions", schema=None) as batch_op:
        batch_op.create_index("ix_agent_decisions_pool", ["org_id", "pool", "id"], unique=False)

    op.create_table(
        "events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("org_id", sa.Integer(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("type", sa.String(length=64), nullable=False),
        sa.Column("workload_id", sa.BigInteger(), nullable=True),
        sa.Column("team", sa.String(length=63), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=True),
        sa.Column("cause", sa.String(length=255), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_events_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index("ix_events_org_id", ["org_id", "id"], unique=False)
        batch_op.create_index("ix_events_workload", ["workload_id", "id"], unique=False)

    op.create_table(
        "exiting",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("org_id", sa.Integer(), nullable=False),
        sa.Column("workload_id", sa.BigInteger(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("team", sa.String(length=63), nullable=False),
        sa.Column("pool", sa.String(length=255), nullable=False),
        sa.Column("placement", sa.JSON(), nullable=False),
        sa.Column("exits_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_exiting_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_exiting")),
    )
    with op.batch_alter_table("exiting", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_exiting_org_id"), ["org_id"], unique=False)

    op.create_table(
        "nodes",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("org_id", sa.Integer(), nullable=False),
        sa.Column("pool", sa.String(length=255), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("gpu_type", sa.String(length=255), nullable=True),
        sa.Column("gpu_memory_mib", sa.Integer(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("health", sa.String(length=16), nullable=False),
        sa.Column("cordoned", sa.Boolean(), nullable=False),
        sa.Column("unavailable", sa.JSON(), nullable=False),
        sa.Column("last_seen_at", sa.Float(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_nodes_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_nodes")),
        sa.UniqueConstraint("org_id", "name", name=op.f("uq_nodes_org_id")),
    )
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_nodes_org_id"), ["org_id"], unique=False)

    op.create_table(
        "pools",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("org_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("gpu_type", sa.String(length=255), nullable=True),
        sa.Column("gpu_memory_mib", sa.Integer(), nullable=False),
        sa.Column("topology", sa.JSON(), nullable=False),
        sa.Column("start_delay", sa.Integer(), nullable=False),
        sa.Column("preemption_grace", sa.Integer(), nullable=False),
        sa.Column("starvation_hold_after", sa.Integer(), nullable=True),
        sa.Column("agent_status", sa.String(length=16), nullable=False),
        sa.Column("last_heartbeat_at", sa.Float(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_pools_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pools")),
        sa.UniqueConstraint("org_id", "name", name=op.f("uq_pools_org_id")),
    )
    with op.batch_alter_table("pools", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_pools_org_id"), ["org_id"], unique=False)

    op.create_table(
        "reservations",
        sa.Column("org_id", sa.Integer(), nullable=False),
        sa.Column("team", sa.String(length=63), nullable=False),
        sa.Column("pool", sa.String(length=255), nullable=False),
        sa.Column("milli", sa.BigInteger(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_reservations_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("org_id", "team", "pool", name=op.f("pk_reservations")),
    )
    op.create_table(
        "teams",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("org_id", sa.Integer(), nullable=False),
        sa.Column("slug", sa.String(length=63), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("parent", sa.String(length=63), nullable=True),
        sa.Column("bursting_priority", sa.Integer(), nullable=False),
        sa.Column("burst_limit_percent", sa.Integer(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_teams_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_teams")),
        sa.UniqueConstraint("org_id", "slug", name=op.f("uq_teams_org_id")),
    )
    with op.batch_alter_table("teams", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_teams_org_id"), ["org_id"], unique=False)

    op.create_table(
        "tokens",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("org_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("teams", sa.JSON(), nullable=False),
        sa.Column("pool", sa.String(length=255), nullable=True),
        sa.Column("secret_hash", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=True),
        sa.Column("revoked_at", sa.Float(), nullable=True),
        sa.Column("last_used_at", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_tokens_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tokens")),
    )
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_tokens_org_id"), ["org_id"], unique=False)

    op.create_table(
        "workloads",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("org_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("team", sa.String(length=63), nullable=False),
        sa.Column("wclass", sa.String(length=16), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("is_active", sa.Boolean(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("pool", sa.String(length=255), nullable=True),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("placement", sa.JSON(), nullable=False),
        sa.Column("nomination", sa.JSON(), nullable=False),
        sa.Column("is_hold", sa.Boolean(), nullable=False),
        sa.Column("reason_code", sa.String(length=64), nullable=True),
        sa.Column("reason_message", sa.Text(), nullable=True),
        sa.Column("submitted_at", sa.Float(), nullable=False),
        sa.Column("submitted_by", sa.String(length=255), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=True),
        sa.Column("running_at", sa.Float(), nullable=True),
        sa.Column("ended_at", sa.Float(), nullable=True),
        sa.Column("preempted_by", sa.BigInteger(), nullable=True),
        sa.Column("head_since", sa.Float(), nullable=True),
        sa.Column("attempts", sa.JSON(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_workloads_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workloads")),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("workloads", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_workloads_is_active"), ["is_active"], unique=False)
        batch_op.create_index("ix_workloads_org_status", ["org_id", "status"], unique=False)
        batch_op.create_index("ix_workloads_org_team", ["org_id", "team"], unique=False)


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table("workloads", schema=None) as batch_op:
        batch_op.drop_index("ix_workloads_org_team")
        batch_op.drop_index("ix_workloads_org_status")
        batch_op.drop_index(batch_op.f("ix_workloads_is_active"))

    op.drop_table("workloads")
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_tokens_org_id"))

    op.drop_table("tokens")
    with op.batch_alter_table("teams", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_teams_org_id"))

    op.drop_table("teams")
    op.drop_table("reservations")
    with op.batch_alter_table("pools", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_pools_org_id"))

    op.drop_table("pools")
    with op.batch_alter_table("nodes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_nodes_org_id"))

    op.drop_table("nodes")
    with op.batch_alter_table("exiting", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_exiting_org_id"))

    op.drop_table("exiting")
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index("ix_events_workload")
        batch_op.drop_index("ix_events_org_id")

    op.drop_table("events")
    with op.batch_alter_table("agent_decisions", schema=None) as batch_op:
        batch_op.drop_index("ix_agent_decisions_pool")

    op.drop_table("agent_decisions")
    op.drop_table("organizations")
    op.drop_table("leases")
    with op.batch_alter_table("idempotency_keys", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_idempotency_keys_created_at"))

    op.drop_table("idempotency_keys")
    op.drop_table("entitlements")
    op.drop_table("cycles")
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.drop_index("ix_audit_org_id")

    op.drop_table("audit_log")
