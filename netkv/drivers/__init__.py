"""Switch drivers: how a controller reaches a switch, whatever the target.

  SwitchDriver        the interface (base.py): registers, tables, multicast
                      groups, counters, packets to and from the controller
  NetkvSwitchDriver   netkv-switch's control socket (netkv_switch.py)
  P4RuntimeDriver     what the P4 drivers share over P4Runtime (p4runtime.py):
    Bmv2Driver        BMv2, registers over its Thrift CLI (bmv2.py)
    TofinoDriver      Tofino, registers as P4Runtime entries (tofino.py; untested
                      on a Tofino: no SDE here)

The simulator's driver and the P4Runtime driver implement the same
``SwitchDriver``; a controller written against it runs on every target.
"""

from netkv.drivers.base import CpuPacket, DriverError, SwitchDriver

__all__ = ["CpuPacket", "DriverError", "SwitchDriver"]
