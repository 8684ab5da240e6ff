// A stand-in for libnccl.so.2 for package nccl's tests: ranks are threads
// of one process (each driving its own fake device), device memory is host
// memory, and operations run on their stream's thread (fake.cpp), like
// NCCL's kernels: a call returns at once, and cuStreamQuery on its stream
// reports "not ready" until every rank has joined the operation. So a rank that
// never shows up leaves the others' streams busy (the hang the watchdog must
// end), and ncclCommAbort on one rank makes the others' async error
// ncclRemoteError. Semantics follow NCCL's documentation: sums in rank
// order, in-place allowed, group calls batched until ncclGroupEnd, send and
// recv matched in order per pair. The ABI is NCCL's: ncclUniqueId is a
// 128-byte struct passed by value.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <string>
#include <thread>
#include <vector>

void fake_enqueue(void* s, std::function<void()> fn);

typedef struct { char internal[128]; } ncclUniqueId;
typedef int ncclResult_t;
enum { ncclSuccess = 0, ncclUnhandledCudaError = 1, ncclSystemError = 2, ncclInternalError = 3, ncclInvalidArgument = 4,
       ncclInvalidUsage = 5, ncclRemoteError = 6, ncclInProgress = 7 };
enum { ncclInt8 = 0, ncclUint8 = 1, ncclInt32 = 2, ncclUint32 = 3, ncclInt64 = 4, ncclUint64 = 5, ncclFloat16 = 6,
       ncclFloat32 = 7, ncclFloat64 = 8 };

struct Config { size_t size; unsigned magic; unsigned version; int blocking; };

enum Kind { K_ALLGATHER, K_REDUCESCATTER, K_ALLREDUCE, K_BROADCAST, K_REDUCE, K_SEND, K_RECV };
struct Op { Kind kind; const void* send; void* recv; size_t count; int dt; int peer; void* stream; };
struct Slot { const void* send; size_t count; int dt; int kind; int root; };
struct Msg { const void* p; size_t bytes; bool* done; };

struct Group {
	int n;
	std::string key;
	std::mutex mu;
	std::condition_variable cv;
	int joined = 0;
	std::vector<bool> present;
	bool failed = false;
	long gen = 0;
	int arrived = 0;
	std::vector<Slot> slots, all;
	std::map<std::pair<int, int>, std::deque<Msg>> mail;
	int members = 0;
};

struct Comm {
	Group* g;
	int rank, n;
	bool nonblocking;
	std::atomic<int> state{ncclSuccess};
	std::atomic<bool> aborted{false};
	std::atomic<bool> launch_pending{false};
};

static std::mutex groups_mu;
static std::map<std::string, Group*> groups;
static std::atomic<long> id_counter{0};
static thread_local int group_depth;
static thread_local std::vector<std::pair<Comm*, Op>> group_ops;

static size_t esize(int dt) {
	switch (dt) {
	case ncclInt8: case ncclUint8: return 1;
	case ncclFloat16: return 2;
	case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
	default: return 8;
	}
}

// accumulate adds n elements of src into the double/int64 accumulator.
static void accumulate(std::vector<double>& accd, std::vector<long long>& acci, int dt, const void* src, size_t n) {
	for (size_t i = 0; i < n; i++) {
		switch (dt) {
		case ncclFloat32: accd[i] += ((const float*)src)[i]; break;
		case ncclFloat64: accd[i] += ((const double*)src)[i]; break;
		case ncclInt64: acci[i] += ((const long long*)src)[i]; break;
		case ncclInt32: acci[i] += ((const int*)src)[i]; break;
		}
	}
}
static void store(std::vector<char>& out, int dt, const std::vector<double>& accd, const std::vector<long long>& acci, size_t n) {
	out.resize(n * esize(dt));
	for (size_t i = 0; i < n; i++) {
		switch (dt) {
		case ncclFloat32: ((float*)out.data())[i] = (float)accd[i]; break;
		case ncclFloat64: ((double*)out.data())[i] = accd[i]; break;
		case ncclInt64: ((long long*)out.data())[i] = acci[i]; break;
		case ncclInt32: ((int*)out.data())[i] = (int)acci[i]; break;
		}
	}
}

