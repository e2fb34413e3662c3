/*
 * parser.p4 - the v1model parser, checksum controls and deparser shared by
 * every netkv program.
 *
 * A program picks the protocol branch before including this file:
 *   #define NETKV_PARSE_PEGASUS    UDP 5047 (dst or src) -> pegasus_t + pegasus_pre_t
 *                                  (hash/plain and pegasus: one wire format,
 *                                  the magic is checked in the ingress)
 *   #define NETKV_PARSE_NETCACHE   UDP 5050 (dst or src) -> netcache_t + value slices
 *   #define NETKV_PARSE_KVSWITCH   UDP 8888 (dst or src) -> kvswitch_t (the value stays
 *                                  payload: the switch never parses it)
 *   #define NETKV_PARSE_STARCACHE  UDP 5008 (dst or src) -> starcache_t + starcache_pre_t
 *                                  (key and value stay payload)
 *   #define NETKV_PARSE_NETMC      UDP 1000-1015 (dst or src, port & 0xFFF0) ->
 *                                  netmc_t + SRV[N] + netmc_pre_t
 *   #define NETKV_PARSE_NETLR      UDP 1234 (dst or src) -> netlr_t (36 B, fixed)
 *
 * What the parser does mirrors netkv-switch (hostapps/apps/netkv-switch.c):
 *   - a packet-out (ingress port CPU_PORT) first loses its packet_out header;
 *   - IPv4 with IHL 5, UDP, not a fragment, on the protocol's port: the
 *     protocol header is extracted and meta.is_proto is set (set BEFORE the
 *     extract, so a truncated header still counts as the protocol's and is
 *     dropped by the ingress on standard_metadata.parser_error);
 *   - any other IPv4 is "other IP" (forwarded by destination address),
 *     anything else is L2 (flooded if broadcast, else forwarded by the MAC's
 *     node).
 * The parser never drops: v1model runs the ingress with parser_error set,
 * and the ingress drops every packet whose parse failed (netkv-switch drops
 * truncated frames and undecodable protocol packets).
 */
#ifndef NETKV_PARSER_P4
#define NETKV_PARSER_P4

parser NetkvParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t sm) {
    state start {
        meta.is_proto = 0;
        meta.from_cpu = 0;
        meta.nc_slices = 0;
        meta.mc_srv_left = 0;
        transition select(sm.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }

    state parse_packet_out {
        pkt.extract(hdr.packet_out);
        meta.from_cpu = 1;
        transition parse_ethernet;
    }

#include "parse_states.p4"
}

control NetkvVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        /* netkv-switch drops frames with a bad IPv4 header checksum; the
         * ingress drops when standard_metadata.checksum_error is set. */
        verify_checksum(hdr.ipv4.isValid() && hdr.ipv4.ihl == 5,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset,
              hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control NetkvComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid() && hdr.ipv4.ihl == 5,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset,
              hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
        /* The UDP checksum is recomputed only when the pipeline edited the
         * packet (a rewritten destination, a stamped version, a switch
         * reply) and the sender used one (0 = none, kept as 0). Invalid
         * headers contribute nothing (BMv2 skips them); the unparsed rest
         * of the packet is the payload. */
        update_checksum_with_payload(
            hdr.udp.isValid() && meta.hdr_changed == 1 && hdr.udp.checksum != 0,
            { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w0, hdr.ipv4.protocol, hdr.udp.length,
              hdr.udp.src_port, hdr.udp.dst_port, hdr.udp.length,
              hdr.pegasus, hdr.pegasus_pre, hdr.netcache,
              hdr.nc_value[0], hdr.nc_value[1], hdr.nc_value[2], hdr.nc_value[3],
              hdr.nc_value[4], hdr.nc_value[5], hdr.nc_value[6], hdr.nc_value[7],
              hdr.kvswitch, hdr.starcache, hdr.starcache_pre, hdr.netmc, hdr.netmc_srv,
              hdr.netmc_pre, hdr.netlr },
            hdr.udp.checksum, HashAlgorithm.csum16);
    }
}

control NetkvDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.packet_in);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.pegasus);
        pkt.emit(hdr.pegasus_pre);
        pkt.emit(hdr.netcache);
        pkt.emit(hdr.nc_value);
        pkt.emit(hdr.kvswitch);
        pkt.emit(hdr.starcache);
        pkt.emit(hdr.starcache_pre);
        pkt.emit(hdr.netmc);
        pkt.emit(hdr.netmc_srv);
        pkt.emit(hdr.netmc_pre);
        pkt.emit(hdr.netlr);
    }
}

#endif /* NETKV_PARSER_P4 */
