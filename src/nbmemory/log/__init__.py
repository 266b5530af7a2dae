"""The store's state: the event log, vectors, sessions, audit trail, AGENTS.md,
export/import and the SQLite import, each a small class handed the core."""