// round deposits this rank's slot and waits for every rank's; false when
// the group failed or this communicator was aborted first.
static bool round(Comm* c, Slot mine, std::vector<Slot>& all) {
	Group* g = c->g;
	std::unique_lock<std::mutex> lk(g->mu);
	long my = g->gen;
	g->slots[c->rank] = mine;
	g->arrived++;
	if (g->arrived == g->n) {
		g->all = g->slots;
		g->arrived = 0;
		g->gen++;
		g->cv.notify_all();
	} else {
		g->cv.wait(lk, [&] { return g->gen != my || g->failed || c->aborted; });
	}
	if (g->gen == my) {
		g->arrived--;
		return false;
	}
	all = g->all;
	return true;
}

static int fail_code(Comm* c) { return c->aborted ? ncclInvalidUsage : ncclRemoteError; }

static int run_collective(Comm* c, const Op& op) {
	std::vector<Slot> all;
	Slot mine{op.send, op.count, op.dt, op.kind, op.peer};
	if (!round(c, mine, all)) return fail_code(c);
	for (int r = 0; r < c->n; r++)
		if (all[r].kind != op.kind || all[r].count != op.count || all[r].dt != op.dt || all[r].root != op.peer) {
			fprintf(stderr, "fake nccl: rank %d issued a different collective than rank %d\n", r, c->rank);
			return ncclInvalidUsage;
		}
	size_t es = esize(op.dt);
	std::vector<char> tmp;
	bool write = true;
	switch (op.kind) {
	case K_ALLGATHER:
		tmp.resize(op.count * es * c->n);
		for (int r = 0; r < c->n; r++) memcpy(tmp.data() + r * op.count * es, all[r].send, op.count * es);
		break;
	case K_BROADCAST:
		tmp.resize(op.count * es);
		memcpy(tmp.data(), all[op.peer].send, op.count * es);
		break;
	case K_ALLREDUCE: case K_REDUCE: case K_REDUCESCATTER: {
		size_t n = op.count, off = op.kind == K_REDUCESCATTER ? c->rank * op.count : 0;
		std::vector<double> accd(n);
		std::vector<long long> acci(n);
		for (int r = 0; r < c->n; r++) accumulate(accd, acci, op.dt, (const char*)all[r].send + off * es, n);
		store(tmp, op.dt, accd, acci, n);
		write = op.kind != K_REDUCE || c->rank == op.peer;
		break;
	}
	default:
		return ncclInternalError;
	}
	// Second round: nobody writes until everyone has read.
	if (!round(c, mine, all)) return fail_code(c);
	if (write && !tmp.empty()) memcpy(op.recv, tmp.data(), tmp.size());
	return ncclSuccess;
}

static int run_p2p(Comm* c, std::vector<Op>& ops) {
	Group* g = c->g;
	std::vector<bool*> mine;
	{
		std::lock_guard<std::mutex> lk(g->mu);
		for (auto& op : ops)
			if (op.kind == K_SEND) {
				bool* done = new bool(false);
				mine.push_back(done);
				g->mail[{c->rank, op.peer}].push_back(Msg{op.send, op.count * esize(op.dt), done});
			}
		g->cv.notify_all();
	}
	int rc = ncclSuccess;
	std::unique_lock<std::mutex> lk(g->mu);
	for (auto& op : ops) {
		if (op.kind != K_RECV) continue;
		auto& box = g->mail[{op.peer, c->rank}];
		g->cv.wait(lk, [&] { return !box.empty() || g->failed || c->aborted; });
		if (box.empty()) { rc = fail_code(c); break; }
		Msg m = box.front();
		box.pop_front();
		if (m.bytes != op.count * esize(op.dt)) { rc = ncclInvalidUsage; *m.done = true; break; }
		memcpy(op.recv, m.p, m.bytes);
		*m.done = true;
		g->cv.notify_all();
	}
	if (rc == ncclSuccess)
		g->cv.wait(lk, [&] {
			for (bool* d : mine) if (!*d) return g->failed || c->aborted;
			return true;
		});
	for (bool* d : mine)
		if (!*d) rc = fail_code(c);
	// Leaked on failure: a peer may still hold the pointer.
	if (rc == ncclSuccess) for (bool* d : mine) delete d;
	return rc;
}

