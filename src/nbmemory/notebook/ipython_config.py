"""Install the kernel config snippet that loads ``%load_ext nbmemory`` in every kernel.

IPython reads one ``ipython_kernel_config.py`` per profile directory (no ``.d``
merging), so the snippet is added to the user's own file between two marker
lines, never over it: created when missing, appended when the file has other
settings, rewritten in place when an older copy of the block is there, removed
again with :func:`uninstall`.  The snippet uses ``extensions.append`` so an
``extensions`` list the user set keeps its entries.

IPython is imported only to find the profile directory; this module is what
``nbmemory install-ipython-config`` runs.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..atomic import write_text_atomically
from ..errors import InvalidInput

BEGIN = "# >>> nbmemory >>>"
END = "# <<< nbmemory <<<"
CONFIG_FILE = "ipython_kernel_config.py"

#: The block written into ``ipython_kernel_config.py`` (also ``jupyter-config/``'s file).
SNIPPET = f"""{BEGIN}
# Loads the nbmemory magics (%%remember, %recall, %context, %memory) in every kernel.
# Written by `nbmemory install-ipython-config`; remove with `--uninstall`.
c.InteractiveShellApp.extensions.append("nbmemory")
{END}
"""

_BLOCK = re.compile(rf"^{re.escape(BEGIN)}\n.*?^{re.escape(END)}\n?", re.S | re.M)
_OWN_CONFIG = re.compile(r"""^[^#\n]*extensions[^#\n]*["']nbmemory["']""", re.M)


def profile_config_path(profile: str = "default", ipython_dir: str | None = None) -> Path:
    """Where the kernel config of ``profile`` lives (``~/.ipython/profile_<name>/...``)."""
    if not profile or not re.fullmatch(r"[\w.\-]+", profile):
        raise InvalidInput(f"profile must be a plain name like 'default', got {profile!r}")
    if ipython_dir is None:
        try:
            from IPython.paths import get_ipython_dir
        except ImportError as exc:  # pragma: no cover - IPython is in the notebook extra
            raise InvalidInput(
                "IPython is not installed: pip install 'nbmemory[notebook]'"
            ) from exc
        ipython_dir = get_ipython_dir()
    return Path(ipython_dir).expanduser() / f"profile_{profile}" / CONFIG_FILE


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(
            f"{path} is not UTF-8 text; nothing was changed. Add this yourself:\n{SNIPPET}"
        ) from None


def _check_markers(path: Path, text: str) -> None:
    if text.count(BEGIN) != text.count(END) or text.count(BEGIN) > 1:
        raise InvalidInput(
            f"{path} has unmatched or repeated '{BEGIN}' / '{END}' lines; nothing was "
            "changed. Fix or remove them by hand, then run the command again."
        )


def install(profile: str = "default", ipython_dir: str | None = None) -> tuple[Path, str]:
    """Add the snippet to the profile's kernel config; returns (path, what happened).

    What happened is ``"created"``, ``"appended"``, ``"updated"`` (an older block
    was replaced in place), ``"unchanged"`` (already there), or ``"yours"`` (the
    file already loads nbmemory outside our block; left alone).
    """
    path = profile_config_path(profile, ipython_dir)
    if not path.exists():
        write_text_atomically(path, SNIPPET)
        return path, "created"
    text = _read(path)
    _check_markers(path, text)
    match = _BLOCK.search(text)
    if match:
        if match.group(0).rstrip("\n") == SNIPPET.rstrip("\n"):
            return path, "unchanged"
        write_text_atomically(path, text[: match.start()] + SNIPPET + text[match.end() :])
        return path, "updated"
    if _OWN_CONFIG.search(text):
        return path, "yours"
    separator = (
        "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
    )
    write_text_atomically(path, text + separator + SNIPPET)
    return path, "appended"


def uninstall(profile: str = "default", ipython_dir: str | None = None) -> tuple[Path, str]:
    """Remove our block; returns (path, ``"removed"`` | ``"deleted"`` | ``"absent"``).

    ``"deleted"``: the file held nothing but our block, so it is gone.
    """
    path = profile_config_path(profile, ipython_dir)
    if not path.exists():
        return path, "absent"
    text = _read(path)
    _check_markers(path, text)
    match = _BLOCK.search(text)
    if not match:
        return path, "absent"
    rest = text[: match.start()].rstrip("\n") + "\n" + text[match.end() :].lstrip("\n")
    if not rest.strip():
        path.unlink()
        return path, "deleted"
    write_text_atomically(path, rest.lstrip("\n") if not text[: match.start()].strip() else rest)
    return path, "removed"


MESSAGES = {
    "created": "created {path} with the nbmemory block",
    "appended": "added the nbmemory block at the end of {path}; your settings are untouched",
    "updated": "updated the nbmemory block in {path}",
    "unchanged": "{path} already loads nbmemory; nothing to do",
    "yours": "{path} already loads nbmemory with your own line; left it alone",
    "removed": "removed the nbmemory block from {path}",
    "deleted": "removed {path}: it held only the nbmemory block",
    "absent": "{path} has no nbmemory block; nothing to remove",
}
