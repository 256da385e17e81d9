"""Whether another process can read a store file right now (``toolwire sql``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def other_process_reads(db: Path) -> subprocess.CompletedProcess[str]:
    """`toolwire sql` from another process, waiting at most half a second for the file."""
    env = {**os.environ, "TOOLWIRE_DB_LOCK_TIMEOUT_S": "0.5"}
    return subprocess.run(
        [sys.executable, "-m", "toolwire", "sql", "--db", str(db), "SELECT count(*) FROM runs"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