// run_batch executes one call or one group's calls, on the stream's thread.
static void run_batch(Comm* c, std::vector<Op>& batch) {
	int rc = ncclSuccess;
	if (c->aborted) rc = ncclInvalidUsage;
	std::vector<Op> p2p;
	for (auto& op : batch) {
		if (rc != ncclSuccess) break;
		if (op.kind == K_SEND || op.kind == K_RECV) { p2p.push_back(op); continue; }
		rc = run_collective(c, op);
	}
	if (rc == ncclSuccess && !p2p.empty()) rc = run_p2p(c, p2p);
	if (rc != ncclSuccess && c->state == ncclSuccess) c->state = rc;
}

// submit queues a batch on its stream, like NCCL's kernels.
static void submit(Comm* c, std::vector<Op> batch) {
	void* st = batch[0].stream;
	fake_enqueue(st, [c, batch]() mutable { run_batch(c, batch); });
}

static ncclResult_t enqueue(Comm* c, Op op) {
	if (c->aborted) return ncclInvalidUsage;
	if (group_depth > 0) {
		group_ops.push_back({c, op});
		return ncclSuccess;
	}
	submit(c, {op});
	return ncclSuccess;
}

extern "C" {

ncclResult_t ncclGetVersion(int* v) { *v = 22703; return ncclSuccess; }
const char* ncclGetErrorString(ncclResult_t r) {
	switch (r) {
	case ncclSuccess: return "no error";
	case ncclInvalidArgument: return "invalid argument";
	case ncclInvalidUsage: return "invalid usage";
	case ncclRemoteError: return "remote process exited or there was a network error";
	case ncclInProgress: return "NCCL operation in progress";
	default: return "unknown result code";
	}
}
const char* ncclGetLastError(void* comm) { return "fake nccl"; }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
	memset(id->internal, 0, sizeof id->internal);
	long k = ++id_counter;
	snprintf(id->internal, sizeof id->internal, "fake-nccl-id-%ld-%p", k, (void*)id);
	id->internal[127] = 0x5a; // the last byte must arrive too
	return ncclSuccess;
}

static ncclResult_t init(Comm** out, int n, ncclUniqueId id, int rank, bool nonblocking) {
	if (n <= 0 || rank < 0 || rank >= n || id.internal[127] != 0x5a) return ncclInvalidArgument;
	std::string key(id.internal, sizeof id.internal);
	Group* g;
	{
		std::lock_guard<std::mutex> lk(groups_mu);
		auto it = groups.find(key);
		if (it == groups.end()) {
			g = new Group();
			g->n = n;
			g->key = key;
			g->present.assign(n, false);
			g->slots.resize(n);
			groups[key] = g;
		} else g = it->second;
	}
	Comm* c = new Comm();
	{
		std::lock_guard<std::mutex> lk(g->mu);
		if (g->n != n || g->present[rank]) { delete c; return ncclInvalidArgument; }
		g->present[rank] = true;
		g->joined++;
		g->members++;
		g->cv.notify_all();
	}
	c->g = g;
	c->rank = rank;
	c->n = n;
	c->nonblocking = nonblocking;
	*out = c;
	if (nonblocking) {
		c->state = ncclInProgress;
		return ncclInProgress;
	}
	std::unique_lock<std::mutex> lk(g->mu);
	g->cv.wait(lk, [&] { return g->joined == g->n; });
	return ncclSuccess;
}

ncclResult_t ncclCommInitRank(Comm** comm, int n, ncclUniqueId id, int rank) { return init(comm, n, id, rank, false); }

ncclResult_t ncclCommInitRankConfig(Comm** comm, int n, ncclUniqueId id, int rank, Config* cfg) {
	bool nonblocking = false;
	if (cfg) {
		if (cfg->magic != 0xcafebeef || cfg->size < 20 || cfg->version < 21400) return ncclInvalidArgument;
		nonblocking = cfg->blocking == 0;
	}
	return init(comm, n, id, rank, nonblocking);
}

