"""Long-term memory: the Astreus memories, facts, macros, allowed prefixes,
scheduled tasks and consolidation, each a small class handed the core."""
