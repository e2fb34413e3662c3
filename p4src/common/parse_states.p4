/*
 * parse_states.p4 - the parser states from Ethernet down to each protocol's
 * header, shared by the v1model parser (parser.p4) and the TNA parsers
 * (tna/shell.p4): included INSIDE a parser body whose start state set the
 * metadata and transitions to parse_ethernet. Uses only `pkt`, `hdr` and
 * `meta`, so it is architecture-neutral. The protocol branch is picked by the
 * program's NETKV_PARSE_* define (parser.p4 lists them).
 */
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        /* (ihl, protocol, MF flag, fragment offset): only unfragmented
         * IPv4/UDP without options reaches a protocol header */
        transition select(hdr.ipv4.ihl, hdr.ipv4.protocol, hdr.ipv4.flags, hdr.ipv4.frag_offset) {
            (4w5, IPPROTO_UDP, 3w0 &&& 3w1, 13w0): parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        pkt.extract(hdr.udp);
#if defined(NETKV_PARSE_PEGASUS)
        transition select(hdr.udp.dst_port, hdr.udp.src_port) {
            (PEGASUS_PORT, _): parse_pegasus;
            (_, PEGASUS_PORT): parse_pegasus;
            default: accept;
        }
#elif defined(NETKV_PARSE_NETCACHE)
        transition select(hdr.udp.dst_port, hdr.udp.src_port) {
            (NETCACHE_PORT, _): parse_netcache;
            (_, NETCACHE_PORT): parse_netcache;
            default: accept;
        }
#elif defined(NETKV_PARSE_KVSWITCH)
        transition select(hdr.udp.dst_port, hdr.udp.src_port) {
            (KVSWITCH_PORT, _): parse_kvswitch;
            (_, KVSWITCH_PORT): parse_kvswitch;
            default: accept;
        }
#elif defined(NETKV_PARSE_STARCACHE)
        transition select(hdr.udp.dst_port, hdr.udp.src_port) {
            (STARCACHE_PORT, _): parse_starcache;
            (_, STARCACHE_PORT): parse_starcache;
            default: accept;
        }
#elif defined(NETKV_PARSE_NETMC)
        transition select(hdr.udp.dst_port, hdr.udp.src_port) {
            (NETMC_PORT_BASE &&& NETMC_PORT_MASK, _): parse_netmc;
            (_, NETMC_PORT_BASE &&& NETMC_PORT_MASK): parse_netmc;
            default: accept;
        }
#elif defined(NETKV_PARSE_NETLR)
        transition select(hdr.udp.dst_port, hdr.udp.src_port) {
            (NETLR_PORT, _): parse_netlr;
            (_, NETLR_PORT): parse_netlr;
            default: accept;
        }
#else
        transition accept;
#endif
    }

#if defined(NETKV_PARSE_PEGASUS)
    state parse_pegasus {
        meta.is_proto = 1;
        pkt.extract(hdr.pegasus);
        pkt.extract(hdr.pegasus_pre);
        transition accept;
    }
#endif

#if defined(NETKV_PARSE_KVSWITCH)
    state parse_kvswitch {
        meta.is_proto = 1;
        pkt.extract(hdr.kvswitch);
        transition accept;
    }
#endif

#if defined(NETKV_PARSE_STARCACHE)
    state parse_starcache {
        meta.is_proto = 1;
        pkt.extract(hdr.starcache);
        pkt.extract(hdr.starcache_pre);
        transition accept;
    }
#endif

#if defined(NETKV_PARSE_NETLR)
    state parse_netlr {
        meta.is_proto = 1;
        pkt.extract(hdr.netlr);
        transition accept;
    }
#endif

#if defined(NETKV_PARSE_NETMC)
    state parse_netmc {
        meta.is_proto = 1;
        pkt.extract(hdr.netmc);
        meta.mc_srv_left = NETMC_N;
        transition parse_netmc_srv;
    }

    /* SRV[0..N-1]: a fixed depth, whatever the key count (digest §3) */
    state parse_netmc_srv {
        pkt.extract(hdr.netmc_srv.next);
        meta.mc_srv_left = meta.mc_srv_left - 1;
        transition select(meta.mc_srv_left) {
            0: parse_netmc_pre;
            default: parse_netmc_srv;
        }
    }

    state parse_netmc_pre {
        pkt.extract(hdr.netmc_pre);
        transition accept;
    }
#endif

#if defined(NETKV_PARSE_NETCACHE)
    state parse_netcache {
        meta.is_proto = 1;
        pkt.extract(hdr.netcache);
        /* The value area is vlen rounded up to 16 B. Values of up to 128 B
         * (NETCACHE_VALUE_SLICES slices, the largest cacheable value) are
         * extracted; larger ones stay unparsed payload. */
        transition select(hdr.netcache.vlen) {
            16w0: accept;
            16w0 &&& 16w0xFF80: parse_nc_values;    /* 1..127 */
            16w128: parse_nc_values;
            default: accept;
        }
    }

    state parse_nc_values {
        meta.nc_slices = (bit<8>)((hdr.netcache.vlen + 15) >> 4);
        transition parse_nc_value;
    }

    state parse_nc_value {
        pkt.extract(hdr.nc_value.next);
        meta.nc_slices = meta.nc_slices - 1;
        transition select(meta.nc_slices) {
            0: accept;
            default: parse_nc_value;
        }
    }
#endif
