//go:build rreffabric && cgo && linux

package bench

/*
#cgo LDFLAGS: -lfabric
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_errno.h>

// ff_end is one side of the floor's ping-pong: an endpoint with a region
// the other side writes into.
typedef struct {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
	struct fid_mr *mr;
	fi_addr_t peer;
	uint64_t raddr, rkey; // where, and with which key, it writes the other's region
	char *buf;
} ff_end;

// ff_run is one ping-pong: two ends, each run on its own thread.
typedef struct {
	ff_end end[2];
	size_t size;
	int iters;
	int64_t *ns; // iters round trips, timed by end 0
	int err;
	char why[256];
} ff_run;

// ff_fail records the run's first failure; both threads may fail at once.
static void ff_fail(ff_run *r, const char *what, int ret) {
	int none = 0;
	if (__atomic_compare_exchange_n(&r->err, &none, ret ? ret : -FI_EOTHER, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
		snprintf(r->why, sizeof r->why, "%s: %s", what, fi_strerror(ret < 0 ? -ret : ret));
	}
}

static int ff_failed(ff_run *r) { return __atomic_load_n(&r->err, __ATOMIC_SEQ_CST); }

static int ff_open(ff_run *r, ff_end *e, const char *prov) {
	struct fi_info *h = fi_allocinfo();
	if (!h) { ff_fail(r, "fi_allocinfo", -FI_ENOMEM); return -1; }
	h->caps = FI_RMA | FI_WRITE | FI_REMOTE_WRITE;
	h->mode = 0;
	h->ep_attr->type = FI_EP_RDM;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
	h->domain_attr->cq_data_size = 4;
	h->fabric_attr->prov_name = strdup(prov);
	int ret = fi_getinfo(FI_VERSION(1, 9), NULL, NULL, 0, h, &e->info);
	fi_freeinfo(h);
	if (ret) { ff_fail(r, "fi_getinfo", ret); return -1; }
	if ((ret = fi_fabric(e->info->fabric_attr, &e->fabric, NULL))) { ff_fail(r, "fi_fabric", ret); return -1; }
	if ((ret = fi_domain(e->fabric, e->info, &e->domain, NULL))) { ff_fail(r, "fi_domain", ret); return -1; }
	struct fi_cq_attr cqa;
	memset(&cqa, 0, sizeof cqa);
	cqa.format = FI_CQ_FORMAT_DATA;
	cqa.wait_obj = FI_WAIT_NONE;
	if ((ret = fi_cq_open(e->domain, &cqa, &e->cq, NULL))) { ff_fail(r, "fi_cq_open", ret); return -1; }
	struct fi_av_attr ava;
	memset(&ava, 0, sizeof ava);
	ava.type = FI_AV_UNSPEC;
	if ((ret = fi_av_open(e->domain, &ava, &e->av, NULL))) { ff_fail(r, "fi_av_open", ret); return -1; }
	if ((ret = fi_endpoint(e->domain, e->info, &e->ep, NULL))) { ff_fail(r, "fi_endpoint", ret); return -1; }
	if ((ret = fi_ep_bind(e->ep, &e->av->fid, 0))) { ff_fail(r, "fi_ep_bind av", ret); return -1; }
	if ((ret = fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV))) { ff_fail(r, "fi_ep_bind cq", ret); return -1; }
	if ((ret = fi_enable(e->ep))) { ff_fail(r, "fi_enable", ret); return -1; }
	if (posix_memalign((void **)&e->buf, 4096, r->size < 4096 ? 4096 : r->size)) { ff_fail(r, "posix_memalign", -FI_ENOMEM); return -1; }
	memset(e->buf, 0, r->size);
	if ((ret = fi_mr_reg(e->domain, e->buf, r->size, FI_REMOTE_WRITE | FI_WRITE, 0, 0, 0, &e->mr, NULL))) { ff_fail(r, "fi_mr_reg", ret); return -1; }
	if (e->info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		if ((ret = fi_mr_bind(e->mr, &e->ep->fid, 0))) { ff_fail(r, "fi_mr_bind", ret); return -1; }
		if ((ret = fi_mr_enable(e->mr))) { ff_fail(r, "fi_mr_enable", ret); return -1; }
	}
	return 0;
}

static void ff_close(ff_end *e) {
	if (e->ep) fi_close(&e->ep->fid);
	if (e->mr) fi_close(&e->mr->fid);
	if (e->av) fi_close(&e->av->fid);
	if (e->cq) fi_close(&e->cq->fid);
	if (e->domain) fi_close(&e->domain->fid);
	if (e->fabric) fi_close(&e->fabric->fid);
	if (e->info) fi_freeinfo(e->info);
	free(e->buf);
}

// ff_connect tells each end where the other's region is.
static int ff_connect(ff_run *r) {
	for (int i = 0; i < 2; i++) {
		ff_end *e = &r->end[i], *o = &r->end[1 - i];
		char name[256];
		size_t len = sizeof name;
		int ret = fi_getname(&o->ep->fid, name, &len);
		if (ret) { ff_fail(r, "fi_getname", ret); return -1; }
		ret = fi_av_insert(e->av, name, 1, &e->peer, 0, NULL);
		if (ret != 1) { ff_fail(r, "fi_av_insert", ret < 0 ? ret : -FI_EINVAL); return -1; }
		e->raddr = (o->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)o->buf : 0;
		e->rkey = fi_mr_key(o->mr);
	}
	return 0;
}

// ff_wait polls e's queue until the other's write arrives.
static int ff_wait(ff_run *r, ff_end *e) {
	struct fi_cq_data_entry ent;
	for (;;) {
		ssize_t n = fi_cq_read(e->cq, &ent, 1);
		if (n == 1) return 0;
		if (n != -FI_EAGAIN) { ff_fail(r, "fi_cq_read", (int)n); return -1; }
		if (ff_failed(r)) return -1; // the other thread failed
	}
}

static int ff_put(ff_run *r, ff_end *e) {
	for (;;) {
		ssize_t ret = fi_inject_writedata(e->ep, e->buf, r->size, 1, e->peer, e->raddr, e->rkey);
		if (ret == 0) return 0;
		if (ret != -FI_EAGAIN) { ff_fail(r, "fi_inject_writedata", (int)ret); return -1; }
		if (ff_failed(r)) return -1; // the other thread failed: no one drains the queue
		struct fi_cq_data_entry ent;
		fi_cq_read(e->cq, &ent, 0); // progress, for providers that move data only when called
	}
}

static int64_t ff_now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void *ff_echo(void *arg) {
	ff_run *r = arg;
	for (int i = 0; i < r->iters; i++) {
		if (ff_wait(r, &r->end[1]) || ff_put(r, &r->end[1])) break;
	}
	return NULL;
}

// ff_pingpong bounces size bytes iters times between two endpoints of
// provider prov in this process, one thread each, and times each round
// trip. The size must fit in the provider's inject size.
static int ff_pingpong(const char *prov, size_t size, int iters, int64_t *ns, char *why, size_t whylen) {
	ff_run *r = calloc(1, sizeof *r);
	if (!r) return -FI_ENOMEM;
	r->size = size; r->iters = iters; r->ns = ns;
	if (!ff_open(r, &r->end[0], prov) && !ff_open(r, &r->end[1], prov) && !ff_connect(r)) {
		if (size > r->end[0].info->tx_attr->inject_size) ff_fail(r, "the size is past the provider's inject size", -FI_EINVAL);
	}
	pthread_t echo;
	int started = !r->err && pthread_create(&echo, NULL, ff_echo, r) == 0;
	if (!r->err && !started) ff_fail(r, "pthread_create", -FI_EOTHER);
	for (int i = 0; !ff_failed(r) && i < iters; i++) {
		int64_t t0 = ff_now();
		if (ff_put(r, &r->end[0]) || ff_wait(r, &r->end[0])) break;
		ns[i] = ff_now() - t0;
	}
	if (started) pthread_join(echo, NULL);
	int err = ff_failed(r);
	snprintf(why, whylen, "%s", r->why);
	ff_close(&r->end[0]);
	ff_close(&r->end[1]);
	free(r);
	return err;
}
*/
import "C"

