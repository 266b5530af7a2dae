"""The notebook layer: the magics and widgets over :class:`~nbmemory.Memory`.

* :mod:`.magics` — ``%%remember``, ``%recall``, ``%context``, ``%memory``;
* :mod:`.parsers` — their options; :mod:`.display` — their rich results;
* :mod:`.transformers` — questions to the magics are not ``?`` help;
* :mod:`.widgets` — the threshold tuner and the memory explorer;
* :mod:`.ipython_config` — the kernel config snippet that loads the extension.
"""
