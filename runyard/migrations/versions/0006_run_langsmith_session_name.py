"""run langsmith_session_name

The LangSmith project a run was traced to, as LangGraph's server reports it on the run.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03 14:00:00.000000
"""

from alembic import op
import sqlalchemy as sa

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('runs', sa.Column('langsmith_session_name', sa.String(255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('runs') as batch:
        batch.drop_column('langsmith_session_name')
