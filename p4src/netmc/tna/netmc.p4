/*
 * tna/netmc.p4 - NetMC's switch for Tofino (TNA), the twin of ../netmc.p4
 * (v1model) and hostapps/src/pipeline/netmc.c (docs/netmc.md): a multiget
 * is split statelessly, one pass per key group, by multicasting each pass
 * to {the group's server, the recirculation port}; the copy to the
 * recirculation port (NETKV_TNA_RECIRC_PORT, a loopback port) re-enters the
 * ingress as the continuation - the thesis' Tofino design, where v1model
 * calls recirculate() in the egress.
 * Written for TNA, NOT compiled here (no bf-p4c): docs/testbed.md "Tofino".
 *
 * Same names as netmc.c and ../netmc.p4: tables node_fwd (tna/shell.p4),
 * addr_table[srv_id] -> set_addr(node, port, mgid); registers stats,
 * n_servers, each through RegisterActions. KeyGroup and SrvIDTable are
 * constant tables, as in ../netmc.p4.
 *
 * Differences from ../netmc.p4 (tests/test_tna_p4.py TNA_WIDTHS,
 * docs/netmc.md "TNA"), each for a Tofino limit:
 *   - `stats` cells are 32 bits and one is counted per packet: a refusal
 *     (HOST_SERVER_OP, FORGED, MALFORMED), then NO_ROUTE, then PASSES or
 *     FORWARDED; MGETS and CLONES are not counted (one register access per
 *     packet; the controller reads only the refusals);
 *   - KEYIDX <<= n is one constant shift per KeyGroup action (Tofino shifts
 *     by constants only);
 *   - the SRV list is parsed by the shared parser loop (../parse_states.p4),
 *     which bf-p4c may want unrolled or on a ParserCounter.
 *
 * Compile (with an SDE): bf-p4c --target tofino --arch tna \
 *     --p4runtime-files netmc.p4info.txtpb -o <out> netmc.p4
 */
#include <core.p4>
#include <tna.p4>

#define NETKV_TNA
#define NETKV_PARSE_NETMC
#include "../../common/headers.p4"
#include "../../common/types.p4"
#include "../../common/tna/shell.p4"

#ifndef MC_SPLIT
#define MC_SPLIT 1
#endif
#ifndef MC_W
#define MC_W MC_KEYIDX_W
#endif
#if MC_W != 16 && MC_W != 32
#error "MC_W: 16 or 32"
#endif
#define MC_STAT_COUNT 8
#if MC_W == 32
#define MC_WMASK 32w0xFFFFFFFF
#else
#define MC_WMASK 32w0xFFFF
#endif
const bit<8> MC_STAT_NONE = 0xFF;

/* KeyGroup entry for group size n: bit W - n set, the n - 1 bits above it 0 */
#define MC_KG(n) ((32w1 << (MC_W - (n))) &&& \
                  (MC_WMASK & ~((32w1 << (MC_W - (n))) - 32w1))) : group_##n()
/* KeyGroup's action for n: the group's size, and KEYIDX with it consumed */
#define MC_KG_ACTION(n) action group_##n() { group_n = n; rest = (hdr.netmc.keyidx << n) & MC_WMASK; }
/* SrvIDTable entry: a constant index into the SRV stack per action */
#define MC_SRV_ACTION(i) action srv_##i() { meta_srv = hdr.netmc_srv[i].id; }

