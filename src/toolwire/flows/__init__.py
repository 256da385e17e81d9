"""The Prefect edge: every Prefect import in toolwire is under this package.

``job_flows`` runs a job as a flow (its steps as tasks), ``model_call`` wraps a
provider so each model call is a retrying task, ``batch`` fans one spec out over
many workspaces, ``schedule`` and ``schedule_watch`` serve specs' cron schedules.
The flow entry points keep their names here (deployments name
``toolwire.flows:librarian_flow``).

Prefect reads its settings once, when it is imported: the package sets toolwire's
defaults before any of its modules imports Prefect.
"""

from toolwire.prefect_settings import configure_prefect_env

configure_prefect_env()

from toolwire.flows.job_flows import agent_flow, librarian_flow, run_flow, run_librarian_flow  # noqa: E402

__all__ = ["agent_flow", "librarian_flow", "run_flow", "run_librarian_flow"]
