"""console

What the operator console reads: each instance's own record (`instances`: host, version,
start, last heartbeat, slots, draining, and a drain asked of it by an operator), the
instance that last claimed a run (`runs.last_owner`, kept after the run ends, for the
per-instance charts), and an index on `runs.ended_at` that bounds the charts' read to the
last hour.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-13 09:00:00.000000
"""

from alembic import op
import sqlalchemy as sa

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None
# A new table, a nullable column and an index: code from 0009 on serves on it.
serves_code_from = '0009'


def upgrade() -> None:
    op.create_table(
        'instances',
        sa.Column('instance_id', sa.String(length=128), nullable=False),
        sa.Column('host', sa.String(length=255), nullable=False),
        sa.Column('version', sa.String(length=64), nullable=False),
        sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('heartbeat_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('slots', sa.Integer(), nullable=False),
        sa.Column('slots_used', sa.Integer(), nullable=False),
        sa.Column('draining', sa.Boolean(), nullable=False),
        sa.Column('drain_requested_by', sa.String(length=255), nullable=True),
        sa.PrimaryKeyConstraint('instance_id'),
    )
    op.add_column('runs', sa.Column('last_owner', sa.String(length=128), nullable=True))
    if op.get_context().dialect.name == 'postgresql':
        with op.get_context().autocommit_block():
            op.create_index(
                'ix_runs_ended_at', 'runs', ['ended_at'], postgresql_concurrently=True
            )
    else:
        op.create_index('ix_runs_ended_at', 'runs', ['ended_at'])


def downgrade() -> None:
    op.drop_index('ix_runs_ended_at', table_name='runs')
    with op.batch_alter_table('runs') as batch:
        batch.drop_column('last_owner')
    op.drop_table('instances')
