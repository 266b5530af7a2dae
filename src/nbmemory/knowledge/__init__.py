"""What an agent knows beyond its log: facts, consolidation of old messages into
summaries and facts (with the offline summarizer), and AGENTS.md as memories."""
