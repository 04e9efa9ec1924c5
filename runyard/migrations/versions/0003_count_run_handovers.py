"""count run handovers

A run handed back on purpose (graceful shutdown) is not a lost attempt: `handovers` counts
those, so retries are bounded by `attempt - handovers`.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 20:30:00.000000
"""

from alembic import op
import sqlalchemy as sa

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        'runs', sa.Column('handovers', sa.Integer(), nullable=False, server_default='0')
    )


def downgrade() -> None:
    with op.batch_alter_table('runs') as batch:
        batch.drop_column('handovers')
