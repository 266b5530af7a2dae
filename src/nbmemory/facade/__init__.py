"""The facade's parts: how a call of ``Memory`` runs (:mod:`.calls`), the groups of
methods ``mem.facts``, ``mem.tasks`` ... (:mod:`.groups`, :mod:`.research_group`),
and the older flat names and the Astreus API's names (:mod:`.aliases`)."""
