# >>> nbmemory >>>
# Loads the nbmemory magics (%%remember, %recall, %context, %memory) in every kernel.
# Written by `nbmemory install-ipython-config`; remove with `--uninstall`.
c.InteractiveShellApp.extensions.append("nbmemory")
# <<< nbmemory <<<