import (
	"fmt"
	"time"
	"unsafe"
)

// fabricFloor is the least a ping-pong built as the fabric provider's puts
// pays over a libfabric provider: two endpoints bounce a size-byte RMA
// inject write with remote CQ data, each side polling its completion queue
// on a thread of its own, in C, with no Go runtime between. Its one-way
// latencies (each round trip halved) are the yardstick for the fifo/fabric
// row's tail: what of the tail is the provider's and the host's, and what
// is the Go side's.
func fabricFloor(provider string, size, iters int) ([]time.Duration, error) {
	if iters <= 0 {
		return nil, fmt.Errorf("bench: fabric floor: %d round trips", iters)
	}
	cprov := C.CString(provider)
	defer C.free(unsafe.Pointer(cprov))
	var why [256]C.char
	// In C memory: the timing thread is C's own, which Go memory may not
	// be handed to past the call that passes it.
	cns := (*C.int64_t)(C.malloc(C.size_t(iters) * 8))
	if cns == nil {
		return nil, fmt.Errorf("bench: fabric floor: out of memory")
	}
	defer C.free(unsafe.Pointer(cns))
	if ret := C.ff_pingpong(cprov, C.size_t(size), C.int(iters), cns, &why[0], C.size_t(len(why))); ret != 0 {
		return nil, fmt.Errorf("bench: fabric floor over %s: %s", provider, C.GoString(&why[0]))
	}
	out := make([]time.Duration, iters)
	for i, v := range unsafe.Slice((*int64)(unsafe.Pointer(cns)), iters) {
		out[i] = time.Duration(v) / 2
	}
	return out, nil
}
