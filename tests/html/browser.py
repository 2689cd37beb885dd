"""Headless Chromium for the page tests (Debian's chromium package): load a local page with a
fresh profile and nothing fetched, dump its DOM or take a screenshot, and read the console
messages it logged. Python standard library only."""
import os
import re
import shutil
import subprocess
import tempfile

TIMEOUT_S = 120
CONSOLE = re.compile(r":CONSOLE[:(]\d*\)?\] (.*)")
# What would make a page depend on something outside itself.
EXTERNAL = re.compile(r"""(<script|<link|\bsrc\s*=|\bhref\s*=|url\(|@import)""", re.I)


def chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    raise RuntimeError("headless Chromium is needed: apt-get install chromium")


def run_chromium(page, work, *mode, window=(1200, 1400)):
    """Runs headless Chromium on a local page with a fresh profile; returns (stdout, stderr)."""
    profile = tempfile.mkdtemp(prefix="profile-", dir=work)
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", f"--user-data-dir={profile}", "--hide-scrollbars",
           f"--window-size={window[0]},{window[1]}", "--enable-logging=stderr", "--v=0",
           *mode, "file://" + os.path.abspath(page)]
    proc = subprocess.run(cmd, capture_output=True, timeout=TIMEOUT_S, text=True,
                          errors="replace", stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise RuntimeError(f"chromium exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc.stdout, proc.stderr


def console_messages(stderr):
    return [m.group(1) for m in CONSOLE.finditer(stderr)]
