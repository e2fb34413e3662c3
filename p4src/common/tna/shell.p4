/*
 * tna/shell.p4 - the switch "shell" of every netkv TNA (Tofino) program: the
 * TNA counterpart of parser.p4 + forward.p4, around a protocol's ingress.
 * Written for TNA, NOT compiled here (no bf-p4c on this project's machines):
 * docs/testbed.md "Tofino".
 *
 *   NetkvTnaIngressParser   intrinsic + port metadata, packet-out from the CPU
 *                           port, then the shared states (../parse_states.p4);
 *                           the IPv4 header checksum is verified (Checksum)
 *   NetkvTnaClassify        (first in the ingress) as NetkvClassify: drop what
 *                           netkv-switch drops, source/destination nodes,
 *                           the default decision; the ingress port becomes
 *                           the rack port through `rack_port`
 *   NetkvTnaForward         (last in the ingress) as NetkvForward: rewrite a
 *                           readdressed destination, `node_fwd`, unicast /
 *                           multicast / drop, a copy to the CPU
 *   NetkvTnaIngressDeparser bridge header + headers, IPv4 checksum
 *   NetkvTnaEgressParser    bridge header, then the shared states again
 *   NetkvTnaEgress          packet-in header on the CPU port; flood copies
 *                           never go back out of their ingress port
 *   NetkvTnaEgressDeparser  headers, IPv4 checksum
 *
 * Rack ports vs device ports. The C pipelines and the controllers number
 * ports by the rack plan (node i behind port i). A Tofino's ports are device
 * port ids, so the program works in rack ports: `rack_port` (device port ->
 * rack port, ingress) and `node_fwd`'s set_port(port) take rack-port numbers
 * translated by the driver (netkv/drivers/tofino.py) into device ports, and
 * a multicast copy carries its node as the replica id (egress_rid).
 *
 * Differences from the v1model shell, each because TNA has no counterpart:
 *   - no frame-length check against the IPv4 total length (the ingress has
 *     no packet length); truncated headers are still parser errors;
 *   - an edited packet's UDP checksum is set to 0 ("none", RFC 768) instead
 *     of recomputed over the payload (the deparser cannot sum the payload);
 *   - a copy to the controller is ig_tm_md.copy_to_cpu (the CPU port of the
 *     traffic manager), not a clone session.
 */
#ifndef NETKV_TNA_SHELL_P4
#define NETKV_TNA_SHELL_P4

/* the PCIe CPU port: 64 on a 2-pipe Tofino 1, 320 on a 4-pipe one
 * (-DNETKV_TNA_CPU_PORT=<port>; netkv/drivers/tofino.py TOFINO_CPU_PORT) */
#ifndef NETKV_TNA_CPU_PORT
#define NETKV_TNA_CPU_PORT 64
#endif
const PortId_t TNA_CPU_PORT = NETKV_TNA_CPU_PORT;
/* the recirculation port a multicast replica loops back through (NetMC's
 * continuation): 68 is pipe 0's on Tofino 1 (-DNETKV_TNA_RECIRC_PORT=<port>;
 * target.tofino.recirc_port). What re-enters through it is the switch's own:
 * trusted, as v1model trusts a recirculated packet */
#ifndef NETKV_TNA_RECIRC_PORT
#define NETKV_TNA_RECIRC_PORT 68
#endif
const PortId_t TNA_RECIRC_PORT = NETKV_TNA_RECIRC_PORT;

parser NetkvTnaIngressParser(packet_in pkt, out headers_t hdr, out metadata_t meta,
                             out ingress_intrinsic_metadata_t ig_intr_md) {
    Checksum() ipv4_csum;

    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        meta.is_proto = 0;
        meta.from_cpu = 0;
        meta.nc_slices = 0;
        meta.mc_srv_left = 0;
        meta.hdr_changed = 0;   /* here: the checksum state below may set it */
        transition select(ig_intr_md.ingress_port) {
            TNA_CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }

    state parse_packet_out {
        pkt.extract(hdr.packet_out);
        meta.from_cpu = 1;
        transition parse_ethernet;
    }

#include "../parse_states.p4"
}

/* the IPv4 header checksum, checked in the ingress (netkv-switch drops a
 * bad one): its own control because TNA verifies it with Checksum() over
 * the parsed header, not with verify_checksum */
control NetkvTnaVerifyIpv4(in headers_t hdr, out bool bad) {
    Checksum() csum;
    apply {
        bad = false;
        if (hdr.ipv4.isValid() && hdr.ipv4.ihl == 5) {
            bit<16> sum = csum.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
                hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset,
                hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr });
            bad = sum != hdr.ipv4.hdr_checksum;
        }
    }
}

