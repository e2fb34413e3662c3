/*
 * netmc.p4 - NetMC's switch for BMv2 (v1model), the P4 twin of
 * hostapps/src/pipeline/netmc.c (docs/netmc.md, digest §3): a multiget is
 * split statelessly, one pass per key group, by cloning through the PRE
 * group {server port, recirculation port}.
 *
 * Per pass of an MGET (MC_SPLIT = 1; the baselines' 0 only forwards):
 *   CLO = 1:  OID += 1; STARTIDX += NUMKEY         (the previous group's size)
 *   n = KeyGroup(KEYIDX): leading zeros of KEYIDX's low W bits + 1
 *   KEYIDX <<= n (within W bits); NUMKEY = n
 *   s = SrvIDTable(OID) = SRV[OID]; addr_table[s] -> node, port, mgid
 *   KEYIDX != 0: CLO = 1, multicast to mgid = {server port (rid 0),
 *                recirculation port (rid 1)}; the egress recirculates rid 1
 *   else:        unicast to the server's port
 * OID, STARTIDX and CLO are the switch's: a client's packet with any of them
 * set is forged (FORGED); KEYIDX 0, OID past SRV or a group past NSLOTS is
 * malformed (MALFORMED): both counted and dropped. GET, PUT and replies are
 * forwarded by destination; a reply from a client's port is dropped.
 *
 * Named state (same names as netmc.c):
 *   table    node_fwd[node] -> set_port(port)                 (common/forward.p4)
 *   table    addr_table[srv_id] -> set_addr(node, port, mgid)  AddrTable (§9.5)
 *   register stats[MC_STAT_COUNT]  bit<64>   enum mc_stat (MGETS, PASSES, ...)
 *   register n_servers[0]          bit<8>    servers' ports are trusted for replies
 * KeyGroup and SrvIDTable are constant tables (their entries are the
 * program's, W of them and N of them: the controller never writes them, and
 * the C pipeline computes the same in code).
 *
 * Compile-time constants (the plug-in's P4Program defines, from the params):
 *   MC_W                W = 16 or 32 keys per packet (default MC_KEYIDX_W;
 *                       KEYIDX is 32 bits on the wire)
 *   MC_SPLIT            1 = NetMC, 0 = the CliMC / CoordiMC baselines
 *   NETKV_TRUSTED_PORT  CoordiMC's coordinator port (trusted to send replies)
 *
 * Compile: p4c-bm2-ss --arch v1model --p4runtime-files netmc.p4info.txtpb -o netmc.json netmc.p4
 */
#include <core.p4>
#include <v1model.p4>

#define NETKV_PARSE_NETMC
#include "../common/headers.p4"
#include "../common/types.p4"
#include "../common/parser.p4"
#include "../common/forward.p4"

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
/* KEYIDX's W bits */
#if MC_W == 32
#define MC_WMASK 32w0xFFFFFFFF
#else
#define MC_WMASK 32w0xFFFF
#endif
const bit<16> MC_RID_RECIRC = 1;   /* the PRE copy to the recirculation port */

/* KeyGroup entry for group size n: bit W - n set, the n - 1 bits above it 0 */
#define MC_KG(n) ((32w1 << (MC_W - (n))) &&& \
                  (MC_WMASK & ~((32w1 << (MC_W - (n))) - 32w1))) : group_of(n)
/* SrvIDTable entry: a constant index into the SRV stack per action */
#define MC_SRV_ACTION(i) action srv_##i() { meta_srv = hdr.netmc_srv[i].id; }

