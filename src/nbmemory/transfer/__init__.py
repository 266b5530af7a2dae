"""Moving memories in and out of a store: the JSON export and import, and the
import of an agent's SQLite memory."""
