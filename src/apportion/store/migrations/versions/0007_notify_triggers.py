"""PostgreSQL only: triggers that NOTIFY the server processes of what changed, so
several processes on one database wake their streams, drop revoked tokens from
their caches and wake the scheduler at once (``store/notify.py``):

- ``apportion_events``: payload the organization id, once per organization per
  statement that inserts events (PostgreSQL folds identical notifications of one
  transaction into one);
- ``apportion_logs``: payload the workload id, per statement that inserts log chunks;
- ``apportion_tokens``: payload the token id, when a token is revoked, changes its
  expiry, role, teams or pool, or is deleted;
- ``apportion_poke``: payload the organization id, when its scheduling version moves
  for anything but a committed plan (a plan commit also sets ``last_cycle``).

Notifications are sent at commit, never for a rolled-back transaction. On SQLite
(one writer process) this revision does nothing; streams there poll.

Revision ID: 0007
Revises: 0006

"""

from collections.abc import Sequence

from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_UP = [
    """
    CREATE OR REPLACE FUNCTION apportion_notify_events() RETURNS trigger AS $$
    DECLARE org bigint;
    BEGIN
      FOR org IN SELECT DISTINCT org_id FROM inserted LOOP
        PERFORM pg_notify('apportion_events', org::text);
      END LOOP;
      RETURN NULL;
    END $$ LANGUAGE plpgsql
    """,
    """
    CREATE TRIGGER apportion_events_notify AFTER INSERT ON events
    REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT
    EXECUTE FUNCTION apportion_notify_events()
    """,
    """
    CREATE OR REPLACE FUNCTION apportion_notify_logs() RETURNS trigger AS $$
    DECLARE wid bigint;
    BEGIN
      FOR wid IN SELECT DISTINCT workload_id FROM inserted LOOP
        PERFORM pg_notify('apportion_logs', wid::text);
      END LOOP;
      RETURN NULL;
    END $$ LANGUAGE plpgsql
    """,
    """
    CREATE TRIGGER apportion_logs_notify AFTER INSERT ON log_chunks
    REFERENCING NEW TABLE AS inserted FOR EACH STATEMENT
    EXECUTE FUNCTION apportion_notify_logs()
    """,
    """
    CREATE OR REPLACE FUNCTION apportion_notify_tokens() RETURNS trigger AS $$
    BEGIN
      IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('apportion_tokens', OLD.id);
      ELSIF OLD.revoked_at IS DISTINCT FROM NEW.revoked_at
         OR OLD.expires_at IS DISTINCT FROM NEW.expires_at
         OR OLD.role IS DISTINCT FROM NEW.role
         OR OLD.teams::text IS DISTINCT FROM NEW.teams::text
         OR OLD.pool IS DISTINCT FROM NEW.pool THEN
        PERFORM pg_notify('apportion_tokens', NEW.id);
      END IF;
      RETURN NULL;
    END $$ LANGUAGE plpgsql
    """,
    """
    CREATE TRIGGER apportion_tokens_notify AFTER UPDATE OR DELETE ON tokens
    FOR EACH ROW EXECUTE FUNCTION apportion_notify_tokens()
    """,
    """
    CREATE OR REPLACE FUNCTION apportion_notify_poke() RETURNS trigger AS $$
    BEGIN
      PERFORM pg_notify('apportion_poke', NEW.id::text);
      RETURN NULL;
    END $$ LANGUAGE plpgsql
    """,
    """
    CREATE TRIGGER apportion_poke_notify AFTER UPDATE OF sched_version ON organizations
    FOR EACH ROW WHEN (OLD.sched_version IS DISTINCT FROM NEW.sched_version
                       AND OLD.last_cycle IS NOT DISTINCT FROM NEW.last_cycle)
    EXECUTE FUNCTION apportion_notify_poke()
    """,
]

_DOWN = [
    "DROP TRIGGER IF EXISTS apportion_poke_notify ON organizations",
    "DROP TRIGGER IF EXISTS apportion_tokens_notify ON tokens",
    "DROP TRIGGER IF EXISTS apportion_logs_notify ON log_chunks",
    "DROP TRIGGER IF EXISTS apportion_events_notify ON events",
    "DROP FUNCTION IF EXISTS apportion_notify_poke()",
    "DROP FUNCTION IF EXISTS apportion_notify_tokens()",
    "DROP FUNCTION IF EXISTS apportion_notify_logs()",
    "DROP FUNCTION IF EXISTS apportion_notify_events()",
]


def upgrade() -> None:
    """Upgrade schema."""
    if op.get_bind().dialect.name != "postgresql":
        return
    for statement in _UP:
        op.execute(statement)


def downgrade() -> None:
    """Downgrade schema."""
    if op.get_bind().dialect.name != "postgresql":
        return
    for statement in _DOWN:
        op.execute(statement)
