"""Mininet plumbing for target=mininet (netkv.targets.mininet).

  cleanup   run tags, recorded pids, ``clean()`` for what crashed runs left
  rack      RackTopo-style rack: hosts, the netkv-switch node, kvservers, kvclients
"""
