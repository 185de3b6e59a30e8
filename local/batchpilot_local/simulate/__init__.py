"""``batchpilot simulate``: what share weights, quota limits, capacity and recovery policies would do
to a workload, on a simulated fleet, before anyone deploys them.

Modules: :mod:`.scenario` (the file format), :mod:`.workload` (generated and recorded jobs),
:mod:`.engine` (the SimPy simulation), :mod:`.policies` (the only door to batchpilot's production
policies), :mod:`.results` (the figures), :mod:`.output` (text), :mod:`.report` (HTML),
:mod:`.run` (one scenario or two compared), :mod:`.command` (the CLI sub-command).
"""
