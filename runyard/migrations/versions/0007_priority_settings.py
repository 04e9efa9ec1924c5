"""priority settings

A thread's priority settings (LangGraph's Priority API: `priority` -5..5 and a fairness
group), stored at its first run, and the settings each run was created with.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03 19:45:00.000000
"""

from alembic import op
import sqlalchemy as sa

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('threads', sa.Column('priority', sa.Integer(), nullable=True))
    op.add_column('threads', sa.Column('fairness_group', sa.String(256), nullable=True))
    op.add_column(
        'runs', sa.Column('priority', sa.Integer(), nullable=False, server_default='0')
    )
    op.add_column(
        'runs',
        sa.Column('fairness_group', sa.String(256), nullable=False, server_default='default'),
    )


def downgrade() -> None:
    with op.batch_alter_table('runs') as batch:
        batch.drop_column('fairness_group')
        batch.drop_column('priority')
    with op.batch_alter_table('threads') as batch:
        batch.drop_column('fairness_group')
        batch.drop_column('priority')
