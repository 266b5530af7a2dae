"""``nbmemory install-ipython-config``: load the magics in every kernel of a profile."""

from __future__ import annotations

import argparse
from typing import Any

from ..notebook.ipython_config import MESSAGES, SNIPPET, install, uninstall


def cmd_install_ipython_config(args: argparse.Namespace) -> int:
    """``nbmemory install-ipython-config``: add (or remove) the kernel config snippet."""
    if args.print:
        print(SNIPPET, end="")
        return 0
    action = uninstall if args.uninstall else install
    path, what = action(args.profile, args.ipython_dir)
    print(MESSAGES[what].format(path=path))
    if what in ("created", "appended", "updated"):
        print("new kernels load %%remember, %recall, %context and %memory; restart running ones")
    return 0


def add_command(sub: Any) -> None:
    """Register ``install-ipython-config`` on the ``nbmemory`` CLI's sub-parsers."""
    cmd = sub.add_parser(
        "install-ipython-config",
        help="load the nbmemory magics in every Jupyter kernel of an IPython profile",
        description=(
            "Add a marked block to <ipython dir>/profile_<PROFILE>/ipython_kernel_config.py "
            "that loads the nbmemory extension. Your own settings in that file are kept; "
            "running it again changes nothing; --uninstall removes the block."
        ),
    )
    cmd.add_argument("--profile", default="default", help="IPython profile (default: default)")
    cmd.add_argument(
        "--ipython-dir", default=None, help="IPython directory (default: $IPYTHONDIR or ~/.ipython)"
    )
    cmd.add_argument("--uninstall", action="store_true", help="remove the block again")
    cmd.add_argument("--print", action="store_true", help="print the snippet, change nothing")
    cmd.set_defaults(func=cmd_install_ipython_config)
