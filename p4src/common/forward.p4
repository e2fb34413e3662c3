/*
 * forward.p4 - the switch "shell" every netkv v1model program shares: what
 * netkv-switch does around the C pipeline's process() call.
 *
 *   NetkvClassify  (first in the ingress)  drop what netkv-switch drops
 *                  (parse errors, bad IPv4 checksum or IHL); find the source
 *                  and destination nodes from the addressing plan; pick the
 *                  default decision: protocol packets and other IPv4 go to
 *                  their destination node, non-IP broadcast is flooded,
 *                  non-IP unicast goes to the node of its MAC.
 *   NetkvForward   (last in the ingress)   apply the decision: rewrite the
 *                  destination (MAC, IPv4) when the pipeline changed
 *                  meta.dst_node, look the node up in `node_fwd`, set the
 *                  egress port / multicast group, clone to the controller.
 *   NetkvEgress                             packet-in header for the CPU
 *                  port; flood copies never go back out of their ingress port.
 *
 * The table `node_fwd` is the C pipelines' `node_fwd` (node id -> port):
 *   table node_fwd  key node (bit<16>, exact)  action set_port(port)
 * The names are absolute (@name(".x")) so that P4Runtime, the BMv2 JSON and
 * the C pipelines use the very same name.
 *
 * Requires types.p4.
 */
#ifndef NETKV_FORWARD_P4
#define NETKV_FORWARD_P4

/* standard_metadata.instance_type values of BMv2 simple_switch */
const bit<32> PKT_INSTANCE_NORMAL = 0;
const bit<32> PKT_INSTANCE_INGRESS_CLONE = 1;
const bit<32> PKT_INSTANCE_REPLICATION = 5;

control NetkvClassify(inout headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t sm) {
    apply {
        meta.src_node = NODE_NONE;
        meta.dst_node = NODE_NONE;
        meta.hdr_changed = 0;
        meta.to_cpu = 0;
        meta.switch_reply = 0;
        meta.node_hit = 0;
        meta.out_port = 0;
        meta.in_port = (bit<16>)sm.ingress_port;
        meta.cpu_reason = 0;
        meta.origin = ORIGIN_CLIENT;     /* the program sets SERVER (port < n_servers) */
        if (meta.from_cpu == 1 || sm.ingress_port == NETKV_TRUSTED_PORT ||
            sm.instance_type != PKT_INSTANCE_NORMAL) {
            meta.origin = ORIGIN_TRUSTED;
        }
        meta.fwd = FWD_DROP;

        if (sm.parser_error != error.NoError || sm.checksum_error == 1) {
            meta.fwd = FWD_DROP;
        } else if (hdr.packet_out.isValid() && hdr.packet_out.direct == 1) {
            /* a controller frame sent out as is */
            meta.fwd = FWD_PORT;
            meta.out_port = (bit<9>)hdr.packet_out.egress_port;
        } else if (hdr.ipv4.isValid()) {
            if (hdr.ipv4.version != 4 || hdr.ipv4.ihl < 5 || hdr.ipv4.total_len < 20 ||
                (bit<32>)hdr.ipv4.total_len + 14 > sm.packet_length) {
                meta.fwd = FWD_DROP;   /* NK_FRAME_EIHL / _ELEN / _ETRUNC */
            } else if (hdr.udp.isValid() &&
                       (hdr.udp.length < 8 || hdr.udp.length > hdr.ipv4.total_len - 20)) {
                meta.fwd = FWD_DROP;   /* NK_FRAME_ELEN */
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
                meta.fwd = FWD_FLOOD;      /* broadcast / multicast: ARP and friends */
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

control NetkvForward(inout headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t sm) {
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
        /* a reply from the switch (NetCache hit) goes back to its sender as
         * if the node it addressed had answered: MACs, IPv4 addresses and
         * UDP ports swapped, as netkv-switch's swap_ends() (a Linux client
         * drops a packet whose source is its own address) */
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
            /* the pipeline readdressed the packet (Pegasus node_fwd rewrite):
             * the destination becomes the node's addresses, as
             * netkv-switch's set_dst_node() does */
            hdr.ipv4.dst_addr = NODE_NET + (bit<32>)meta.dst_node + 1;
            hdr.ethernet.dst_addr = NODE_MAC_BASE + (bit<48>)meta.dst_node + 1;
            meta.hdr_changed = 1;
        }

        if (meta.fwd == FWD_NODE) {
            node_fwd.apply();
            if (meta.node_hit == 0) {
                meta.fwd = FWD_DROP;
            } else if (meta.is_proto == 0 && meta.out_port == sm.ingress_port) {
                meta.fwd = FWD_DROP;   /* l3_forward: never back out of the ingress port */
            }
        }

        if (meta.fwd == FWD_NODE || meta.fwd == FWD_PORT) {
            sm.egress_spec = meta.out_port;
        } else if (meta.fwd == FWD_FLOOD) {
            sm.mcast_grp = FLOOD_MCAST_GRP;
        } else if (meta.fwd == FWD_MCAST) {
            /* sm.mcast_grp was set by the pipeline */
        } else {
            mark_to_drop(sm);
        }

        if (meta.to_cpu == 1) {
            if (meta.cpu_reason == 0) {
                meta.cpu_reason = PKTIN_SAMPLE;
            }
            clone_preserving_field_list(CloneType.I2E, CPU_CLONE_SESSION, 1);
        }
    }
}

control NetkvEgress(inout headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t sm) {
    apply {
        /* an I2E clone re-parses the original frame: a packet-out header
         * would come back */
        hdr.packet_out.setInvalid();
        if (sm.instance_type == PKT_INSTANCE_REPLICATION && meta.fwd == FWD_FLOOD &&
            sm.egress_port == sm.ingress_port) {
            mark_to_drop(sm);
        } else if (sm.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = meta.in_port;
            hdr.packet_in.reason = meta.cpu_reason;
            hdr.packet_in.pad = 0;
        }
    }
}

#endif /* NETKV_FORWARD_P4 */
