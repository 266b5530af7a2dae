"""The keyword index (BM25 over memory content), in modules of one job each.

* :mod:`.tokens` — the tokeniser (words, stop words, Snowball stems);
* :mod:`.features` — speaker, time and form of a text, read when it is indexed.
"""
