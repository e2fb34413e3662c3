"""Switch drivers: how a controller reaches a switch, whatever the target.

  SwitchDriver        the interface (base.py): registers, tables, multicast
                      groups, counters, packets to and from the controller
  NetkvSwitchDriver   netkv-switch's control socket (netkv_switch.py)

The simulator's driver and the P4Runtime driver implement the same
``SwitchDriver``; a controller written against it runs on every target.
"""

from netkv.drivers.base import CpuPacket, DriverError, SwitchDriver

__all__ = ["CpuPacket", "DriverError", "SwitchDriver"]
