"""target=testbed: a rack of real hosts reached over SSH.

  inventory  the hosts (``conf/inventory/<name>.yaml``), validated by pydantic
  ssh        OpenSSH's client with pinned host keys, multiplexed, sockets forwarded
  rack       ``SshRack``: the switch back-end, kvservers and kvclients started
             over SSH, stopped on success, error and Ctrl-C
  netns      a rack of network namespaces on this machine, each with its own
             sshd: the testbed that tests and CI run on
"""
