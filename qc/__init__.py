"""Quality control algorithms: pure code over plain data (no Flask, no database)."""
