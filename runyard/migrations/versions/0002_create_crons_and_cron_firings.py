"""create crons and cron_firings

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 10:00:00.000000
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None

JSON_TYPE = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.create_table('crons',
    sa.Column('cron_id', sa.String(length=64), nullable=False),
    sa.Column('assistant_id', sa.String(length=64), nullable=False),
    sa.Column('thread_id', sa.String(length=64), nullable=True),
    sa.Column('user_id', sa.String(length=255), nullable=True),
    sa.Column('schedule', sa.String(length=255), nullable=False),
    sa.Column('timezone', sa.String(length=64), nullable=True),
    sa.Column('payload', JSON_TYPE, nullable=False),
    sa.Column('metadata', JSON_TYPE, nullable=False),
    sa.Column('on_run_completed', sa.String(length=16), nullable=True),
    sa.Column('enabled', sa.Boolean(), nullable=False),
    sa.Column('end_time', sa.DateTime(timezone=True), nullable=True),
    sa.Column('next_run_date', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    sa.ForeignKeyConstraint(['assistant_id'], ['assistants.assistant_id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['thread_id'], ['threads.thread_id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('cron_id')
    )
    op.create_index('ix_crons_assistant_id', 'crons', ['assistant_id'], unique=False)
    op.create_index('ix_crons_enabled_next_run_date', 'crons', ['enabled', 'next_run_date'], unique=False)
    op.create_index('ix_crons_thread_id', 'crons', ['thread_id'], unique=False)
    op.create_table('cron_firings',
    sa.Column('cron_id', sa.String(length=64), nullable=False),
    sa.Column('scheduled_for', sa.DateTime(timezone=True), nullable=False),
    sa.Column('claimed_by', sa.String(length=128), nullable=False),
    sa.Column('claimed_at', sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    sa.Column('run_id', sa.String(length=64), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(['cron_id'], ['crons.cron_id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('cron_id', 'scheduled_for')
    )
    op.create_index('ix_cron_firings_claimed_at', 'cron_firings', ['claimed_at'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_cron_firings_claimed_at', table_name='cron_firings')
    op.drop_table('cron_firings')
    op.drop_index('ix_crons_thread_id', table_name='crons')
    op.drop_index('ix_crons_enabled_next_run_date', table_name='crons')
    op.drop_index('ix_crons_assistant_id', table_name='crons')
    op.drop_table('crons')
