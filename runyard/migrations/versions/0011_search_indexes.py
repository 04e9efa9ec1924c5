"""search indexes

Indexes that keep the documented searches flat as the data grows: metadata containment
(`@>`, every metadata filter and auth filter) on threads, assistants and crons, and threads
in updated_at order. PostgreSQL builds them CONCURRENTLY, so a busy table keeps taking
writes meanwhile; SQLite gets the updated_at index only (it cannot use the others).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-14 09:00:00.000000
"""

from typing import Any

from alembic import op
import sqlalchemy as sa

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None
# Adds indexes only: code from 0009 on serves on it.
serves_code_from = '0009'

_CONTAINMENT = {'postgresql_using': 'gin', 'postgresql_ops': {'metadata': 'jsonb_path_ops'}}
# (name, table, columns, PostgreSQL options); options None: on SQLite too.
INDEXES: list[tuple[str, str, list[str], dict[str, Any] | None]] = [
    ('ix_threads_metadata', 'threads', ['metadata'], _CONTAINMENT),
    ('ix_threads_updated_at', 'threads', ['updated_at', 'thread_id'], None),
    ('ix_assistants_metadata', 'assistants', ['metadata'], _CONTAINMENT),
    ('ix_crons_metadata', 'crons', ['metadata'], _CONTAINMENT),
]


def upgrade() -> None:
    if op.get_bind().dialect.name != 'postgresql':
        for name, table, columns, options in INDEXES:
            if options is None:
                op.create_index(name, table, columns, if_not_exists=True)
        return
    with op.get_context().autocommit_block():
        for name, table, columns, options in INDEXES:
            _drop_if_invalid(name)
            op.create_index(
                name,
                table,
                columns,
                postgresql_concurrently=True,
                if_not_exists=True,
                **(options or {}),
            )


def _drop_if_invalid(name: str) -> None:
    # A CONCURRENTLY build that was interrupted leaves an invalid index behind, which
    # IF NOT EXISTS would keep: drop it, so running the migration again finishes the job.
    invalid = op.get_bind().execute(
        sa.text(
            'SELECT 1 FROM pg_index JOIN pg_class ON pg_class.oid = pg_index.indexrelid '
            'WHERE pg_class.relname = :name AND NOT pg_index.indisvalid'
        ),
        {'name': name},
    )
    if invalid.first() is not None:
        op.drop_index(name, postgresql_concurrently=True, if_exists=True)


def downgrade() -> None:
    if op.get_bind().dialect.name != 'postgresql':
        for name, table, _columns, options in INDEXES:
            if options is None:
                op.drop_index(name, table_name=table, if_exists=True)
        return
    with op.get_context().autocommit_block():
        for name, table, _columns, _options in INDEXES:
            op.drop_index(name, table_name=table, postgresql_concurrently=True, if_exists=True)
