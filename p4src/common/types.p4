/*
 * types.p4 - what every netkv program (v1model and TNA) shares: the controller
 * (packet-in / packet-out) headers, the one headers struct, the metadata,
 * the rack addressing plan and the forwarding modes.
 *
 * One headers struct serves hash, pegasus, netcache and kvswitch: a program simply
 * never validates the headers of the other protocols (its parser does not
 * enter them; see parser.p4 and the NETKV_PARSE_* switches).
 *
 * Requires <core.p4>, the architecture (<v1model.p4> or <tna.p4>) and headers.p4
 * to be included first. NETKV_TNA (tna/shell.p4) adds the bridge header.
 */
#ifndef NETKV_TYPES_P4
#define NETKV_TYPES_P4

/* ---- ports ------------------------------------------------------------------ */
/* CPU_PORT (simple_switch_grpc --cpu-port), CPU_CLONE_SESSION (to_cpu copies),
 * FLOOD_MCAST_GRP (every data port: non-IP broadcast is flooded through it, as
 * netkv-switch floods; protocol groups use other ids) and the packet_in
 * reasons PKTIN_*: constants.p4 (spec/constants.toml). */

/* ---- the rack addressing plan (hostapps/include/netkv/io.h) ------------------ */
/* node n: IPv4 10.0.0.0 + n + 1, MAC 02:00:00:00:HH:LL with HHLL = n + 1 */
const bit<32> NODE_NET = 0x0A000000;
const bit<32> NODE_NET_MASK = 0xFF000000;
const bit<32> NODE_MAX = 65000;             /* NK_NODE_MAX */
const bit<48> NODE_MAC_BASE = 0x020000000000;
const bit<16> NODE_NONE = 0xFFFF;           /* NK_NODE_NONE */

/* ---- the controller's headers -------------------------------------------------- */

@controller_header("packet_in")
header packet_in_t {
    bit<16> ingress_port;   /* where the original packet entered */
    bit<8>  reason;         /* PKTIN_* */
    bit<8>  pad;
}

/* A packet-out runs through the pipeline like any received packet
 * (netkv-switch's "from_cpu"), unless `direct` is 1: then it leaves on
 * egress_port untouched. */
@controller_header("packet_out")
header packet_out_t {
    bit<16> egress_port;
    bit<8>  direct;
    bit<8>  pad;
}

#ifdef NETKV_TNA
/* TNA: what the ingress hands the egress (tna/shell.p4): TNA metadata does
 * not cross the traffic manager, so it travels as a header in front. */
header netkv_bridge_t {
    bit<16> in_port;        /* the rack port the packet entered on */
    bit<8>  cpu_reason;
    bit<3>  fwd;
    bit<5>  pad;
}
#endif

/* ---- headers ------------------------------------------------------------------------ */
struct headers_t {
#ifdef NETKV_TNA
    netkv_bridge_t   bridge;
#endif
    packet_out_t     packet_out;
    packet_in_t      packet_in;
    ethernet_t       ethernet;
    ipv4_t           ipv4;
    udp_t            udp;
    pegasus_t        pegasus;
    pegasus_pre_t    pegasus_pre;
    netcache_t       netcache;
    netcache_value_t[NETCACHE_VALUE_SLICES] nc_value;
    kvswitch_t       kvswitch;
    starcache_t      starcache;
    starcache_pre_t  starcache_pre;
    netmc_t          netmc;
    netmc_srv_t[NETMC_N] netmc_srv;
    netmc_pre_t      netmc_pre;
    netlr_t          netlr;
}

/* ---- forwarding decision (nk_actions.fwd) ------------------------------------------ */
const bit<3> FWD_DROP = 0;    /* NK_FWD_DROP */
const bit<3> FWD_NODE = 1;    /* node_fwd[meta.dst_node] -> port (NK_FWD_PORT) */
const bit<3> FWD_MCAST = 2;   /* NK_FWD_MCAST: standard_metadata.mcast_grp */
const bit<3> FWD_FLOOD = 3;   /* non-IP broadcast */
const bit<3> FWD_PORT = 4;    /* meta.out_port as is (packet-out direct) */

/* ---- the trust boundary (pipeline.h nk_origin_of, docs/security.md) --------------- *
 * Where a packet entered, never its addresses, decides what it may carry. A
 * client port may send requests only, and no switch-owned field. Server s is
 * behind port s (the rack plan), so a port < n_servers is a server's; each
 * program upgrades CLIENT to SERVER with its n_servers. NETKV_TRUSTED_PORT
 * (the C pipelines' param trusted_ports, one port here) is the inter-rack link. */
const bit<2> ORIGIN_CLIENT = 0;
const bit<2> ORIGIN_SERVER = 1;
const bit<2> ORIGIN_TRUSTED = 2;
#ifndef NETKV_TRUSTED_PORT
#define NETKV_TRUSTED_PORT 0x1FF     /* none */
#endif

struct metadata_t {
    /* where the packet came from (nk_pkt_meta) */
    bit<16> src_node;       /* NODE_NONE when outside the plan */
    bit<16> dst_node;       /* addressed node; a pipeline may rewrite it */
    bit<16> dst_node0;      /* dst_node as received */
    bit<1>  from_cpu;       /* arrived as a packet-out */
    bit<1>  is_proto;       /* UDP to/from the protocol's port: the pipeline runs */
    bit<1>  hdr_changed;    /* a parsed protocol header was edited: fix the UDP checksum */
    bit<1>  to_cpu;         /* clone a copy to the controller */
    bit<1>  switch_reply;   /* the switch answered the request itself */
    bit<3>  fwd;            /* FWD_* */
    bit<1>  node_hit;       /* node_fwd matched */
    bit<9>  out_port;       /* FWD_PORT / node_fwd result */
    bit<8>  nc_slices;      /* NetCache value slices still to extract */
    bit<8>  mc_srv_left;    /* NetMC SRV entries still to extract */
    bit<2>  origin;         /* ORIGIN_* (pipeline.h enum nk_origin): the trust boundary */
    bit<1>  count_load;     /* KVSwitch: count this request (each copy) in Loadcount at egress */
    /* copied into clones for the packet-in header */
    @field_list(1)
    bit<16> in_port;
    @field_list(1)
    bit<8>  cpu_reason;
}

#endif /* NETKV_TYPES_P4 */
