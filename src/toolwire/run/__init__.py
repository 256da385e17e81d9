"""What every job's run uses: its start (``start``), its end (``end``), steps, phases and
progress, interrupts, and the checks made before a run or a schedule starts (``preflight``).

Nothing here imports a job (librarian, agent), the job table or Prefect.
"""
