"""group caps

Per-fairness-group caps on dispatch: why a pending run is held back (`held_back`), and the
indexes that count a group's running runs and its starts in the last minute under a cap.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-05 09:00:00.000000
"""

from alembic import op
import sqlalchemy as sa

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('runs', sa.Column('held_back', sa.Text(), nullable=True))
    op.create_index('ix_runs_group_status', 'runs', ['fairness_group', 'status'], unique=False)
    op.create_index(
        'ix_runs_group_started', 'runs', ['fairness_group', 'started_at'], unique=False
    )


def downgrade() -> None:
    op.drop_index('ix_runs_group_started', table_name='runs')
    op.drop_index('ix_runs_group_status', table_name='runs')
    with op.batch_alter_table('runs') as batch:
        batch.drop_column('held_back')
