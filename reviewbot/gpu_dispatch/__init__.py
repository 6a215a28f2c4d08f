"""GPU dispatch modes beyond the service's built-in `local` one.

Importing `reviewbot.gpu_dispatch.actions` registers the `actions` mode with the service: the
dispatcher, the `workflow_run` webhook handler and its job kinds. `outcome` turns a
`results.json` into the service's `GpuOutcome`; `artifacts` fetches it from a workflow run.
"""