control NetmcIngress(inout headers_t hdr, inout metadata_t meta,
                     in ingress_intrinsic_metadata_t ig_intr_md,
                     in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                     inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                     inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    @name(".stats") Register<bit<32>, bit<32>>(MC_STAT_COUNT) stats;
    @name(".n_servers") Register<bit<8>, bit<32>>(1) n_servers;   /* server s behind port s */

    RegisterAction<bit<32>, bit<32>, bit<32>>(stats) stats_inc = {
        void apply(inout bit<32> v) { v = v + 1; }
    };
    RegisterAction<bit<8>, bit<32>, bit<8>>(n_servers) n_servers_read = {
        void apply(inout bit<8> v, out bit<8> rv) { rv = v; }
    };

    NetkvTnaClassify() classify;
    NetkvTnaForward() forward;

    bit<8> group_n = 0;     /* KeyGroup's n (0: KEYIDX had no bit set) */
    bit<32> rest = 0;       /* KEYIDX after the group */
    bit<8> meta_srv = 0xFF; /* SRV[OID] */
    bit<16> a_node = 0;
    bit<9> a_port = 0;
    bit<16> a_mgid = 0;
    bool a_hit = false;
    bit<8> st = MC_STAT_NONE;  /* the packet's `stats` cell */

    MC_KG_ACTION(1)
    MC_KG_ACTION(2)
    MC_KG_ACTION(3)
    MC_KG_ACTION(4)
    MC_KG_ACTION(5)
    MC_KG_ACTION(6)
    MC_KG_ACTION(7)
    MC_KG_ACTION(8)
    MC_KG_ACTION(9)
    MC_KG_ACTION(10)
    MC_KG_ACTION(11)
    MC_KG_ACTION(12)
    MC_KG_ACTION(13)
    MC_KG_ACTION(14)
    MC_KG_ACTION(15)
    MC_KG_ACTION(16)
    MC_KG_ACTION(17)
    MC_KG_ACTION(18)
    MC_KG_ACTION(19)
    MC_KG_ACTION(20)
    MC_KG_ACTION(21)
    MC_KG_ACTION(22)
    MC_KG_ACTION(23)
    MC_KG_ACTION(24)
    MC_KG_ACTION(25)
    MC_KG_ACTION(26)
    MC_KG_ACTION(27)
    MC_KG_ACTION(28)
    MC_KG_ACTION(29)
    MC_KG_ACTION(30)
    MC_KG_ACTION(31)
    MC_KG_ACTION(32)

    action no_group() {
        group_n = 0;
    }

    /* KeyGroup: n = leading zeros of KEYIDX (W bits) + 1 */
    table key_group {
        key = {
            hdr.netmc.keyidx : ternary;
        }
        actions = {
            group_1; group_2; group_3; group_4; group_5; group_6; group_7; group_8;
            group_9; group_10; group_11; group_12; group_13; group_14; group_15; group_16;
            group_17; group_18; group_19; group_20; group_21; group_22; group_23; group_24;
            group_25; group_26; group_27; group_28; group_29; group_30; group_31; group_32;
            no_group;
        }
        const default_action = no_group();
        const entries = {
            MC_KG(1); MC_KG(2); MC_KG(3); MC_KG(4); MC_KG(5); MC_KG(6); MC_KG(7); MC_KG(8);
            MC_KG(9); MC_KG(10); MC_KG(11); MC_KG(12); MC_KG(13); MC_KG(14); MC_KG(15);
            MC_KG(16);
#if MC_W == 32
            MC_KG(17); MC_KG(18); MC_KG(19); MC_KG(20); MC_KG(21); MC_KG(22); MC_KG(23);
            MC_KG(24); MC_KG(25); MC_KG(26); MC_KG(27); MC_KG(28); MC_KG(29); MC_KG(30);
            MC_KG(31); MC_KG(32);
#endif
        }
    }

    MC_SRV_ACTION(0) MC_SRV_ACTION(1) MC_SRV_ACTION(2) MC_SRV_ACTION(3)
    MC_SRV_ACTION(4) MC_SRV_ACTION(5) MC_SRV_ACTION(6) MC_SRV_ACTION(7)
    MC_SRV_ACTION(8) MC_SRV_ACTION(9) MC_SRV_ACTION(10) MC_SRV_ACTION(11)
    MC_SRV_ACTION(12) MC_SRV_ACTION(13) MC_SRV_ACTION(14) MC_SRV_ACTION(15)
    MC_SRV_ACTION(16) MC_SRV_ACTION(17) MC_SRV_ACTION(18) MC_SRV_ACTION(19)
    MC_SRV_ACTION(20) MC_SRV_ACTION(21) MC_SRV_ACTION(22) MC_SRV_ACTION(23)
    MC_SRV_ACTION(24) MC_SRV_ACTION(25) MC_SRV_ACTION(26) MC_SRV_ACTION(27)
    MC_SRV_ACTION(28) MC_SRV_ACTION(29) MC_SRV_ACTION(30) MC_SRV_ACTION(31)

    action srv_none() {
        meta_srv = 8w0xFF;
    }

    /* SrvIDTable: SRV[OID] (one action per index: a stack is indexed by a constant) */
    table srv_id_table {
        key = {
            hdr.netmc.oid : exact;
        }
        actions = {
            srv_0; srv_1; srv_2; srv_3; srv_4; srv_5; srv_6; srv_7;
            srv_8; srv_9; srv_10; srv_11; srv_12; srv_13; srv_14; srv_15;
            srv_16; srv_17; srv_18; srv_19; srv_20; srv_21; srv_22; srv_23;
            srv_24; srv_25; srv_26; srv_27; srv_28; srv_29; srv_30; srv_31;
            srv_none;
        }
        const default_action = srv_none();
        const entries = {
            0: srv_0(); 1: srv_1(); 2: srv_2(); 3: srv_3(); 4: srv_4(); 5: srv_5();
            6: srv_6(); 7: srv_7(); 8: srv_8(); 9: srv_9(); 10: srv_10(); 11: srv_11();
            12: srv_12(); 13: srv_13(); 14: srv_14(); 15: srv_15(); 16: srv_16();
            17: srv_17(); 18: srv_18(); 19: srv_19(); 20: srv_20(); 21: srv_21();
            22: srv_22(); 23: srv_23(); 24: srv_24(); 25: srv_25(); 26: srv_26();
            27: srv_27(); 28: srv_28(); 29: srv_29(); 30: srv_30(); 31: srv_31();
        }
    }

    /* the port argument is a device port: the driver translates the
     * controller's rack port */
    @name(".set_addr")
    action set_addr(bit<16> node, bit<9> port, bit<16> mgid) {
        a_node = node;
        a_port = port;
        a_mgid = mgid;
        a_hit = true;
    }

    @name(".addr_miss")
    action addr_miss() {
        a_hit = false;
    }

    /* AddrTable: server id -> node, port, multicast group (digest §9.5) */
    @name(".addr_table")
    table addr_table {
        key = {
            meta_srv : exact @name("srv_id");
        }
        actions = {
            set_addr;
            @defaultonly addr_miss;
        }
        const default_action = addr_miss();
        size = NETMC_N;
    }

    apply {
        classify.apply(hdr, meta, ig_intr_md, ig_prsr_md);
        if (meta.is_proto != 1 || meta.fwd == FWD_DROP || !hdr.netmc.isValid() ||
            !hdr.netmc_pre.isValid()) {
            meta.is_proto = 0;
        }
        /* the trust boundary: rack ports below n_servers are the servers' */
        bit<8> n8 = n_servers_read.execute(0);
        if (meta.origin == ORIGIN_CLIENT && meta.in_port < (bit<16>)n8) {
            meta.origin = ORIGIN_SERVER;
        }
        bool dropped = false;
        if (meta.is_proto == 1) {
            bit<8> op = hdr.netmc.op;
            /* what nk_wire_decode refuses before the pipeline runs */
            if (op > NETMC_OP_MGET_REPLY || hdr.netmc_pre.keylen == 0 ||
                hdr.netmc_pre.keylen > 64 || hdr.netmc_pre.rsvd != 0) {
                meta.fwd = FWD_DROP;
                meta.is_proto = 0;
                dropped = true;
            } else if (meta.origin == ORIGIN_CLIENT &&
                       (op == NETMC_OP_GET_REPLY || op == NETMC_OP_PUT_REPLY ||
                        op == NETMC_OP_MGET_REPLY)) {
                st = MC_STAT_HOST_SERVER_OP;     /* a forged reply */
                meta.fwd = FWD_DROP;
                dropped = true;
            }
        }
        if (meta.is_proto == 1 && !dropped && hdr.netmc.op == NETMC_OP_MGET && MC_SPLIT == 1) {
            if (meta.origin == ORIGIN_CLIENT &&
                (hdr.netmc.clo != 0 || hdr.netmc.oid != 0 || hdr.netmc.startidx != 0)) {
                /* OID, STARTIDX and CLO are the switch's (docs/security.md) */
                st = MC_STAT_FORGED;
                meta.fwd = FWD_DROP;
                dropped = true;
            } else if (hdr.netmc.clo != 0) {
                hdr.netmc.oid = hdr.netmc.oid + 1;
                hdr.netmc.startidx = hdr.netmc.startidx + hdr.netmc.numkey;
            }
            if (!dropped) {
                hdr.netmc.keyidx = hdr.netmc.keyidx & MC_WMASK;
                key_group.apply();
                if (group_n == 0 || hdr.netmc.oid >= NETMC_N ||
                    (bit<16>)hdr.netmc.startidx + (bit<16>)group_n >
                        (bit<16>)hdr.netmc_pre.nslots) {
                    st = MC_STAT_MALFORMED;
                    meta.fwd = FWD_DROP;
                    dropped = true;
                }
            }
            if (!dropped) {
                srv_id_table.apply();
                if (meta_srv < NETMC_N) {
                    addr_table.apply();
                }
                if (!a_hit) {
                    st = MC_STAT_NO_ROUTE;
                    meta.fwd = FWD_DROP;
                    dropped = true;
                }
            }
            if (!dropped) {
                hdr.netmc.keyidx = rest;          /* the group is consumed */
                hdr.netmc.numkey = group_n;
                meta.dst_node = a_node;
                meta.hdr_changed = 1;
                st = MC_STAT_PASSES;
                if (rest != 0) {
                    /* more groups: one copy to the server, one through the
                     * recirculation port (the group's replicas) */
                    hdr.netmc.clo = 1;
                    meta.fwd = FWD_MCAST;
                    ig_tm_md.mcast_grp_a = a_mgid;
                } else {
                    meta.fwd = FWD_PORT;
                    meta.out_port = a_port;
                }
            }
        }

        forward.apply(hdr, meta, ig_intr_md, ig_dprsr_md, ig_tm_md);

        /* mc_forward(): everything else is forwarded by destination */
        if (meta.is_proto == 1 && !dropped &&
            (hdr.netmc.op != NETMC_OP_MGET || MC_SPLIT == 0)) {
            if (meta.fwd == FWD_NODE) {
                st = MC_STAT_FORWARDED;
            } else {
                st = MC_STAT_NO_ROUTE;
            }
        }
        if (st != MC_STAT_NONE) {
            stats_inc.execute((bit<32>)st);
        }
    }
}

control NetmcEgress(inout headers_t hdr, inout metadata_t meta,
                    in egress_intrinsic_metadata_t eg_intr_md,
                    in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                    inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                    inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    NetkvTnaEgress() egress_common;
    apply {
        /* the copy to the recirculation port needs nothing here: the port
         * loops it back into the ingress, where its header says it all */
        egress_common.apply(hdr, meta, eg_intr_md, eg_dprsr_md);
    }
}

Pipeline(NetkvTnaIngressParser(), NetmcIngress(), NetkvTnaIngressDeparser(),
         NetkvTnaEgressParser(), NetmcEgress(), NetkvTnaEgressDeparser()) pipe;

Switch(pipe) main;