control NetmcIngress(inout headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t sm) {
    @name(".stats") register<bit<64>>(MC_STAT_COUNT) stats;
    @name(".n_servers") register<bit<8>>(1) n_servers;   /* server s behind port s */

    NetkvClassify() classify;
    NetkvForward() forward;

    bit<8> group_n;     /* KeyGroup's n (0: KEYIDX had no bit set) */
    bit<8> meta_srv;    /* SRV[OID] */
    bit<16> a_node;
    bit<9> a_port;
    bit<16> a_mgid;
    bool a_hit;

    action stat_inc(bit<8> cell) {
        @atomic {
            bit<64> n;
            stats.read(n, (bit<32>)cell);
            stats.write((bit<32>)cell, n + 1);
        }
    }

    action group_of(bit<8> n) {
        group_n = n;
    }

    action no_group() {
        group_n = 0;
    }

    /* KeyGroup: n = leading zeros of KEYIDX (W bits) + 1 */
    table key_group {
        key = {
            hdr.netmc.keyidx : ternary;
        }
        actions = {
            group_of;
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
        classify.apply(hdr, meta, sm);
        if (meta.is_proto != 1 || meta.fwd == FWD_DROP || !hdr.netmc.isValid() ||
            !hdr.netmc_pre.isValid()) {
            meta.is_proto = 0;
        }
        /* the trust boundary: ports below n_servers are the servers' */
        bit<8> n8;
        n_servers.read(n8, 0);
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
                stat_inc(MC_STAT_HOST_SERVER_OP);   /* a forged reply */
                meta.fwd = FWD_DROP;
                dropped = true;
            }
        }
        if (meta.is_proto == 1 && !dropped && hdr.netmc.op == NETMC_OP_MGET && MC_SPLIT == 1) {
            if (meta.origin == ORIGIN_CLIENT &&
                (hdr.netmc.clo != 0 || hdr.netmc.oid != 0 || hdr.netmc.startidx != 0)) {
                /* OID, STARTIDX and CLO are the switch's (docs/security.md) */
                stat_inc(MC_STAT_FORGED);
                meta.fwd = FWD_DROP;
                dropped = true;
            } else if (hdr.netmc.clo != 0) {
                hdr.netmc.oid = hdr.netmc.oid + 1;
                hdr.netmc.startidx = hdr.netmc.startidx + hdr.netmc.numkey;
            } else {
                stat_inc(MC_STAT_MGETS);
            }
            if (!dropped) {
                hdr.netmc.keyidx = hdr.netmc.keyidx & MC_WMASK;
                key_group.apply();
                if (group_n == 0 || hdr.netmc.oid >= NETMC_N ||
                    (bit<16>)hdr.netmc.startidx + (bit<16>)group_n >
                        (bit<16>)hdr.netmc_pre.nslots) {
                    stat_inc(MC_STAT_MALFORMED);
                    meta.fwd = FWD_DROP;
                    dropped = true;
                }
            }
            if (!dropped) {
                a_hit = false;
                srv_id_table.apply();
                if (meta_srv < NETMC_N) {
                    addr_table.apply();
                }
                if (!a_hit) {
                    stat_inc(MC_STAT_NO_ROUTE);
                    meta.fwd = FWD_DROP;
                    dropped = true;
                }
            }
            if (!dropped) {
                /* the group is consumed: KEYIDX <<= n within W bits */
                if (group_n >= MC_W) {
                    hdr.netmc.keyidx = 0;
                } else {
                    hdr.netmc.keyidx = (hdr.netmc.keyidx << group_n) & MC_WMASK;
                }
                hdr.netmc.numkey = group_n;
                meta.dst_node = a_node;
                meta.hdr_changed = 1;
                stat_inc(MC_STAT_PASSES);
                if (hdr.netmc.keyidx != 0) {   /* more groups: the continuation recirculates */
                    hdr.netmc.clo = 1;
                    meta.fwd = FWD_MCAST;
                    sm.mcast_grp = a_mgid;
                    stat_inc(MC_STAT_CLONES);
                } else {
                    meta.fwd = FWD_PORT;
                    meta.out_port = a_port;
                }
            }
        }

        forward.apply(hdr, meta, sm);

        /* mc_forward(): everything else is forwarded by destination */
        if (meta.is_proto == 1 && !dropped &&
            (hdr.netmc.op != NETMC_OP_MGET || MC_SPLIT == 0)) {
            if (meta.fwd == FWD_NODE) {
                stat_inc(MC_STAT_FORWARDED);
            } else {
                stat_inc(MC_STAT_NO_ROUTE);
            }
        }
    }
}

control NetmcEgress(inout headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t sm) {
    NetkvEgress() egress_common;
    apply {
        egress_common.apply(hdr, meta, sm);
        /* the PRE's copy to the recirculation port re-enters the ingress as
         * the continuation: everything it needs is in its header */
        if (sm.instance_type == PKT_INSTANCE_REPLICATION && sm.egress_rid == MC_RID_RECIRC) {
            recirculate_preserving_field_list(0);
        }
    }
}

V1Switch(NetkvParser(), NetkvVerifyChecksum(), NetmcIngress(), NetmcEgress(),
         NetkvComputeChecksum(), NetkvDeparser()) main;
