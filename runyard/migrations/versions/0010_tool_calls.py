"""tool calls

At-most-once tool calls (`runyard.tools.at_most_once`): a decorated call's intent and
outcome, keyed by the call within its thread and deleted with the thread. A new table only.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-12 09:00:00.000000
"""

from alembic import op
import sqlalchemy as sa

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None
# Adds a table only: code from 0009 on serves on it.
serves_code_from = '0009'


def upgrade() -> None:
    op.create_table(
        'tool_calls',
        sa.Column('thread_id', sa.String(length=64), nullable=False),
        sa.Column('call_key', sa.String(length=36), nullable=False),
        sa.Column('checkpoint_ns', sa.Text(), nullable=False),
        sa.Column('tool_call_id', sa.Text(), nullable=False),
        sa.Column('tool', sa.Text(), nullable=False),
        sa.Column('run_id', sa.String(length=64), nullable=False),
        sa.Column('attempt', sa.Integer(), nullable=False),
        sa.Column('status', sa.String(length=16), nullable=False),
        sa.Column('result_type', sa.String(length=64), nullable=True),
        sa.Column('result', sa.LargeBinary(), nullable=True),
        sa.Column('result_bytes', sa.Integer(), nullable=True),
        sa.Column(
            'created_at', sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column(
            'updated_at', sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(['thread_id'], ['threads.thread_id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('thread_id', 'call_key'),
    )


def downgrade() -> None:
    op.drop_table('tool_calls')
