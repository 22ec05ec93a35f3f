"""Running a spec's plan: the orchestrator and the parts it composes.

`orchestrator.Orchestrator` runs a plan locally; `ci.aggregate` merges the results of CI jobs
with the same parts. `scheduler` holds the rules, `backends` where workers run, `verify` and
`land` what happens to their results, `record` and `session` what surrounds a run.
"""
