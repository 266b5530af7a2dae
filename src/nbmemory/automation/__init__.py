"""What an agent runs with less asking: learnt tool macros, allowed command
prefixes, and scheduled tasks (cron or plain English)."""
