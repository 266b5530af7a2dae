"""The event log: storing, reading, changing and deleting events, their vectors,
and the Astreus API's view of the events that are memories."""
