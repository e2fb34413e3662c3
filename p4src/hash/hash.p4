/*
 * hash.p4 - the static consistent-hashing baseline's switch for BMv2
 * (v1model), the P4 twin of hostapps/src/pipeline/hash.c.
 *
 * Clients address the key's home server themselves; the switch forwards by
 * destination node and counts packets. Protocol packets are the plain wire
 * format (UDP 5047, magic 0x1573, docs/wire.md); the pipeline runs only on
 * those that decode (PegasusWireCheck with PLAIN_MAGIC), the others are
 * dropped, as netkv-switch drops what nk_wire_decode rejects.
 *
 * Named state (same names as hash.c):
 *   table    node_fwd[node] -> set_port(port)    (common/forward.p4)
 *   register port_pkts[port]   bit<64> x 4096    protocol packets sent out of each port
 *   register dropped[0]        bit<64> x 1       protocol packets with no node_fwd entry
 *
 * Registers are read and written by the controller through the Thrift CLI
 * (BMv2 has no P4Runtime register access): netkv/drivers/bmv2.py.
 *
 * Compile: p4c-bm2-ss --arch v1model --p4runtime-files hash.p4info.txtpb -o hash.json hash.p4
 */
#include <core.p4>
#include <v1model.p4>

#define NETKV_PARSE_PEGASUS
#include "../common/headers.p4"
#include "../common/types.p4"
#include "../common/parser.p4"
#include "../common/wirecheck.p4"
#include "../common/forward.p4"

#define HASH_MAX_PORTS 4096

control HashIngress(inout headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t sm) {
    @name(".port_pkts") register<bit<64>>(HASH_MAX_PORTS) port_pkts;
    @name(".dropped") register<bit<64>>(1) dropped;
    @name(".host_server_op") register<bit<64>>(1) host_server_op;
    @name(".n_servers") register<bit<8>>(1) n_servers;   /* server s behind port s */

    NetkvClassify() classify;
    PegasusWireCheck() wire_check;
    NetkvForward() forward;

    apply {
        classify.apply(hdr, meta, sm);
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
        /* the trust boundary (hash.c, docs/security.md): a reply from a
         * client port answers another client's request - dropped. Enforced
         * once the controller has written n_servers (docs/security.md, BMv2) */
        bit<8> n8;
        n_servers.read(n8, 0);
        if (meta.is_proto == 1 && meta.origin == ORIGIN_CLIENT && n8 != 0 &&
            meta.in_port >= (bit<16>)n8 &&
            hdr.pegasus.op != PEGASUS_OP_READ && hdr.pegasus.op != PEGASUS_OP_WRITE) {
            meta.fwd = FWD_DROP;
            meta.is_proto = 0;
            @atomic {
                bit<64> n;
                host_server_op.read(n, 0);
                host_server_op.write(0, n + 1);
            }
        }

        forward.apply(hdr, meta, sm);

        /* hash_process(): count after the forwarding decision */
        if (meta.is_proto == 1) {
            if (meta.fwd == FWD_NODE) {
                @atomic {
                    bit<64> n;
                    port_pkts.read(n, (bit<32>)meta.out_port);
                    port_pkts.write((bit<32>)meta.out_port, n + 1);
                }
            } else {
                @atomic {
                    bit<64> n;
                    dropped.read(n, 0);
                    dropped.write(0, n + 1);
                }
            }
        }
    }
}

control HashEgress(inout headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t sm) {
    NetkvEgress() egress_common;
    apply {
        egress_common.apply(hdr, meta, sm);
    }
}

V1Switch(NetkvParser(), NetkvVerifyChecksum(), HashIngress(), HashEgress(),
         NetkvComputeChecksum(), NetkvDeparser()) main;
