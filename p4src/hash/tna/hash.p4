/*
 * tna/hash.p4 - the static consistent-hashing baseline's switch for Tofino
 * (TNA), the twin of ../hash.p4 (v1model) and hostapps/src/pipeline/hash.c.
 * Written for TNA, NOT compiled here (no bf-p4c): docs/testbed.md "Tofino".
 *
 * Same names as hash.c and ../hash.p4: table node_fwd (tna/shell.p4),
 * registers port_pkts, dropped, host_server_op, n_servers; one
 * RegisterAction per register access (a Tofino stateful ALU runs once per
 * register per packet).
 *
 * Differences from ../hash.p4 (tests/test_tna_p4.py TNA_WIDTHS):
 *   port_pkts, dropped, host_server_op are 32-bit counters here (one
 *   stateful ALU word; a 64-bit cell would need a pair without carry).
 *
 * Compile (with an SDE): bf-p4c --target tofino --arch tna \
 *     --p4runtime-files hash.p4info.txtpb -o <out> hash.p4
 */
#include <core.p4>
#include <tna.p4>

#define NETKV_TNA
#define NETKV_PARSE_PEGASUS
#include "../../common/headers.p4"
#include "../../common/types.p4"
#include "../../common/wirecheck.p4"
#include "../../common/tna/shell.p4"

#define HASH_MAX_PORTS 4096

control HashIngress(inout headers_t hdr, inout metadata_t meta,
                    in ingress_intrinsic_metadata_t ig_intr_md,
                    in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                    inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                    inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    @name(".port_pkts") Register<bit<32>, bit<32>>(HASH_MAX_PORTS) port_pkts;
    @name(".dropped") Register<bit<32>, bit<32>>(1) dropped;
    @name(".host_server_op") Register<bit<32>, bit<32>>(1) host_server_op;
    @name(".n_servers") Register<bit<8>, bit<32>>(1) n_servers;   /* server s behind port s */

    RegisterAction<bit<32>, bit<32>, bit<32>>(port_pkts) port_pkts_inc = {
        void apply(inout bit<32> v) { v = v + 1; }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(dropped) dropped_inc = {
        void apply(inout bit<32> v) { v = v + 1; }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(host_server_op) host_server_op_inc = {
        void apply(inout bit<32> v) { v = v + 1; }
    };
    RegisterAction<bit<8>, bit<32>, bit<8>>(n_servers) n_servers_read = {
        void apply(inout bit<8> v, out bit<8> rv) { rv = v; }
    };

    NetkvTnaClassify() classify;
    PegasusWireCheck() wire_check;
    NetkvTnaForward() forward;

    apply {
        classify.apply(hdr, meta, ig_intr_md, ig_prsr_md);
        if (meta.is_proto == 1 && meta.fwd != FWD_DROP) {
            bool ok;
            wire_check.apply(hdr, PLAIN_MAGIC, ok);
            if (!ok) {
                meta.fwd = FWD_DROP;
                meta.is_proto = 0;    /* undecodable: not counted, as in netkv-switch */
            }
        } else {
            meta.is_proto = 0;
        }
        /* the trust boundary (hash.c, docs/security.md), once n_servers is set */
        bit<8> n8 = n_servers_read.execute(0);
        if (meta.is_proto == 1 && meta.origin == ORIGIN_CLIENT && n8 != 0 &&
            meta.in_port >= (bit<16>)n8 &&
            hdr.pegasus.op != PEGASUS_OP_READ && hdr.pegasus.op != PEGASUS_OP_WRITE) {
            meta.fwd = FWD_DROP;
            meta.is_proto = 0;
            host_server_op_inc.execute(0);
        }

        forward.apply(hdr, meta, ig_intr_md, ig_dprsr_md, ig_tm_md);

        /* hash_process(): count after the forwarding decision, per rack port
         * (out_port is a device port here; node n is behind rack port n) */
        if (meta.is_proto == 1) {
            if (meta.fwd == FWD_NODE) {
                port_pkts_inc.execute((bit<32>)meta.dst_node);
            } else {
                dropped_inc.execute(0);
            }
        }
    }
}

Pipeline(NetkvTnaIngressParser(), HashIngress(), NetkvTnaIngressDeparser(),
         NetkvTnaEgressParser(), NetkvTnaEgress(), NetkvTnaEgressDeparser()) pipe;

Switch(pipe) main;
