"""Workflows of many agent steps that survive their process and spread over machines.

`step` (`Step`, `parallel`, `StepAbort`) and `workflow` (`Workflow`, `as_workflow`) are what a user writes;
`context` (`Context`, `StepContext`, `Updates`) is what steps share; `execution` is what the steps mean on
any `executor` (the protocol); `durable` is the DBOS executor, `inprocess` the in-process one; `engine`
launches DBOS, `isolation` gives parallel writers their own workspace, `runs` reads runs back, `signals`
handles SIGTERM and Ctrl-C during a run.
"""
