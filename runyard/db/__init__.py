"""Engine, tables, dialect differences and every SQL statement Runyard issues."""
