/* test_sim.c - the discrete-event engine: queueing closed forms, determinism,
 * epochs, faults, crashes; prints the engine's speed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "netkv/sim.h"
#include "netkv/wire.h"

#include "expect.h"

static struct nk_workload *mkwl(uint32_t servers, uint32_t keys, double alpha)
{
	struct nk_workload_cfg wc = {.kind = alpha > 0 ? NK_WL_ZIPF : NK_WL_UNIFORM,
				     .n_keys = keys, .alpha = alpha, .seed = 1, .key_size = 64,
				     .n_servers = servers, .vnodes = 16, .n_value_classes = 1,
				     .value_sizes = {128}, .value_weights = {1}};
	char err[200];
	struct nk_workload *wl = nk_workload_new(&wc, err, sizeof(err));
	if (!wl)
		fprintf(stderr, "workload: %s\n", err);
	return wl;
}

/* one server, no network delay: latency = sojourn time */
static struct nk_sim_cfg queue_cfg(double rho, uint32_t service, double duration)
{
	struct nk_sim_cfg c = {.protocol = "hash", .n_servers = 1, .n_clients = 1, .seed = 11,
			       .offered_rps = rho / 5e-6, .duration_s = duration, .drain_s = 0.05,
			       .workers = 1, .service = service, .service_ns = 5000.0,
			       .cpu_queue = 16};
	return c;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(void)
{
	char err[200];
	struct nk_sim_stats st;
	struct nk_workload *wl1 = mkwl(1, 1000, 0.0);
	if (!wl1)
		return 1;

	/* M/M/1 at rho = 0.5: W = 1/(mu - lambda), p99 = ln(100) W */
	struct nk_sim_cfg c = queue_cfg(0.5, NK_SERVICE_EXPONENTIAL, 2.0);
	struct nk_sim *s = nk_sim_new(&c, wl1, err, sizeof(err));
	CHECK(s != NULL, "sim: %s", err);
	if (!s)
		return 1;
	nk_sim_run(s);
	nk_sim_stats(s, &st);
	double W = 5000.0 / (1 - 0.5);
	CHECK(fabs(st.mean_ns / W - 1) < 0.03, "M/M/1 mean %g vs %g", st.mean_ns, W);
	CHECK(fabs(st.p99_ns / (W * log(100.0)) - 1) < 0.03, "M/M/1 p99 %g vs %g", st.p99_ns,
	      W * log(100.0));
	CHECK(st.completed == st.issued && st.unfinished == 0, "all complete");
	printf("M/M/1 rho=0.5: mean %.0f ns (theory %.0f), p99 %.0f (theory %.0f), %llu requests\n",
	       st.mean_ns, W, st.p99_ns, W * log(100.0), (unsigned long long)st.completed);
	struct nk_sim_stats first = st;
	nk_sim_free(s);

	/* determinism, and epochs do not change the result */
	s = nk_sim_new(&c, wl1, err, sizeof(err));
	for (double t = 0; !nk_sim_run_until(s, t); t += 1e6)
		;
	nk_sim_stats(s, &st);
	CHECK(st.completed == first.completed && st.mean_ns == first.mean_ns &&
		      st.p99_ns == first.p99_ns && st.events == first.events,
	      "epoch-stepped run differs");
	nk_sim_free(s);

	/* M/D/1 at rho = 0.8: W = 1/mu + rho / (2 mu (1 - rho)) */
	c = queue_cfg(0.8, NK_SERVICE_DETERMINISTIC, 1.0);
	s = nk_sim_new(&c, wl1, err, sizeof(err));
	nk_sim_run(s);
	nk_sim_stats(s, &st);
	W = 5000.0 + 0.8 * 5000.0 / (2 * (1 - 0.8));
	CHECK(fabs(st.mean_ns / W - 1) < 0.03, "M/D/1 mean %g vs %g", st.mean_ns, W);
	printf("M/D/1 rho=0.8: mean %.0f ns (theory %.0f)\n", st.mean_ns, W);
	nk_sim_free(s);

	/* loss 1% on every link: completion = 0.99^4 */
	struct nk_workload *wl16 = mkwl(16, 100000, 0.99);
	struct nk_sim_cfg h = {.protocol = "hash", .n_servers = 16, .n_clients = 4, .seed = 5,
			       .offered_rps = 1e6, .duration_s = 0.2, .drain_s = 0.05,
			       .link_latency_ns = 1000, .link_gbps = 25, .switch_latency_ns = 500,
			       .frame_overhead = 42, .workers = 1,
			       .service = NK_SERVICE_EXPONENTIAL, .service_ns = 5000,
			       .cpu_queue = 16, .loss = 0.01, .window_s = 0.01};
	s = nk_sim_new(&h, wl16, err, sizeof(err));
	CHECK(s != NULL, "sim: %s", err);
	nk_sim_run(s);
	nk_sim_stats(s, &st);
	double comp = (double)st.completed / (double)st.issued;
	CHECK(fabs(comp - pow(0.99, 4)) < 0.003, "loss: completion %g", comp);
	CHECK(st.drop_loss == st.dropped && st.unfinished == st.issued - st.completed,
	      "lost requests stay unfinished");
	printf("loss 1%%/link: completion %.4f (expected %.4f)\n", comp, pow(0.99, 4));
	nk_sim_free(s);

	/* timeouts + retries recover the losses */
	h.timeout_ns = 200000;
	h.retries = 5;
	s = nk_sim_new(&h, wl16, err, sizeof(err));
	nk_sim_run(s);
	nk_sim_stats(s, &st);
	CHECK(st.completed == st.issued && st.retries > 0, "retries: %llu of %llu, %llu retries",
	      (unsigned long long)st.completed, (unsigned long long)st.issued,
	      (unsigned long long)st.retries);
	nk_sim_free(s);

	/* crash: a server down for 50 ms loses its share, restart recovers */
	h.loss = 0;
	h.timeout_ns = 0;
	h.retries = 0;
	s = nk_sim_new(&h, wl16, err, sizeof(err));
	CHECK(nk_sim_schedule_crash(s, 3, 50e6, 100e6) == 0, "schedule crash");
	nk_sim_run(s);
	nk_sim_stats(s, &st);
	uint64_t counts[16];
	nk_sim_server_counts(s, counts);
	CHECK(st.drop_crash > 0 && st.completed < st.issued, "crash drops");
	uint64_t comp_w[32], lost_w[32], lost = 0;
	uint32_t nw = nk_sim_timeline(s, NULL, comp_w, lost_w, NULL, NULL, 32);
	CHECK(nw == 25, "windows %u", nw);
	CHECK(lost_w[2] == 0 && lost_w[6] > 0 && lost_w[12] == 0, "lost only while down");
	for (uint32_t w = 0; w < nw; w++)
		lost += lost_w[w];
	CHECK(lost == st.issued - st.completed, "lost %llu = issued - completed",
	      (unsigned long long)lost);
	nk_sim_free(s);

	/* capture: every request crosses two node ports twice (in and out), the
	 * packet bound stops each file and counts the rest */
	h.duration_s = 0.002;
	h.window_s = 0;
	s = nk_sim_new(&h, wl16, err, sizeof(err));
	CHECK(nk_sim_capture(s, "/nonexistent-dir", 128, 1u << 20, 100, err, sizeof(err)) < 0,
	      "capture into a missing folder fails");
	char capdir[] = "/tmp/netkv-test-sim-XXXXXX";
	CHECK(mkdtemp(capdir) != NULL, "mkdtemp");
	CHECK(nk_sim_capture(s, capdir, 128, 1u << 20, 40, err, sizeof(err)) == 0, "capture: %s",
	      err);
	nk_sim_run(s);
	nk_sim_stats(s, &st);
	uint64_t cap_pk[22], cap_miss[22], cap_busy[22], cap_all = 0;
	uint32_t nf = nk_sim_capture_stats(s, cap_pk, cap_miss, cap_busy, 22);
	CHECK(nf == 21, "capture files %u (16 + 4 node ports, the CPU port)", nf);
	for (uint32_t i = 0; i < nf; i++) {
		CHECK(cap_pk[i] <= 40, "file %u: %llu packets > 40", i, (unsigned long long)cap_pk[i]);
		cap_all += cap_pk[i] + cap_miss[i];
	}
	CHECK(cap_busy[0] > 0, "capture time is measured");
	CHECK(cap_all == 4 * st.completed, "captured %llu frames for %llu requests",
	      (unsigned long long)cap_all, (unsigned long long)st.completed);
	nk_sim_free(s);
	char capf[96];
	for (uint32_t i = 0; i < 20; i++) {
		snprintf(capf, sizeof(capf), "%s/switch-p%u.pcap", capdir, i);
		unlink(capf);
	}
	snprintf(capf, sizeof(capf), "%s/switch-cpu.pcap", capdir);
	unlink(capf);
	rmdir(capdir);
	h.duration_s = 0.2;

	/* racks: a spine and 4 leaves of 4 servers; the same requests reach
	 * the same servers through two switches, each switch counting its own;
	 * what the spine sends for its node 0 (rack 0) to rack 1 is served by
	 * the server of the same index there */
	{
		struct nk_sim_cfg r = h;
		r.duration_s = 0.05;
		r.window_s = 0;
		s = nk_sim_new(&r, wl16, err, sizeof(err));
		nk_sim_run(s);
		struct nk_sim_stats one;
		nk_sim_stats(s, &one);
		uint64_t one_counts[16];
		nk_sim_server_counts(s, one_counts);
		CHECK(nk_sim_switches(s) == 1, "one switch");
		nk_sim_free(s);
		r.racks = 3;
		CHECK(nk_sim_new(&r, wl16, err, sizeof(err)) == NULL && strstr(err, "racks"),
		      "3 racks for 16 servers refused: %s", err);
		r.racks = 4;
		s = nk_sim_new(&r, wl16, err, sizeof(err));
		CHECK(s != NULL, "racks: %s", err);
		CHECK(nk_sim_switches(s) == 5 && nk_sim_select_switch(s, 5) < 0, "5 switches");
		CHECK(nk_sim_schedule_switch_outage(s, 1e6, 2e6) < 0, "no outages with racks");
		CHECK(nk_sim_capture(s, "/tmp", 128, 1u << 20, 10, err, sizeof(err)) < 0,
		      "no capture with racks");
		nk_sim_select_switch(s, 0);
		CHECK(nk_sim_cpu_port(s) == 4 + 4, "spine: 4 racks, 4 clients, then CPU");
		nk_sim_select_switch(s, 2);
		CHECK(nk_sim_cpu_port(s) == 4 + 4, "leaf: 4 servers, 4 clients, then CPU");
		nk_sim_run(s);
		nk_sim_stats(s, &st);
		uint64_t rc[16], pk[5], dr[5], tu[5], td[5], hu[24], hd[24];
		nk_sim_server_counts(s, rc);
		CHECK(nk_sim_switch_stats(s, pk, dr, tu, td, 5) == 5, "switch stats");
		nk_sim_link_bytes(s, hu, hd, 24);
		/* a rack's trunk carries its servers' replies up, requests down */
		for (uint32_t k = 0; k < 4; k++)
			CHECK(tu[1 + k] == hu[4 * k] + hu[4 * k + 1] + hu[4 * k + 2] + hu[4 * k + 3] &&
				      td[1 + k] == hd[4 * k] + hd[4 * k + 1] + hd[4 * k + 2] +
							   hd[4 * k + 3],
			      "trunk %u: %llu up, %llu down", k, (unsigned long long)tu[1 + k],
			      (unsigned long long)td[1 + k]);
		CHECK(tu[0] == 0 && td[0] == 0, "the spine has no trunk of its own");
		CHECK(st.completed == st.issued && st.issued == one.issued && st.dropped == 0,
		      "racks: %llu of %llu", (unsigned long long)st.completed,
		      (unsigned long long)st.issued);
		CHECK(!memcmp(rc, one_counts, sizeof(rc)), "the same servers as on one switch");
		CHECK(pk[0] == 2 * st.completed, "spine %llu packets", (unsigned long long)pk[0]);
		for (uint32_t k = 0; k < 4; k++) {
			uint64_t rack = rc[4 * k] + rc[4 * k + 1] + rc[4 * k + 2] + rc[4 * k + 3];
			CHECK(pk[1 + k] == 2 * rack && dr[1 + k] == 0, "leaf %u: %llu packets", k,
			      (unsigned long long)pk[1 + k]);
		}
		CHECK(st.mean_ns > one.mean_ns + 2 * (1000 + 500), "two more hops: %g vs %g",
		      st.mean_ns, one.mean_ns);
		nk_sim_free(s);
		s = nk_sim_new(&r, wl16, err, sizeof(err));
		uint64_t key = 0, port = 1;
		nk_sim_select_switch(s, 0);
		CHECK(nk_sim_table_add(s, "node_fwd", &key, 1, &port, 1) == 0, "node_fwd");
		nk_sim_run(s);
		nk_sim_server_counts(s, rc);
		for (uint32_t i = 0; i < 4; i++)
			CHECK(rc[i] == 0 && rc[4 + i] == one_counts[4 + i] + one_counts[i] &&
				      rc[8 + i] == one_counts[8 + i],
			      "rack 0 -> rack 1: server %u's requests at server %u (%llu)", i, 4 + i,
			      (unsigned long long)rc[4 + i]);
		nk_sim_free(s);
	}

	/* speed: hash, 16 servers, 1M keys, zipf 0.99 at 80% of capacity */
	struct nk_workload *wlp = mkwl(16, 1000000, 0.99);
	struct nk_sim_cfg p = h;
	p.loss = 0;
	p.offered_rps = 0.8 * 16 / 5e-6 * 0.25;  /* the busiest server is ~3-4x mean */
	p.duration_s = 1.0;
	p.window_s = 0;
	s = nk_sim_new(&p, wlp, err, sizeof(err));
	double t0 = now_s();
	nk_sim_run(s);
	double dt = now_s() - t0;
	nk_sim_stats(s, &st);
	printf("speed: %llu requests, %llu events in %.3f s: %.2f M req/s, %.1f M events/s\n",
	       (unsigned long long)st.issued, (unsigned long long)st.events, dt,
	       st.issued / dt / 1e6, st.events / dt / 1e6);
	nk_sim_free(s);

	/* the controller gets a to_cpu copy as the switch received it (as
	 * netkv-switch and the P4 clone do): Pegasus samples every write here,
	 * and the copy carries the client's VER 0, not the stamp */
	struct nk_sim_cfg g = queue_cfg(0.1, NK_SERVICE_DETERMINISTIC, 0.01);
	g.protocol = "pegasus";
	g.params = "sample=1";
	g.n_servers = 16;
	g.write_ratio = 1.0;
	g.cpu_queue = 64;
	s = nk_sim_new(&g, wl16, err, sizeof(err));
	CHECK(s != NULL, "pegasus sim: %s", err);
	if (s) {
		nk_sim_run(s);
		struct nk_msg cm[64];
		uint16_t src[64];
		uint32_t n = nk_sim_cpu_recv(s, cm, src, 64), stamped = 0;
		for (uint32_t i = 0; i < n; i++)
			stamped += cm[i].op == NK_PEGASUS_OP_WRITE && cm[i].ver != 0;
		CHECK(n > 0 && stamped == 0, "CPU copies %u, %u of them stamped", n, stamped);
		nk_sim_free(s);
	}

	nk_workload_free(wlp);
	nk_workload_free(wl16);
	nk_workload_free(wl1);
	printf("test_sim: %s\n", failures ? "FAILED" : "ok");
	return failures ? 1 : 0;
}
