"""schema compatibility

Which code serves on the schema: a row per migration from this one on, naming the oldest
code revision that still serves on the schema the migration leaves (its `serves_code_from`,
written by env.py as the migration is applied). An instance that finds a revision it does
not know, written by a newer release, reads here whether it may serve on it.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-08 10:00:00.000000
"""

from alembic import op
import sqlalchemy as sa

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None
# Code before 0009 does not read this table: it refuses every schema it does not know.
serves_code_from = '0009'


def upgrade() -> None:
    op.create_table('schema_compatibility',
    sa.Column('revision', sa.String(length=32), nullable=False),
    sa.Column('serves_code_from', sa.String(length=32), nullable=False),
    sa.Column('recorded_at', sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    sa.PrimaryKeyConstraint('revision')
    )


def downgrade() -> None:
    op.drop_table('schema_compatibility')
