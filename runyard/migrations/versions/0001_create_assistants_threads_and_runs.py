"""create assistants, threads and runs

Revision ID: 0001
Revises: 
Create Date: 2026-11-29 16:26:47.466707
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None

JSON_TYPE = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.create_table('assistants',
    sa.Column('assistant_id', sa.String(length=64), nullable=False),
    sa.Column('graph_id', sa.String(length=255), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('description', sa.Text(), nullable=True),
    sa.Column('config', JSON_TYPE, nullable=False),
    sa.Column('context', JSON_TYPE, nullable=False),
    sa.Column('metadata', JSON_TYPE, nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    sa.PrimaryKeyConstraint('assistant_id')
    )
    op.create_index('ix_assistants_graph_id', 'assistants', ['graph_id'], unique=False)
    op.create_table('threads',
    sa.Column('thread_id', sa.String(length=64), nullable=False),
    sa.Column('metadata', JSON_TYPE, nullable=False),
    sa.Column('config', JSON_TYPE, nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('values', JSON_TYPE, nullable=True),
    sa.Column('interrupts', JSON_TYPE, nullable=False),
    sa.Column('error', JSON_TYPE, nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    sa.PrimaryKeyConstraint('thread_id')
    )
    op.create_index('ix_threads_created_at', 'threads', ['created_at'], unique=False)
    op.create_index('ix_threads_status', 'threads', ['status'], unique=False)
    op.create_table('assistant_versions',
    sa.Column('assistant_id', sa.String(length=64), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('graph_id', sa.String(length=255), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('description', sa.Text(), nullable=True),
    sa.Column('config', JSON_TYPE, nullable=False),
    sa.Column('context', JSON_TYPE, nullable=False),
    sa.Column('metadata', JSON_TYPE, nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    sa.ForeignKeyConstraint(['assistant_id'], ['assistants.assistant_id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('assistant_id', 'version')
    )
    op.create_table('runs',
    sa.Column('run_id', sa.String(length=64), nullable=False),
    sa.Column('thread_id', sa.String(length=64), nullable=False),
    sa.Column('assistant_id', sa.String(length=64), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('metadata', JSON_TYPE, nullable=False),
    sa.Column('kwargs', JSON_TYPE, nullable=False),
    sa.Column('multitask_strategy', sa.String(length=16), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    sa.Column('scheduled_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('ended_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('owner', sa.String(length=128), nullable=True),
    sa.Column('lease_expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('attempt', sa.Integer(), nullable=False),
    sa.Column('cancel_action', sa.String(length=16), nullable=True),
    sa.Column('output', JSON_TYPE, nullable=True),
    sa.Column('error', JSON_TYPE, nullable=True),
    sa.Column('idempotency_key', sa.String(length=255), nullable=True),
    sa.Column('request_hash', sa.String(length=64), nullable=True),
    sa.Column('webhook', sa.Text(), nullable=True),
    sa.Column('on_completion', sa.String(length=16), nullable=True),
    sa.Column('temporary', sa.Boolean(), nullable=False),
    sa.ForeignKeyConstraint(['thread_id'], ['threads.thread_id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('run_id'),
    sa.UniqueConstraint('idempotency_key')
    )
    op.create_index('ix_runs_status_lease', 'runs', ['status', 'lease_expires_at'], unique=False)
    op.create_index('ix_runs_thread_status_created', 'runs', ['thread_id', 'status', 'created_at'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_runs_thread_status_created', table_name='runs')
    op.drop_index('ix_runs_status_lease', table_name='runs')
    op.drop_table('runs')
    op.drop_table('assistant_versions')
    op.drop_index('ix_threads_status', table_name='threads')
    op.drop_index('ix_threads_created_at', table_name='threads')
    op.drop_table('threads')
    op.drop_index('ix_assistants_graph_id', table_name='assistants')
    op.drop_table('assistants')