control NetkvTnaClassify(inout headers_t hdr, inout metadata_t meta,
                         in ingress_intrinsic_metadata_t ig_intr_md,
                         in ingress_intrinsic_metadata_from_parser_t ig_prsr_md) {
    NetkvTnaVerifyIpv4() verify_ipv4;

    @name(".set_rack_port")
    action set_rack_port(bit<16> port) {
        meta.in_port = port;
    }

    /* device port -> rack port (the driver installs one entry per data
     * port); a port outside the rack keeps NODE_NONE and is a client's */
    @name(".rack_port")
    table rack_port {
        key = {
            ig_intr_md.ingress_port : exact @name("dev_port");
        }
        actions = {
            set_rack_port;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = 512;
    }

    apply {
        meta.src_node = NODE_NONE;
        meta.dst_node = NODE_NONE;
        meta.to_cpu = 0;
        meta.switch_reply = 0;
        meta.node_hit = 0;
        meta.out_port = 0;
        meta.in_port = NODE_NONE;
        rack_port.apply();
        meta.cpu_reason = 0;
        meta.origin = ORIGIN_CLIENT;     /* the program sets SERVER (port < n_servers) */
        if (meta.from_cpu == 1 || meta.in_port == NETKV_TRUSTED_PORT ||
            ig_intr_md.ingress_port == TNA_RECIRC_PORT) {
            meta.origin = ORIGIN_TRUSTED;
        }
        meta.fwd = FWD_DROP;
        bool bad_csum;
        verify_ipv4.apply(hdr, bad_csum);

        if (ig_prsr_md.parser_err != 0 || bad_csum) {
            meta.fwd = FWD_DROP;
        } else if (hdr.packet_out.isValid() && hdr.packet_out.direct == 1) {
            meta.fwd = FWD_PORT;
            meta.out_port = (bit<9>)hdr.packet_out.egress_port;
        } else if (hdr.ipv4.isValid()) {
            if (hdr.ipv4.version != 4 || hdr.ipv4.ihl < 5 || hdr.ipv4.total_len < 20) {
                meta.fwd = FWD_DROP;
            } else if (hdr.udp.isValid() &&
                       (hdr.udp.length < 8 || hdr.udp.length > hdr.ipv4.total_len - 20)) {
                meta.fwd = FWD_DROP;
            } else {
                bit<32> d = hdr.ipv4.dst_addr - NODE_NET;
                if ((hdr.ipv4.dst_addr & NODE_NET_MASK) == NODE_NET && d >= 1 && d <= NODE_MAX) {
                    meta.dst_node = (bit<16>)(d - 1);
                }
                bit<32> s = hdr.ipv4.src_addr - NODE_NET;
                if ((hdr.ipv4.src_addr & NODE_NET_MASK) == NODE_NET && s >= 1 && s <= NODE_MAX) {
                    meta.src_node = (bit<16>)(s - 1);
                }
                meta.fwd = FWD_NODE;
            }
        } else if (hdr.ethernet.isValid()) {
            if (hdr.ethernet.dst_addr[40:40] == 1) {
                meta.fwd = FWD_FLOOD;
            } else if (hdr.ethernet.dst_addr[47:40] == 0x02) {
                meta.dst_node = hdr.ethernet.dst_addr[15:0] - 1;
                meta.fwd = FWD_NODE;
            }
        }
        meta.dst_node0 = meta.dst_node;
        if (hdr.packet_out.isValid()) {
            hdr.packet_out.setInvalid();
        }
    }
}

control NetkvTnaForward(inout headers_t hdr, inout metadata_t meta,
                        in ingress_intrinsic_metadata_t ig_intr_md,
                        inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                        inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    /* the port argument is a device port: the driver translates the
     * controller's rack port (node_fwd is the C pipelines' table) */
    @name(".set_port")
    action set_port(bit<9> port) {
        meta.out_port = port;
        meta.node_hit = 1;
    }

    @name(".node_miss")
    action node_miss() {
        meta.node_hit = 0;
    }

    @name(".node_fwd")
    table node_fwd {
        key = {
            meta.dst_node : exact @name("node");
        }
        actions = {
            set_port;
            @defaultonly node_miss;
        }
        const default_action = node_miss();
        size = 4096;
    }

    apply {
        if (meta.switch_reply == 1 && hdr.ipv4.isValid() && hdr.udp.isValid()) {
            bit<48> mac = hdr.ethernet.dst_addr;
            hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
            hdr.ethernet.src_addr = mac;
            bit<32> addr = hdr.ipv4.dst_addr;
            hdr.ipv4.dst_addr = hdr.ipv4.src_addr;
            hdr.ipv4.src_addr = addr;
            bit<16> port = hdr.udp.dst_port;
            hdr.udp.dst_port = hdr.udp.src_port;
            hdr.udp.src_port = port;
            meta.hdr_changed = 1;
        } else if (meta.dst_node != meta.dst_node0 && meta.dst_node != NODE_NONE &&
                   hdr.ipv4.isValid()) {
            hdr.ipv4.dst_addr = NODE_NET + (bit<32>)meta.dst_node + 1;
            hdr.ethernet.dst_addr = NODE_MAC_BASE + (bit<48>)meta.dst_node + 1;
            meta.hdr_changed = 1;
        }

        if (meta.fwd == FWD_NODE) {
            node_fwd.apply();
            if (meta.node_hit == 0) {
                meta.fwd = FWD_DROP;
            } else if (meta.is_proto == 0 && meta.out_port == ig_intr_md.ingress_port) {
                meta.fwd = FWD_DROP;   /* l3_forward: never back out of the ingress port */
            }
        }

        if (meta.fwd == FWD_NODE || meta.fwd == FWD_PORT) {
            ig_tm_md.ucast_egress_port = meta.out_port;
        } else if (meta.fwd == FWD_FLOOD) {
            ig_tm_md.mcast_grp_a = FLOOD_MCAST_GRP;
        } else if (meta.fwd == FWD_MCAST) {
            /* ig_tm_md.mcast_grp_a was set by the program */
        } else {
            ig_dprsr_md.drop_ctl = 1;
        }

        if (meta.to_cpu == 1) {
            if (meta.cpu_reason == 0) {
                meta.cpu_reason = PKTIN_SAMPLE;
            }
            ig_tm_md.copy_to_cpu = 1;
        }
        if (meta.hdr_changed == 1 && hdr.udp.isValid()) {
            hdr.udp.checksum = 0;    /* no payload checksum on TNA: "none" */
        }
        hdr.bridge.setValid();
        hdr.bridge.in_port = meta.in_port;
        hdr.bridge.cpu_reason = meta.cpu_reason;
        hdr.bridge.fwd = meta.fwd;
        hdr.bridge.pad = 0;
    }
}

/* the IPv4 header checksum of an edited header (both deparsers) */
#define NETKV_TNA_IPV4_CSUM(CSUM)                                            \
        if (hdr.ipv4.isValid()) {                                            \
            hdr.ipv4.hdr_checksum = CSUM.update({                            \
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv,           \
                hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags, \
                hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,       \
                hdr.ipv4.src_addr, hdr.ipv4.dst_addr });                     \
        }

/* the headers after the bridge / packet-in header, in wire order */
#define NETKV_TNA_EMIT_HEADERS()                                             \
        pkt.emit(hdr.ethernet); pkt.emit(hdr.ipv4); pkt.emit(hdr.udp);       \
        pkt.emit(hdr.pegasus); pkt.emit(hdr.pegasus_pre);                    \
        pkt.emit(hdr.netcache); pkt.emit(hdr.nc_value);                      \
        pkt.emit(hdr.kvswitch); pkt.emit(hdr.starcache);                     \
        pkt.emit(hdr.starcache_pre); pkt.emit(hdr.netmc);                    \
        pkt.emit(hdr.netmc_srv); pkt.emit(hdr.netmc_pre); pkt.emit(hdr.netlr);

control NetkvTnaIngressDeparser(packet_out pkt, inout headers_t hdr, in metadata_t meta,
                                in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Checksum() ipv4_csum;
    apply {
        NETKV_TNA_IPV4_CSUM(ipv4_csum)
        pkt.emit(hdr.bridge);
        NETKV_TNA_EMIT_HEADERS()
    }
}

parser NetkvTnaEgressParser(packet_in pkt, out headers_t hdr, out metadata_t meta,
                            out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        pkt.extract(hdr.bridge);
        meta.is_proto = 0;
        meta.from_cpu = 0;
        meta.nc_slices = 0;
        meta.mc_srv_left = 0;
        meta.hdr_changed = 0;
        transition parse_ethernet;
    }

#include "../parse_states.p4"
}

control NetkvTnaEgress(inout headers_t hdr, inout metadata_t meta,
                       in egress_intrinsic_metadata_t eg_intr_md,
                       inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    apply {
        if (hdr.bridge.fwd == FWD_FLOOD && (bit<16>)eg_intr_md.egress_rid == hdr.bridge.in_port) {
            eg_dprsr_md.drop_ctl = 1;   /* the flood copy of the ingress port's own node */
        } else if (eg_intr_md.egress_port == TNA_CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = hdr.bridge.in_port;
            hdr.packet_in.reason = hdr.bridge.cpu_reason;
            hdr.packet_in.pad = 0;
        }
        hdr.bridge.setInvalid();
    }
}

control NetkvTnaEgressDeparser(packet_out pkt, inout headers_t hdr, in metadata_t meta,
                               in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Checksum() ipv4_csum;
    apply {
        NETKV_TNA_IPV4_CSUM(ipv4_csum)
        pkt.emit(hdr.packet_in);
        NETKV_TNA_EMIT_HEADERS()
    }
}

#endif /* NETKV_TNA_SHELL_P4 */
