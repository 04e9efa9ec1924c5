"""threads: context, state_updated_at and time-to-live columns

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 20:30:00.000000
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None

JSON_TYPE = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table('threads') as batch:
        batch.add_column(sa.Column('context', JSON_TYPE, nullable=True))
        # Nullable: SQLite cannot add a column whose default is the clock.
        batch.add_column(sa.Column('state_updated_at', sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column('ttl_strategy', sa.String(length=16), nullable=True))
        batch.add_column(sa.Column('ttl_minutes', sa.Float(), nullable=True))
        batch.add_column(sa.Column('expires_at', sa.DateTime(timezone=True), nullable=True))
    # Existing threads last changed their state at their last update, as far as is known.
    op.execute('UPDATE threads SET state_updated_at = updated_at')
    op.create_index('ix_threads_expires_at', 'threads', ['expires_at'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_threads_expires_at', table_name='threads')
    with op.batch_alter_table('threads') as batch:
        batch.drop_column('expires_at')
        batch.drop_column('ttl_minutes')
        batch.drop_column('ttl_strategy')
        batch.drop_column('state_updated_at')
        batch.drop_column('context')
