"""Prefect entry point for the librarian (`prefect deploy flows/librarian.py:librarian`).

Thin on purpose: the flow itself lives in `toolwire.flows.job_flows`, so the CLI, tests
and deployments all run the same code.
"""

from toolwire.flows import librarian_flow as librarian
from toolwire.flows import run_librarian_flow

__all__ = ["librarian"]

if __name__ == "__main__":
    import sys

    # The flow's state says ok or the error code; the run itself comes back in process.
    result = run_librarian_flow(sys.argv[1] if len(sys.argv) > 1 else "specs/librarian.yaml")
    print(result.run_id, result.status, result.error_code or "")