ncclResult_t ncclCommGetAsyncError(Comm* c, ncclResult_t* err) {
	if (c->state == ncclInProgress) {
		std::lock_guard<std::mutex> lk(c->g->mu);
		if (c->g->failed) c->state = ncclRemoteError;
		else if (c->g->joined == c->g->n) c->state = ncclSuccess;
	}
	if (c->launch_pending.exchange(false) && c->state == ncclSuccess) { *err = ncclInProgress; return ncclSuccess; }
	if (c->state == ncclSuccess && !c->aborted) {
		std::lock_guard<std::mutex> lk(c->g->mu);
		if (c->g->failed) c->state = ncclRemoteError;
	}
	*err = c->state;
	return ncclSuccess;
}

// Communicators and groups are never freed: a stream may still run a
// failed operation that points at them (a test-only leak).
static void leave(Comm* c) {
	std::lock_guard<std::mutex> lk(c->g->mu);
	c->g->members--;
}

ncclResult_t ncclCommAbort(Comm* c) {
	c->aborted = true;
	{
		std::lock_guard<std::mutex> lk(c->g->mu);
		c->g->failed = true;
		c->g->cv.notify_all();
	}
	leave(c);
	return ncclSuccess;
}

ncclResult_t ncclCommFinalize(Comm* c) { return ncclSuccess; }

ncclResult_t ncclCommDestroy(Comm* c) {
	leave(c);
	return ncclSuccess;
}

ncclResult_t ncclCommCount(Comm* c, int* n) { *n = c->n; return ncclSuccess; }
ncclResult_t ncclCommUserRank(Comm* c, int* r) { *r = c->rank; return ncclSuccess; }

ncclResult_t ncclGroupStart() { group_depth++; return ncclSuccess; }
ncclResult_t ncclGroupEnd() {
	if (group_depth == 0) return ncclInvalidUsage;
	if (--group_depth > 0) return ncclSuccess;
	std::map<Comm*, std::vector<Op>> by;
	std::vector<Comm*> order;
	for (auto& p : group_ops) {
		if (!by.count(p.first)) order.push_back(p.first);
		by[p.first].push_back(p.second);
	}
	group_ops.clear();
	bool nb = false;
	for (Comm* c : order) {
		submit(c, by[c]);
		if (c->nonblocking) { c->launch_pending = true; nb = true; }
	}
	return nb ? ncclInProgress : ncclSuccess;
}

ncclResult_t ncclAllGather(const void* s, void* r, size_t count, int dt, Comm* c, void* st) {
	return enqueue(c, Op{K_ALLGATHER, s, r, count, dt, 0, st});
}
ncclResult_t ncclReduceScatter(const void* s, void* r, size_t count, int dt, int op, Comm* c, void* st) {
	if (op != 0) return ncclInvalidArgument;
	return enqueue(c, Op{K_REDUCESCATTER, s, r, count, dt, 0, st});
}
ncclResult_t ncclAllReduce(const void* s, void* r, size_t count, int dt, int op, Comm* c, void* st) {
	if (op != 0) return ncclInvalidArgument;
	return enqueue(c, Op{K_ALLREDUCE, s, r, count, dt, 0, st});
}
ncclResult_t ncclBroadcast(const void* s, void* r, size_t count, int dt, int root, Comm* c, void* st) {
	if (root < 0 || root >= c->n) return ncclInvalidArgument;
	return enqueue(c, Op{K_BROADCAST, s, r, count, dt, root, st});
}
ncclResult_t ncclReduce(const void* s, void* r, size_t count, int dt, int op, int root, Comm* c, void* st) {
	if (op != 0 || root < 0 || root >= c->n) return ncclInvalidArgument;
	return enqueue(c, Op{K_REDUCE, s, r, count, dt, root, st});
}
ncclResult_t ncclSend(const void* s, size_t count, int dt, int peer, Comm* c, void* st) {
	if (peer < 0 || peer >= c->n) return ncclInvalidArgument;
	return enqueue(c, Op{K_SEND, s, nullptr, count, dt, peer, st});
}
ncclResult_t ncclRecv(void* r, size_t count, int dt, int peer, Comm* c, void* st) {
	if (peer < 0 || peer >= c->n) return ncclInvalidArgument;
	return enqueue(c, Op{K_RECV, nullptr, r, count, dt, peer, st});
}

} // extern "C"
