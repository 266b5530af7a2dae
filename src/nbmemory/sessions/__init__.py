"""Sessions an agent resumes after a restart, the audit trail of every change,
and forgetting a user or a session in it."""
